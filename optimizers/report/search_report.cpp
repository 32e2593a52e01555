// optimizers/report/search_report.cpp — medians, ratios, evals-to-X, and the output files.
#include "common/readable_number.hpp"
#include "optimizers/report/search_report.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "optimizers/report/anytime_plot.hpp"
#include "optimizers/algorithms/optimizer.hpp"
#include "optimizers/report/statistics.hpp"

namespace shardsim {

namespace {

std::string (*const fmt)(const char*, double) = formatted;  // common/readable_number

// Human summary of how plan `a` differs from plan `b`.
std::string plan_difference(const Plan& a, const Plan& b) {
  std::vector<std::string> d;
  auto deg = [&](const char* n, int x, int y) {
    if (x != y) d.push_back(std::string(n) + " " + std::to_string(y) + "→" + std::to_string(x));
  };
  deg("dp", a.deg.dp, b.deg.dp);
  deg("tp", a.deg.tp, b.deg.tp);
  deg("pp", a.deg.pp, b.deg.pp);
  deg("ep", a.deg.ep, b.deg.ep);
  deg("etp", a.deg.etp, b.deg.etp);
  deg("attn_dp", a.deg.attn_dp, b.deg.attn_dp);
  deg("sp", a.deg.sp, b.deg.sp);
  for (int i = 0; i < kNumOps; ++i)
    if (a.sharding[static_cast<std::size_t>(i)] != b.sharding[static_cast<std::size_t>(i)])
      d.push_back(std::string(to_string(static_cast<Op>(i))) + " " + to_string(b.sharding[static_cast<std::size_t>(i)]) +
                  "→" + to_string(a.sharding[static_cast<std::size_t>(i)]));
  if (a.mapping != b.mapping) d.push_back("mapping changed");
  deg("max_seqs", a.engine.max_seqs, b.engine.max_seqs);
  deg("max_batch_tokens", a.engine.max_batch_tokens, b.engine.max_batch_tokens);
  std::string s;
  for (const auto& x : d) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "the same plan" : s;
}

// Distinct line colours for the optimizers (a colour-blind-safe qualitative palette).

json opt_number(double x) { return x < 0 ? json(nullptr) : json(x); }

// `total`: the search's tally, with the session's worker restarts (runs have none of their own).
json faults_json(const FaultTally& f, bool total) {
  json j = {{"failed_evaluations", f.failed_evaluations},
            {"degraded_evaluations", f.degraded_evaluations},
            {"simgrid_sampled_steps", f.sampled_steps},
            {"simgrid_failed_samples", f.failed_samples},
            {"errors", f.errors}};
  if (total) j["worker_restarts"] = f.worker_restarts;
  return j;
}

bool has_faults(const FaultTally& f) {
  return f.failed_evaluations > 0 || f.failed_samples > 0 || f.worker_restarts > 0;
}

// The faults paragraph of summary.md: totals, then the runs that met any.
std::string faults_markdown(const SearchOutcome& out) {
  const FaultTally& f = out.faults;
  std::ostringstream o;
  if (f.sampled_steps == 0 && !has_faults(f)) return "";
  o << "\nFaults (over distinct plans): " << f.failed_evaluations << " evaluations failed; " << f.failed_samples << " of "
    << f.sampled_steps << " SimGrid samples failed, in " << f.degraded_evaluations
    << " evaluations (their strata fell back to the nearest good sample); " << f.worker_restarts
    << " SimGrid worker restarts in this session.\n";
  if (!has_faults(f)) return o.str();
  o << "\n| optimizer | seed | failed evaluations | evaluations with failed samples | failed samples |\n|---|---:|---:|---:|---:|\n";
  for (const auto& r : out.runs)
    if (has_faults(r.tally))
      o << "| " << r.optimizer << " | " << r.seed << " | " << r.tally.failed_evaluations << " | "
        << r.tally.degraded_evaluations << " | " << r.tally.failed_samples << " |\n";
  for (const auto& e : f.errors) o << "\n- " << e;
  o << "\n";
  return o.str();
}

}  // namespace

long evals_to_reach(const std::vector<double>& anytime, double target) {
  for (std::size_t i = 0; i < anytime.size(); ++i)
    if (anytime[i] > 0 && anytime[i] >= target) return static_cast<long>(i) + 1;
  return -1;
}

namespace {


// The optimizer the others are tested against: the one asked for, else rl, else the first with seeds.
std::string reference_of(const std::vector<std::string>& order, const std::string& asked) {
  if (!asked.empty()) return asked;
  if (std::find(order.begin(), order.end(), "rl") != order.end()) return "rl";
  for (const auto& n : order)
    if (!runs_once(n)) return n;
  return "";
}

// Each stochastic optimizer's best objectives against the reference's: U, p (Holm over the
// comparisons), A12.
void test_against_reference(SearchReport& rep, const std::map<std::string, std::vector<double>>& bests) {
  const auto ref = bests.find(rep.reference);
  if (ref == bests.end()) return;
  std::vector<OptimizerSummary*> tested;
  std::vector<double> p;
  for (auto& s : rep.optimizers) {
    if (s.optimizer == rep.reference || runs_once(s.optimizer)) continue;
    const std::vector<double>& mine = bests.at(s.optimizer);
    const MannWhitney mw = mann_whitney(mine, ref->second);
    s.test = {true, mw.u, mw.p, mw.p, a12(mine, ref->second), mw.exact};
    tested.push_back(&s);
    p.push_back(mw.p);
  }
  const std::vector<double> adjusted = holm_adjust(p);
  for (std::size_t i = 0; i < tested.size(); ++i) tested[i]->test.p_holm = adjusted[i];
}

}  // namespace

SearchReport summarize_search(const SearchOutcome& out, const std::vector<RuleGenes>& rules, const SearchSpace& space,
                              const std::string& reference, std::uint64_t seed) {
  SearchReport rep;
  for (std::size_t i = 0; i < out.runs.size(); ++i) {
    const auto& r = out.runs[i];
    if (r.has_best && r.best.score.feasible && r.best.score.objective > rep.best_known)
      rep.best_known = r.best.score.objective, rep.best_run = i;
    if (r.optimizer == "megatron" && r.has_best && r.best.score.feasible && r.best.score.objective > rep.megatron_best) {
      rep.megatron_best = r.best.score.objective;
      for (const auto& rule : rules)
        if (space.key(rule.genes) == space.key(r.best.genes)) rep.megatron_rule = rule.rule;
    }
    if (r.optimizer == "exhaustive" && r.has_best && r.best.score.feasible)
      rep.optimum = std::max(rep.optimum, r.best.score.objective);
  }
  std::vector<std::string> order;
  for (const auto& r : out.runs)
    if (std::find(order.begin(), order.end(), r.optimizer) == order.end()) order.push_back(r.optimizer);
  rep.reference = reference_of(order, reference);
  std::map<std::string, std::vector<double>> bests;
  for (const auto& name : order) {
    OptimizerSummary s;
    s.optimizer = name;
    std::vector<double> best, wall, e95, e99;
    for (const auto& r : out.runs) {
      if (r.optimizer != name) continue;
      ++s.seeds;
      best.push_back(r.has_best && r.best.score.feasible ? r.best.score.objective : 0.0);
      wall.push_back(r.wall_s);
      long a = evals_to_reach(r.anytime, 0.95 * rep.best_known), b = evals_to_reach(r.anytime, 0.99 * rep.best_known);
      if (a > 0) e95.push_back(static_cast<double>(a)), ++s.reached_95;
      if (b > 0) e99.push_back(static_cast<double>(b)), ++s.reached_99;
    }
    s.median = quantile(best, 0.5), s.q1 = quantile(best, 0.25), s.q3 = quantile(best, 0.75);
    s.min = quantile(best, 0), s.max = quantile(best, 1);
    s.median_wall_s = quantile(wall, 0.5);
    s.median_evals_to_95 = e95.empty() ? -1 : quantile(e95, 0.5);
    s.median_evals_to_99 = e99.empty() ? -1 : quantile(e99, 0.5);
    s.median_interval = bootstrap_median_interval(best, seed);
    s.evals_to_95_interval = bootstrap_median_interval(e95, seed);
    bests[name] = best;
    if (rep.megatron_best > 0) s.vs_megatron = s.median / rep.megatron_best;
    if (rep.optimum > 0) s.vs_optimum = s.median / rep.optimum;
    rep.optimizers.push_back(s);
  }
  test_against_reference(rep, bests);
  return rep;
}

std::string interval_text(const Interval& i) { return "[" + readable(i.lo) + ", " + readable(i.hi) + "]"; }

namespace {

// The statistics table: intervals, success rates, and each stochastic optimizer against the reference.
std::string statistics_markdown(const SearchReport& rep) {
  std::ostringstream o;
  o << "\n## Statistics over seeds\n\nMedian best objective with its 95% bootstrap interval; success = runs whose "
       "best reached 95% / 99% of the best known; evaluations to 95% over the runs that reached it";
  if (!rep.reference.empty())
    o << "; two-sided Mann–Whitney U of each optimizer's best objectives against **" << rep.reference
      << "**'s, p Holm-corrected over the comparisons, and the Vargha–Delaney A12 (the chance that a run of the "
         "optimizer beats a run of "
      << rep.reference << "; 0.5 = even)";
  o << ".\n\n| optimizer | seeds | median best [95% CI] | success ≥ 95% | success ≥ 99% | evals to 95% [95% CI] | U | p (Holm) | A12 | "
       "verdict (α = 0.05) |\n|---|---:|---|---:|---:|---|---:|---:|---:|---|\n";
  for (const auto& s : rep.optimizers) {
    o << "| " << s.optimizer << " | " << s.seeds << " | " << readable(s.median) << " " << interval_text(s.median_interval) << " | "
      << s.reached_95 << "/" << s.seeds << " | " << s.reached_99 << "/" << s.seeds << " | "
      << (s.median_evals_to_95 > 0 ? readable(s.median_evals_to_95) + " " + interval_text(s.evals_to_95_interval) : "–") << " | ";
    if (s.optimizer == rep.reference) {
      o << "– | – | – | the reference |\n";
      continue;
    }
    if (!s.test.done) {
      o << "– | – | – | " << (s.seeds == 1 ? "deterministic: one run" : "–") << " |\n";
      continue;
    }
    const std::string verdict = s.test.p_holm >= 0.05 ? "no significant difference"
                                : s.test.a12 > 0.5     ? "better than " + rep.reference
                                                       : "worse than " + rep.reference;
    o << readable(s.test.u, 3) << " | " << fmt("%.3g", s.test.p_holm) << (s.test.exact ? "" : " ≈") << " | "
      << fmt("%.2f", s.test.a12) << " | " << verdict << " |\n";
  }
  return o.str();
}

}  // namespace

std::string summary_markdown(const SearchReport& rep, const SearchOutcome& out, const SearchSpace& space,
                             const std::vector<RuleGenes>& rules, const std::string& unit, const std::string& title,
                             long budget) {
  std::ostringstream o;
  o << "# " << title << "\n\n";
  if (!out.complete) o << "**Incomplete**: " << (out.note.empty() ? "the search was stopped early" : out.note) << "\n\n";
  if (out.replayed > 0) o << "Resumed: " << out.replayed << " evaluations replayed from the journal.\n\n";
  o << "Objective: " << unit << " (larger is better). Budget " << budget
    << " evaluations per run (megatron: its rule plans; exhaustive: the whole space); " << out.evaluations << " evaluations in all, " << out.computed
    << " simulated, " << out.cache_hits << " from the shared cache ("
    << fmt("%.1f%%", out.evaluations ? 100.0 * static_cast<double>(out.cache_hits) / static_cast<double>(out.evaluations) : 0)
    << "); wall " << fmt("%.1f s", out.wall_s) << ".\n\n";
  o << "| optimizer | seeds | median best | spread (min · q1 · q3 · max) | vs Megatron | vs optimum | evals to 95% | evals to 99% | wall s |\n";
  o << "|---|---:|---:|---|---:|---:|---:|---:|---:|\n";
  for (const auto& s : rep.optimizers) {
    o << "| " << s.optimizer << " | " << s.seeds << " | " << readable(s.median) << " | " << readable(s.min) << " · "
      << readable(s.q1) << " · " << readable(s.q3) << " · " << readable(s.max) << " | "
      << (s.vs_megatron > 0 ? fmt("%.3f", s.vs_megatron) : "–") << " | "
      << (s.vs_optimum > 0 ? fmt("%.3f", s.vs_optimum) : "–") << " | "
      << (s.median_evals_to_95 > 0 ? fmt("%.0f", s.median_evals_to_95) + " (" + std::to_string(s.reached_95) + "/" +
                                         std::to_string(s.seeds) + ")"
                                   : "–")
      << " | "
      << (s.median_evals_to_99 > 0 ? fmt("%.0f", s.median_evals_to_99) + " (" + std::to_string(s.reached_99) + "/" +
                                         std::to_string(s.seeds) + ")"
                                   : "–")
      << " | " << (s.median_wall_s > 0 ? fmt("%.1f", s.median_wall_s) : "–") << " |\n";  // – : not timed (merged, outside runs)
  }
  // The two medians are over different runs (those that reached each level): one below the other
  // is not a contradiction, and the table says so where it happens.
  bool crossed = false;
  for (const auto& s : rep.optimizers)
    crossed = crossed || (s.median_evals_to_99 > 0 && s.median_evals_to_95 > 0 && s.median_evals_to_99 < s.median_evals_to_95);
  if (crossed)
    o << "\nEvaluations to 95% and to 99% are medians over the runs that reached each level (the counts in brackets): "
         "where fewer runs reached 99%, their median can lie below the 95% one.\n";
  o << statistics_markdown(rep);
  if (rep.best_known > 0) {
    const auto& b = out.runs[rep.best_run];
    Plan best = space.decode(b.best.genes);
    o << "\nBest plan: `" << plan_to_string(best, space.model()) << "` — " << readable(b.best.score.objective, 5) << " " << unit << " (found by "
      << b.optimizer << ", seed " << b.seed << ").\n";
    if (rep.megatron_best > 0) {
      for (const auto& r : out.runs)
        if (r.optimizer == "megatron" && r.has_best && r.best.score.objective == rep.megatron_best) {
          Plan meg = space.decode(r.best.genes);
          o << "Best Megatron rule plan: `" << plan_to_string(meg, space.model()) << "` (" << rep.megatron_rule << ") — "
            << readable(rep.megatron_best, 5) << " " << unit << ".\n";
          o << "What differs from it: " << plan_difference(best, meg) << ".\n";
          break;
        }
    }
  }
  o << faults_markdown(out);
  // The rule plans one by one, from the megatron run's history.
  for (const auto& r : out.runs) {
    if (r.optimizer != "megatron") continue;
    o << "\nMegatron rule plans:\n\n| rule | plan | " << unit << " |\n|---|---|---:|\n";
    for (const auto& h : r.history) {
      std::string rule = "?";
      for (const auto& rg : rules)
        if (space.key(rg.genes) == space.key(h.genes)) rule = rg.rule;
      o << "| " << rule << " | `" << plan_to_string(space.decode(h.genes), space.model()) << "` | "
        << (h.score.feasible ? readable(h.score.objective, 5) : "infeasible: " + h.score.reason) << " |\n";
    }
    break;
  }
  return o.str();
}

void write_search_outputs(const std::string& dir, const json& inputs, const SearchReport& rep, const SearchOutcome& out,
                          const SearchSpace& space, const std::string& unit, const std::string& summary_md,
                          long budget, bool log_evals) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(dir, "--out", "cannot create the directory: " + ec.message());
  json runs = json::array();
  std::string csv = "optimizer,seed,evaluation,best_so_far,objective,feasible\n";
  for (const auto& r : out.runs) {
    json j = {{"optimizer", r.optimizer},
              {"seed", r.seed},
              {"evaluations", r.evaluations},
              {"cache_hits", r.cache_hits},
              {"best_feasible", r.has_best && r.best.score.feasible},
              {"best_objective", r.has_best && r.best.score.feasible ? r.best.score.objective : 0.0},
              {"evals_to_95", opt_number(static_cast<double>(evals_to_reach(r.anytime, 0.95 * rep.best_known)))},
              {"evals_to_99", opt_number(static_cast<double>(evals_to_reach(r.anytime, 0.99 * rep.best_known)))},
              {"wall_s", r.wall_s},
              {"complete", r.complete},
              {"faults", faults_json(r.tally, false)}};
    if (r.has_best) {
      Plan p = space.decode(r.best.genes);
      j["best_plan"] = plan_to_json(p);
      j["best_plan_string"] = plan_to_string(p);
      if (!r.best.score.feasible) j["best_reason"] = r.best.score.reason;
    } else {
      j["best_plan"] = nullptr;
    }
    runs.push_back(j);
    for (std::size_t i = 0; i < r.anytime.size(); ++i)
      csv += r.optimizer + "," + std::to_string(r.seed) + "," + std::to_string(i + 1) + "," + fmt("%.6g", r.anytime[i]) +
             "," + fmt("%.6g", i < r.history.size() && r.history[i].score.feasible ? r.history[i].score.objective : 0.0) +
             "," + (i < r.history.size() && r.history[i].score.feasible ? "1" : "0") + "\n";
  }
  json optimizers = json::array();
  for (const auto& s : rep.optimizers)
    optimizers.push_back({{"optimizer", s.optimizer},
                          {"seeds", s.seeds},
                          {"median_best", s.median},
                          {"min", s.min},
                          {"q1", s.q1},
                          {"q3", s.q3},
                          {"max", s.max},
                          {"vs_megatron", s.vs_megatron > 0 ? json(s.vs_megatron) : json(nullptr)},
                          {"vs_optimum", s.vs_optimum > 0 ? json(s.vs_optimum) : json(nullptr)},
                          {"median_evals_to_95", opt_number(s.median_evals_to_95)},
                          {"median_evals_to_99", opt_number(s.median_evals_to_99)},
                          {"median_wall_s", s.median_wall_s},
                          {"median_interval_95", {s.median_interval.lo, s.median_interval.hi}},
                          {"success_95", s.seeds ? static_cast<double>(s.reached_95) / s.seeds : 0.0},
                          {"success_99", s.seeds ? static_cast<double>(s.reached_99) / s.seeds : 0.0},
                          {"evals_to_95_interval", s.median_evals_to_95 > 0 ? json{s.evals_to_95_interval.lo, s.evals_to_95_interval.hi}
                                                                            : json(nullptr)},
                          {"test", s.test.done ? json{{"reference", rep.reference}, {"u", s.test.u}, {"p", s.test.p},
                                                      {"p_holm", s.test.p_holm}, {"a12", s.test.a12}, {"exact", s.test.exact}}
                                               : json(nullptr)}});
  json results = {{"schema", "shardsim.search/1"},
                  {"complete", out.complete},
                  {"inputs", inputs},
                  {"objective_unit", unit},
                  {"space", {{"blocks", to_string(space.options())},
                             {"decisions", space.num_decisions()},
                             {"raw_size", space.raw_size()},
                             {"canonical_size", space.canonical_size()}}},
                  {"best_known", rep.best_known},
                  {"megatron_best", rep.megatron_best > 0 ? json(rep.megatron_best) : json(nullptr)},
                  {"megatron_rule", rep.megatron_rule},
                  {"optimum", rep.optimum > 0 ? json(rep.optimum) : json(nullptr)},
                  {"evaluations", out.evaluations},
                  {"simulated", out.computed},
                  {"cache_hits", out.cache_hits},
                  {"cache_hit_rate", out.evaluations ? static_cast<double>(out.cache_hits) / static_cast<double>(out.evaluations) : 0.0},
                  {"wall_s", out.wall_s},
                  {"faults", faults_json(out.faults, true)},
                  {"optimizers", optimizers},
                  {"reference", rep.reference},
                  {"runs", runs}};
  if (!out.complete) results["note"] = out.note.empty() ? "the search was stopped early" : out.note;
  write_file_atomically(dir + "/anytime.csv", csv);
  write_file_atomically(dir + "/anytime.gp", anytime_gnuplot(rep, out, unit, budget, log_evals));
  write_file_atomically(dir + "/summary.md", summary_md);
  if (rep.best_known > 0) {
    Plan best = space.decode(out.runs[rep.best_run].best.genes);
    best.name = "search-best";
    write_file_atomically(dir + "/best-plan.json", json_text(plan_to_json(best), 2) + "\n");
  }
  write_file_atomically(dir + "/results.json", json_text(results, 2) + "\n");
}

}  // namespace shardsim
