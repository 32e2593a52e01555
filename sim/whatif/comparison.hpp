// sim/whatif/comparison.hpp — scenarios side by side: the table, the Pareto frontier, and why
// they differ.
//
// Owns: ScenarioOutcome (what one scored scenario brings to a comparison), GpuTime (a scenario's
// GPU time per generated token, split by where it went), pareto_frontier(), and the writers: the
// Markdown table, CSV, JSON (schema shardsim.compare/1), the "why they differ" section and the
// gnuplot script of the frontier plot (tokens/s per GPU against tokens/s per user, as NVIDIA's
// AIConfigurator draws it; each point labelled with its row and, where modelled, its J per token).
// Definitions (docs/what-if.md "Comparing scenarios"):
//   tok/s            steady-state generated tokens per second (Metrics::steady_output_tok_s; the
//                    makespan rate when the run has no saturated window, marked in the table);
//   tok/s per user   1000 / TPOT p50 — the generation speed one user sees;
//   GPU time per generated token (GpuTime), ms: the run's GPU-seconds (GPUs × makespan) over its
//                    generated tokens, split into the critical path's compute, communication and
//                    waiting, the host time not hidden by the GPU, and the rest (no step running:
//                    pipeline bubbles, ramp-up and drain, waiting for arrivals). A step's time is
//                    charged to the GPUs of one pipeline stage (dp × pp stages run at once).
//   $ per million tokens  the price per GPU-hour × GPUs / (tok/s × 3,600) × 10⁶.
//   J per token      the run's GPU and network energy (RunEnergy) over its generated tokens; W per GPU
//                    its GPUs' mean board draw over the run.
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "common/json_reader.hpp"
#include "sim/serving/energy.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/tier.hpp"
#include "sim/whatif/scenario.hpp"

namespace shardsim {

struct ScenarioOutcome {
  Scenario scenario;
  bool feasible = false;
  std::string reason;                  // why not: the plan's first violation, or the failure
  std::string plan;                    // the plan scored (compact string)
  std::string plan_source;             // "given", "Megatron rule", "search: sa, 200 evaluations"
  std::string gpu;                     // the GPU model
  int gpus = 0;                        // GPUs of the cluster (per-GPU figures divide by them)
  int dp = 1, pp = 1;                  // the plan's replicas and stages (a disaggregated plan's decode pool)
  Metrics metrics;
  ServingBreakdown breakdown;          // link traffic counted (a disaggregated plan's: both pools summed)
  // A disaggregated plan's pools, prefill then decode (empty when colocated): GPU time per token
  // charges each pool's step time to its own stage's GPUs.
  struct Pool {
    ServingBreakdown breakdown;
    int gpus = 0, dp = 1, pp = 1;
  };
  std::vector<Pool> pools;
  std::array<int, kNumLinkClasses> links{};  // links of each class in the cluster
  double weights_gb = 0, static_gb = 0;  // per GPU (worst stage): weights; weights + activations + buffers
  double kv_capacity_tokens = 0;       // per attention group
  Tier tier = Tier::Analytic;
  std::array<double, 5> slowdown{1, 1, 1, 1, 1};  // simgrid tier: per CollKind + sends, SimGrid / contention-free
  std::array<int, 5> slowdown_ops{};   // operations of each kind the sample held
  double max_rate = -1;                // req/s meeting the goal (< 0: not measured; 0: none meets)
  bool max_rate_flat = false;          // the goal barely tightens near it (SloCapacity::flat): another draw may move it
  double gpu_hour_usd = 0;             // 0: no price given
  RunEnergy energy;                    // the run's GPU and network energy (sim/serving/energy.hpp)
};

double tok_s(const ScenarioOutcome& o);           // steady-state generated tokens/s
double tok_s_per_gpu(const ScenarioOutcome& o);
double tok_s_per_user(const ScenarioOutcome& o);  // 1000 / TPOT p50 (0 without TPOT)
double usd_per_mtok(const ScenarioOutcome& o);    // 0 without a price
double joules_per_token(const ScenarioOutcome& o); // the run's energy over its generated tokens (0: not modelled)

// GPU milliseconds per generated token, by where they went (see the header comment).
struct GpuTime {
  double total = 0, compute = 0, communication = 0, waiting = 0, host = 0, idle = 0;
  std::array<double, 4> collective{};             // per-GPU busy time by CollKind (overlapped included)
  std::array<double, kNumLinkClasses> link_bytes{};  // bytes per generated token by link class
  std::array<double, kNumLinkClasses> link_busy{};   // the class's busiest link: busy share of step time
};
GpuTime gpu_time(const ScenarioOutcome& o);

// For each outcome, whether it is on the Pareto frontier of (tok/s per user, tok/s per GPU):
// feasible, and no other feasible outcome at least as good on both and better on one.
std::vector<bool> pareto_frontier(const std::vector<ScenarioOutcome>& outcomes);

// What the writers print beside the numbers.
struct CompareContext {
  std::string title;                   // "deepseek-v3 … 300 Azure requests, analytic fidelity"
  std::string goal;                    // the SLO goal of the max-rate column ("" = no column)
  bool goal_for_search = false;        // the column is there because searched plans were chosen by it
  // The scenario "why they differ" compares every other one against; −1: each scenario against
  // its reference (reference_of).
  int baseline = -1;
};

// The scenario `i` is best explained against: of those before it that differ from it in exactly
// one axis (model, cluster, engine, load, plan), the one whose differing value shares the most
// comma-separated items with its own (dgx-h100:8,oversub=2 is nearer dgx-h100:8 than dgx-h200:8
// is), the earliest on ties; else the first scenario; −1 for i = 0.
int reference_of(const std::vector<ScenarioOutcome>& outcomes, std::size_t i);

std::string markdown_table(const std::vector<ScenarioOutcome>& outcomes, const CompareContext& ctx);
std::string why_they_differ(const std::vector<ScenarioOutcome>& outcomes, const CompareContext& ctx);
std::string compare_csv(const std::vector<ScenarioOutcome>& outcomes);
json compare_json(const std::vector<ScenarioOutcome>& outcomes, const CompareContext& ctx, const json& inputs);
// Plots compare.csv into compare.png (run in the folder holding both).
std::string compare_gnuplot(const std::vector<ScenarioOutcome>& outcomes, const CompareContext& ctx);

}  // namespace shardsim
