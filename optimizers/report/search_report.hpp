// optimizers/report/search_report.hpp — what a search writes: results.json, anytime.csv, summary.md,
// the gnuplot script of the anytime curves, best-plan.json.
//
// Owns: SearchReport (the figures derived from a SearchOutcome) and write_search_outputs().
// Definitions: best known = the best feasible objective over every run; evals_to_X = the first
// evaluation (1-based) at which a run's best-so-far reaches X% of the best known (null if never);
// the Megatron baseline = the best objective among the megatron run's rule plans; the optimum =
// the exhaustive run's best (only when exhaustive ran). Spread = min, quartiles and max over seeds.
// Statistics (optimizers/report/statistics.hpp): per optimizer the median best with its 95% bootstrap
// interval, success rates at 95% and 99% of the best known, evals-to-95% with its interval, and
// for stochastic optimizers a Mann–Whitney U test of their best objectives against the reference
// optimizer's (Holm-corrected over the optimizers) with the Vargha–Delaney A12.
// Completeness: a stopped search (SearchOutcome::complete false) is written too, marked
// "complete": false with its note in results.json and a banner in summary.md. Faults: failed
// evaluations and failed SimGrid samples, per run (over its evaluations) and in total (over
// distinct plans). Each file goes through a temporary file + rename; the command writes the set
// into a staging folder that replaces the study folder as a whole (optimizers/search/study_dir).
// Thread-safety: pure functions apart from the file writes.
#pragma once

#include <string>
#include <vector>

#include "common/json_reader.hpp"
#include "optimizers/space/megatron_portfolio.hpp"
#include "optimizers/search/search_driver.hpp"
#include "optimizers/report/statistics.hpp"

namespace shardsim {

struct OptimizerSummary {
  std::string optimizer;
  int seeds = 0;
  double median = 0, q1 = 0, q3 = 0, min = 0, max = 0;  // best objective over seeds (0 = none feasible)
  double median_wall_s = 0;
  double median_evals_to_95 = -1, median_evals_to_99 = -1;  // over seeds that reached it; −1 = none
  int reached_95 = 0, reached_99 = 0;
  double vs_megatron = 0, vs_optimum = 0;               // median / baseline; 0 = no baseline
  Interval median_interval;                             // 95% bootstrap interval of the median best
  Interval evals_to_95_interval;                        // of the median evals to 95%, over seeds that reached it
  // Against the reference optimizer (SearchReport::reference), stochastic optimizers only:
  struct Test {
    bool done = false;
    double u = 0, p = 1, p_holm = 1, a12 = 0.5;         // U and A12 of this optimizer's best over the reference's
    bool exact = false;
  } test;
};

struct SearchReport {
  double best_known = 0;
  double megatron_best = 0;         // 0 when megatron did not run
  std::string megatron_rule;        // which rule gave it
  double optimum = 0;               // 0 when exhaustive did not run
  std::vector<OptimizerSummary> optimizers;  // in first-appearance order
  std::size_t best_run = 0;         // index of the run holding the best plan
  std::string reference;            // the optimizer the others are tested against ("" = none)
};

// -1 when never reached.
long evals_to_reach(const std::vector<double>& anytime, double target);
// "[lo, hi]" of a bootstrap interval, as the reports print it.
std::string interval_text(const Interval& i);
// `reference`: the optimizer to test the others against ("" = rl if it ran, else the first
// stochastic one); `seed` seeds the bootstrap intervals.
SearchReport summarize_search(const SearchOutcome& out, const std::vector<RuleGenes>& rules, const SearchSpace& space,
                              const std::string& reference = "", std::uint64_t seed = 1);

// The summary table as Markdown (also printed by the command).
std::string summary_markdown(const SearchReport& rep, const SearchOutcome& out, const SearchSpace& space,
                             const std::vector<RuleGenes>& rules, const std::string& unit, const std::string& title,
                             long budget);

// Writes DIR/{results.json, anytime.csv, summary.md, anytime.gp, best-plan.json (only when a
// feasible plan exists)}; `inputs` is recorded in results.json as given. Creates DIR if needed.
// `log_evals` puts the plot's evaluations on a log scale (optimizers/report/anytime_plot.hpp).
void write_search_outputs(const std::string& dir, const json& inputs, const SearchReport& rep, const SearchOutcome& out,
                          const SearchSpace& space, const std::string& unit, const std::string& summary_md,
                          long budget, bool log_evals = false);

}  // namespace shardsim
