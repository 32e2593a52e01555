// studies/search_compare.cpp — arms of several studies of one problem, compared at one budget.
#include "studies/search_compare.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <sstream>

#include "common/input_error.hpp"
#include "common/readable_number.hpp"
#include "optimizers/search/journal.hpp"
#include "optimizers/algorithms/optimizer.hpp"
#include "optimizers/report/search_report.hpp"
#include "optimizers/report/statistics.hpp"
#include "studies/search_merge.hpp"

namespace shardsim {

namespace {

constexpr double kTarget = 0.99;         // of the best known
constexpr std::uint64_t kBootstrapSeed = 1;

// One run: its budget and its best feasible objective after each evaluation (0 before any, as
// the report's anytime curves), cut to the comparison's budget once it is known.
struct RunTrace {
  std::uint64_t seed = 0;
  long budget = 0;
  std::vector<double> anytime;
  double best() const { return anytime.empty() ? 0 : anytime.back(); }
};

struct Arm {
  std::string label, settings, journal;
  std::vector<RunTrace> runs;
};


// What sets the arm apart: its --policy-in and --param, or "default settings" (neither given —
// which is not the paper's cold start: the rule plans still seed GA and SA unless a --param says not).
std::string settings_of(const json& inputs) {
  std::string s;
  const std::string policy = inputs.value("policy_in", std::string());
  const std::string params = inputs.value("params", std::string());
  if (!policy.empty()) s += "warm start from " + std::filesystem::path(policy).filename().string();
  if (!params.empty()) s += std::string(s.empty() ? "" : "; ") + "--param " + params;
  return s.empty() ? "default settings" : s;
}

// The arms DIR[:OPTIMIZER] stands for, from its journal: OPTIMIZER's runs, or one arm per
// stochastic optimizer of the study, in the study's order. `header` receives the journal's line 1.
std::vector<Arm> read_arms(const std::string& spec, json& header) {
  const auto colon = spec.rfind(':');
  const bool named = colon != std::string::npos && colon + 1 < spec.size() && spec.find('/', colon) == std::string::npos;
  const std::string dir = named ? spec.substr(0, colon) : spec, only = named ? spec.substr(colon + 1) : "";
  const std::string journal = (std::filesystem::path(dir) / kJournalName).string();
  const JournalContents c = read_journal(journal);
  header = c.header;
  const std::string name = std::filesystem::path(dir).lexically_normal().filename().string();
  const std::string settings = settings_of(c.header["inputs"]);
  std::vector<Arm> arms;
  const json& runs = c.header["runs"];
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string o = runs[i]["optimizer"].get<std::string>();
    if (only.empty() ? runs_once(o) : o != only) continue;
    const std::string label = o + " @ " + (name.empty() ? dir : name);
    auto arm = std::find_if(arms.begin(), arms.end(), [&](const Arm& x) { return x.label == label; });
    if (arm == arms.end()) arm = arms.insert(arms.end(), Arm{label, settings, journal, {}});
    // A run's budget is the study's unless it records its own; deterministic runs cut nothing.
    long b = runs[i]["budget"].get<long>();
    if (b <= 0) b = c.header["inputs"].value("budget", 0L);
    if (b <= 0) b = static_cast<long>(c.runs[i].size());  // no budget recorded: what the run did
    if (runs_once(o)) b = std::numeric_limits<long>::max();
    RunTrace t{runs[i]["seed"].get<std::uint64_t>(), b, {}};
    double best = 0;
    for (const ReplayEval& e : c.runs[i]) {
      if (e.eval.score.feasible && !e.eval.score.failed) best = std::max(best, e.eval.score.objective);
      t.anytime.push_back(best);
    }
    arm->runs.push_back(std::move(t));
  }
  if (arms.empty())
    throw InputError(journal, "/runs", only.empty() ? "no stochastic optimizer's runs to compare" : "no run of optimizer \"" + only + "\"");
  return arms;
}

std::string verdict(double p, double a, const char* better, const char* worse) {
  if (p >= 0.05) return "no significant difference";
  return a > 0.5 ? better : worse;
}

// One comparison against the reference: p (Holm-adjusted later), A12 and whether p is exact.
struct Test {
  double p = 1, a = 0.5;
  bool exact = false;
};

Test test(const std::vector<double>& mine, const std::vector<double>& ref) {
  const MannWhitney mw = mann_whitney(mine, ref);
  return {mw.p, a12(mine, ref), mw.exact};
}

// Every arm of every argument; the studies checked to be of one problem. `header`: the first's.
std::vector<Arm> read_all(const std::vector<std::string>& specs, json& header) {
  std::vector<Arm> arms;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    json h;
    std::vector<Arm> more = read_arms(specs[i], h);
    if (i == 0) header = h;
    else
      check_same_problem(header, arms[0].journal, h, more[0].journal,
                         {"optimizers", "seeds", "budget", "params", "policy_in", "policy_in_digest", "threads"},
                         "compare takes studies of one problem: they may differ in optimizers, seeds, budget, --param and --policy-in");
    arms.insert(arms.end(), more.begin(), more.end());
  }
  if (arms.size() < 2)
    throw InputError(arms[0].journal, "/runs", "one arm only: name at least two (DIR:OPTIMIZER, or a study of several optimizers)");
  return arms;
}

