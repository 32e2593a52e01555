// tools/cli/search_compare.cpp — arms of several studies of one problem, compared at one budget.
#include "tools/cli/search_compare.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <sstream>

#include "common/input_error.hpp"
#include "common/readable_number.hpp"
#include "optimizers/journal.hpp"
#include "optimizers/statistics.hpp"
#include "tools/cli/search_merge.hpp"

namespace shardsim::cli {

namespace {

constexpr double kTarget = 0.99;         // of the best known
constexpr std::uint64_t kBootstrapSeed = 1;

// One run: its budget and its best feasible objective after each evaluation (−∞ before any).
struct RunTrace {
  std::uint64_t seed = 0;
  long budget = 0;
  std::vector<double> anytime;
  double best_within(long n) const {
    if (anytime.empty() || n <= 0) return 0;
    const double b = anytime[static_cast<std::size_t>(std::min<long>(n, static_cast<long>(anytime.size())) - 1)];
    return b > -std::numeric_limits<double>::infinity() ? b : 0;
  }
  // The first evaluation (1-based, within n) whose best reaches `target`; 0 when none does.
  long reaches(double target, long n) const {
    for (long i = 0; i < std::min<long>(n, static_cast<long>(anytime.size())); ++i)
      if (anytime[static_cast<std::size_t>(i)] >= target) return i + 1;
    return 0;
  }
};

struct Arm {
  std::string label, settings, journal;
  std::vector<RunTrace> runs;
};

bool deterministic(const std::string& o) { return o == "megatron" || o == "exhaustive"; }

// What sets the arm apart: its --policy-in and --param, or "defaults".
std::string settings_of(const json& inputs) {
  std::string s;
  const std::string policy = inputs.value("policy_in", std::string());
  const std::string params = inputs.value("params", std::string());
  if (!policy.empty()) s += "warm start from " + std::filesystem::path(policy).filename().string();
  if (!params.empty()) s += std::string(s.empty() ? "" : "; ") + "--param " + params;
  return s.empty() ? "cold, defaults" : s;
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
    if (only.empty() ? deterministic(o) : o != only) continue;
    const std::string label = o + " @ " + (name.empty() ? dir : name);
    auto arm = std::find_if(arms.begin(), arms.end(), [&](const Arm& x) { return x.label == label; });
    if (arm == arms.end()) arm = arms.insert(arms.end(), Arm{label, settings, journal, {}});
    // A run's budget is the study's unless it records its own; deterministic runs cut nothing.
    long b = runs[i]["budget"].get<long>();
    if (b <= 0) b = c.header["inputs"].value("budget", 0L);
    if (deterministic(o)) b = std::numeric_limits<long>::max();
    RunTrace t{runs[i]["seed"].get<std::uint64_t>(), b, {}};
    double best = -std::numeric_limits<double>::infinity();
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

std::string interval_text(const Interval& i) { return "[" + readable(i.lo) + ", " + readable(i.hi) + "]"; }

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

}  // namespace

std::string compare_studies(const std::vector<std::string>& specs, long budget) {
  if (specs.empty()) throw InputError("search compare", "DIR", "give the arms: study folders, or DIR:OPTIMIZER");
  std::vector<Arm> arms;
  json first_header;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    json header;
    std::vector<Arm> more = read_arms(specs[i], header);
    if (i == 0) first_header = header;
    else
      check_same_problem(first_header, arms[0].journal, header, more[0].journal,
                         {"optimizers", "seeds", "budget", "params", "policy_in", "policy_in_digest", "threads"},
                         "compare takes studies of one problem: they may differ in optimizers, seeds, budget, --param and --policy-in");
    arms.insert(arms.end(), more.begin(), more.end());
  }
  if (arms.size() < 2) throw InputError(arms[0].journal, "/runs", "one arm only: name at least two (DIR:OPTIMIZER, or a study of several optimizers)");
  long cut = budget > 0 ? budget : std::numeric_limits<long>::max();
  for (const Arm& a : arms)
    for (const RunTrace& r : a.runs) cut = std::min(cut, r.budget);
  double best_known = 0;
  std::string best_where;
  for (const Arm& a : arms)
    for (const RunTrace& r : a.runs)
      if (r.best_within(cut) > best_known) {
        best_known = r.best_within(cut);
        best_where = a.label + ", seed " + std::to_string(r.seed);
      }
  const double target = kTarget * best_known;

