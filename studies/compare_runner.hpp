// studies/compare_runner.hpp — scoring a comparison's scenarios (`shardsim compare`).
//
// Owns: CompareSettings (what every scenario shares), GpuPrices and run_comparison(). It runs in
// three phases so that bad input never costs work:
//   1. prepare (one thread): load every distinct model × cluster once, parse each scenario's load,
//      engine and plan. Unknown names and malformed values throw InputError naming the scenario
//      source's field; a plan that does not fit its cluster is not an error but an infeasible row.
//   2. search: each distinct "search:B" problem (model, cluster, engine, load, budget, optimizer)
//      runs once — the Megatron portfolio plus the optimizer, seeded by --seed — and every
//      scenario naming it takes its best plan.
//   3. score: each distinct (inputs, load, plan) is served once, in parallel on a TBB arena of
//      `threads` threads (the search's evaluations and identical scenarios are shared, never
//      recomputed); results do not depend on the thread count.
// Thread-safety: run_comparison is called from one thread; the scorer's runner must be thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/serving/load_sweep.hpp"
#include "sim/simgrid/scorer.hpp"
#include "sim/whatif/comparison.hpp"

namespace shardsim {

// $ per GPU-hour: one price for every GPU, or prices by GPU name ("H100=2.5,GB200=6": the first
// key found, ignoring case, in the GPU model's name).
struct GpuPrices {
  double all = 0;
  std::vector<std::pair<std::string, double>> by_name;
  double of(const std::string& gpu) const;  // 0 when no price applies
};
// Throws InputError(source, field, …).
GpuPrices parse_gpu_prices(const std::string& text, const std::string& source, const std::string& field);

struct CompareSettings {
  std::string source = "command line";  // where the scenarios came from (errors name it)
  std::string trace = "azure-conv", routing = "synthetic:", slo = "ttft=2000,tpot=200";
  std::string arrivals = "poisson";     // rate loads
  int requests = 300;
  std::uint64_t seed = 1;
  std::string fidelity = "analytic";    // analytic | simgrid, as given (the command line or a scenario file)
  Tier tier = Tier::Analytic;           // `fidelity`, read (cmd_compare.cpp)
  int samples = 16;                     // simgrid tier: steps sampled per scenario
  bool exact = false;
  bool max_rate = false;                // measure the highest rate meeting `goal`
  std::string goal = "p99";
  SloGoal slo_goal;                     // `goal` with the `slo` bounds, parsed by the command
  GpuPrices prices;
  int threads = 1;
};

// Scored through `scorer` — its tier, samples and worker pool; cmd_compare builds it from the settings'
// `tier` and `samples`, which nothing here reads again.
std::vector<ScenarioOutcome> run_comparison(const std::vector<Scenario>& scenarios, const CompareSettings& settings,
                                            const Scorer& scorer);

}  // namespace shardsim