// What the table shows of one arm, at the common budget.
struct ArmFigures {
  std::vector<double> bests;    // per run
  std::vector<double> reach;    // per run: evaluations to the target, cut + 1 when never
  std::vector<double> reached;  // those that got there
  Test on_best, on_reach;       // against the reference (p Holm-adjusted)
};

// The common budget, the best known within it (and where), and every arm's figures.
struct Comparison {
  long cut = 0;
  double best_known = 0;
  std::string best_where;
  std::vector<ArmFigures> arms;
};

// Every run cut to the smallest budget among them (or `budget`, if smaller), then measured.
Comparison measure(std::vector<Arm>& arms, long budget) {
  Comparison c;
  c.cut = budget > 0 ? budget : std::numeric_limits<long>::max();
  for (const Arm& a : arms)
    for (const RunTrace& r : a.runs) c.cut = std::min(c.cut, r.budget);
  for (Arm& a : arms)
    for (RunTrace& r : a.runs) {
      if (static_cast<long>(r.anytime.size()) > c.cut) r.anytime.resize(static_cast<std::size_t>(c.cut));
      if (r.best() > c.best_known) {
        c.best_known = r.best();
        c.best_where = a.label + ", seed " + std::to_string(r.seed);
      }
    }
  const double target = kTarget * c.best_known;
  for (const Arm& a : arms) {
    ArmFigures f;
    for (const RunTrace& r : a.runs) {
      f.bests.push_back(r.best());
      const long n = evals_to_reach(r.anytime, target);
      f.reach.push_back(static_cast<double>(n > 0 ? n : c.cut + 1));
      if (n > 0) f.reached.push_back(static_cast<double>(n));
    }
    c.arms.push_back(std::move(f));
  }
  auto sooner = [](std::vector<double> v) {  // negated: higher = sooner, so A12 = P(the arm's run is sooner)
    for (double& x : v) x = -x;
    return v;
  };
  std::vector<double> p_best, p_reach;
  for (std::size_t i = 1; i < arms.size(); ++i) {
    ArmFigures& f = c.arms[i];
    f.on_best = test(f.bests, c.arms[0].bests);
    f.on_reach = test(sooner(f.reach), sooner(c.arms[0].reach));
    p_best.push_back(f.on_best.p);
    p_reach.push_back(f.on_reach.p);
  }
  p_best = holm_adjust(p_best);
  p_reach = holm_adjust(p_reach);
  for (std::size_t i = 1; i < arms.size(); ++i) {
    c.arms[i].on_best.p = p_best[i - 1];
    c.arms[i].on_reach.p = p_reach[i - 1];
  }
  return c;
}

std::string test_cells(const Test& t, const char* better, const char* worse) {
  return formatted("%.3g", t.p) + (t.exact ? "" : " ≈") + " | " + formatted("%.2f", t.a) + " | " + verdict(t.p, t.a, better, worse);
}

std::string render(const std::vector<Arm>& arms, const Comparison& c, const json& inputs, bool budget_given) {
  std::ostringstream o;
  o << "# Arms compared: " << inputs.value("model", std::string("?")) << " on " << inputs.value("cluster", std::string("?"))
    << ", objective " << inputs.value("objective", std::string("?")) << " (larger is better)\n\n"
    << "Every run cut to " << c.cut << " evaluations (the smallest budget among them" << (budget_given ? " or --budget" : "")
    << "). Best known within that: " << readable(c.best_known) << " (" << c.best_where << "); target "
    << readable(kTarget * c.best_known) << " (99%). Reference: **" << arms[0].label << "**. Tests: two-sided Mann–Whitney "
    << "U, p Holm-corrected over the arms; A12 on the best values = the chance that a run of the arm ends above a run of "
    << "the reference; on the evaluations to 99% = the chance that it gets there sooner (a run that never does counts as "
    << "later than any that does).\n\n"
    << "| arm | settings | runs | median best [95% CI] | reached 99% | evals to 99% [95% CI] | best: p (Holm) | A12 | "
       "verdict | to 99%: p (Holm) | A12 | verdict |\n"
    << "|---|---|---:|---|---:|---|---:|---:|---|---:|---:|---|\n";
  for (std::size_t i = 0; i < arms.size(); ++i) {
    const Arm& a = arms[i];
    const ArmFigures& f = c.arms[i];
    o << "| " << a.label << " | " << a.settings << " | " << a.runs.size() << " | " << readable(quantile(f.bests, 0.5)) << " "
      << interval_text(bootstrap_median_interval(f.bests, kBootstrapSeed)) << " | " << f.reached.size() << "/"
      << a.runs.size() << " | "
      << (f.reached.empty() ? "–"
                            : readable(quantile(f.reached, 0.5)) + " " +
                                  interval_text(bootstrap_median_interval(f.reached, kBootstrapSeed)))
      << " | "
      << (i == 0 ? "– | – | the reference | – | – | the reference"
                 : test_cells(f.on_best, "ends higher", "ends lower") + " | " + test_cells(f.on_reach, "sooner", "later"))
      << " |\n";
  }
  return o.str();
}

}  // namespace

std::string compare_studies(const std::vector<std::string>& specs, long budget) {
  if (specs.empty()) throw InputError("search compare", "DIR", "give the arms: study folders, or DIR:OPTIMIZER");
  json header;
  std::vector<Arm> arms = read_all(specs, header);
  const Comparison c = measure(arms, budget);
  return render(arms, c, header["inputs"], budget > 0);
}

}  // namespace shardsim