  // Per arm: best values, and evaluations to the target (never = cut + 1: later than any that did).
  std::vector<std::vector<double>> bests(arms.size()), reach(arms.size()), reached(arms.size());
  for (std::size_t i = 0; i < arms.size(); ++i)
    for (const RunTrace& r : arms[i].runs) {
      bests[i].push_back(r.best_within(cut));
      const long n = r.reaches(target, cut);
      reach[i].push_back(static_cast<double>(n > 0 ? n : cut + 1));
      if (n > 0) reached[i].push_back(static_cast<double>(n));
    }
  std::vector<Test> on_best, on_reach;
  std::vector<double> p_best, p_reach;
  for (std::size_t i = 1; i < arms.size(); ++i) {
    on_best.push_back(test(bests[i], bests[0]));
    std::vector<double> sooner_mine, sooner_ref;  // negated: higher = sooner, so A12 = P(arm sooner)
    for (double x : reach[i]) sooner_mine.push_back(-x);
    for (double x : reach[0]) sooner_ref.push_back(-x);
    on_reach.push_back(test(sooner_mine, sooner_ref));
    p_best.push_back(on_best.back().p);
    p_reach.push_back(on_reach.back().p);
  }
  p_best = holm_adjust(p_best);
  p_reach = holm_adjust(p_reach);

  const json& in = first_header["inputs"];
  std::ostringstream o;
  o << "# Arms compared: " << in.value("model", std::string("?")) << " on " << in.value("cluster", std::string("?")) << ", objective "
    << in.value("objective", std::string("?")) << " (larger is better)\n\n"
    << "Every run cut to " << cut << " evaluations (the smallest budget among them" << (budget > 0 ? " or --budget" : "")
    << "). Best known within that: " << readable(best_known) << " (" << best_where << "); target " << readable(target)
    << " (99%). Reference: **" << arms[0].label << "**. Tests: two-sided Mann–Whitney U, p Holm-corrected over the "
    << "arms; A12 on the best values = the chance that a run of the arm ends above a run of the reference; on the "
    << "evaluations to 99% = the chance that it gets there sooner (a run that never does counts as later than any that "
    << "does).\n\n"
    << "| arm | settings | runs | median best [95% CI] | reached 99% | evals to 99% [95% CI] | best: p (Holm) | A12 | "
       "verdict | to 99%: p (Holm) | A12 | verdict |\n"
    << "|---|---|---:|---|---:|---|---:|---:|---|---:|---:|---|\n";
  for (std::size_t i = 0; i < arms.size(); ++i) {
    const Arm& a = arms[i];
    o << "| " << a.label << " | " << a.settings << " | " << a.runs.size() << " | " << readable(quantile(bests[i], 0.5)) << " "
      << interval_text(bootstrap_median_interval(bests[i], kBootstrapSeed)) << " | " << reached[i].size() << "/" << a.runs.size()
      << " | "
      << (reached[i].empty() ? "–"
                             : readable(quantile(reached[i], 0.5)) + " " +
                                   interval_text(bootstrap_median_interval(reached[i], kBootstrapSeed)))
      << " | ";
    if (i == 0) {
      o << "– | – | the reference | – | – | the reference |\n";
      continue;
    }
    const Test& b = on_best[i - 1];
    const Test& r = on_reach[i - 1];
    o << formatted("%.3g", p_best[i - 1]) << (b.exact ? "" : " ≈") << " | " << formatted("%.2f", b.a) << " | "
      << verdict(p_best[i - 1], b.a, "ends higher", "ends lower") << " | " << formatted("%.3g", p_reach[i - 1])
      << (r.exact ? "" : " ≈") << " | " << formatted("%.2f", r.a) << " | " << verdict(p_reach[i - 1], r.a, "sooner", "later")
      << " |\n";
  }
  return o.str();
}

}  // namespace shardsim::cli
