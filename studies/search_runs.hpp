// studies/search_runs.hpp — what `shardsim search` and the open evaluator's studies share: the
// seeds a study runs, its runs per optimizer, and writing its output set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json_reader.hpp"
#include "optimizers/space/megatron_portfolio.hpp"
#include "optimizers/search/search_driver.hpp"
#include "optimizers/report/search_report.hpp"
#include "optimizers/space/serving_evaluator.hpp"
#include "studies/sim_inputs.hpp"

namespace shardsim {

struct SeedRange {
  std::uint64_t first = 1, last = 3;
};

// "K" → 1..K, "A..B" → A..B (1 ≤ A ≤ B, at most 1,000 seeds); InputError("--seeds", text, …) otherwise.
SeedRange parse_seeds(const std::string& text);
// What results.json and the journal record: the count as a number (as studies always did), a range as text.
json seeds_json(const std::string& text);

// "a,b,,c" → {"a", "b", "c"}.
std::vector<std::string> split_list(const std::string& s);

// Whether a search replays the trace offline: when asked to, or for the throughput objectives
// unless `online` or a load (rate, clients) is given.
bool search_replays_offline(const SimInputs& in, const std::string& objective, bool online);

// The serving evaluator's inputs for a search (or an open problem) on `L` with serving options
// `so`: the tier, objective ("throughput" | "goodput" | "throughput-tpot" | "max-rate"), goal
// (parsed with InputError source `goal_source`) and SimGrid samples. `runner` may be null at the analytic tier.
EvaluatorInputs search_evaluator_inputs(const SimInputs& in, const LoadedInputs& L, const ServingOptions& so,
                                        Tier tier, const std::string& objective, const std::string& goal,
                                        int samples, SimgridRunner* runner, const std::string& goal_source);

// One run per seed of each optimizer; megatron and exhaustive (deterministic) run once, with the
// portfolio's size and the space's size as their budgets.
std::vector<SearchRun> make_runs(const std::vector<std::string>& names, const std::vector<RuleGenes>& rules,
                                 const SearchSpace& space, const SeedRange& seeds);

// The whole output set into a staging folder beside `out` (the anytime plot included, when
// gnuplot is there), then swapped in (optimizers/search/study_dir). True = plotted.
bool write_study_outputs(const std::string& out, const json& inputs, const SearchReport& rep, const SearchOutcome& outcome,
                         const SearchSpace& space, const std::string& unit, const std::string& md, long budget, bool log_evals);

}  // namespace shardsim
