// optimizers/serving_evaluator.hpp — the search's scorer: replay the trace under a plan at a
// fidelity tier and return the objective.
//
// Owns: ServingEvaluator. Objectives (docs/references.md §F.2):
//   Throughput     steady-state generated tokens per second (Metrics::steady_output_tok_s,
//                  MLPerf's tokens/s; the makespan rate when the run has no saturated window;
//                  the search replays offline by default, so this is the plan's capacity);
//   Goodput        requests per second meeting both SLOs;
//   ThroughputTpot Throughput, feasible only when TPOT at the goal's percentile is within the
//                  SLO (violation = its relative excess): tokens/s per GPU at a TPOT bound;
//   MaxRate        the highest Poisson rate (req/s) whose run meets the goal (SloGoal), found by
//                  the capacity search (sim/serving/load_sweep) from the plan's offline capacity:
//                  about 8 serving runs per evaluation; infeasible when even 1/8 of it misses.
// A plan that check_plan refuses
// never reaches it (the driver scores it infeasible); a plan that must reject some requests
// (prompt + output larger than its KV capacity) is infeasible with violation = the fraction of
// requests rejected. evaluate_detailed() also returns the FidelityReport's SimGrid sample counts
// (sampled, failed, the first error), so the search can report evaluations that fell back.
// Thread-safety: Constant — serve_at_fidelity with the analytic executor is pure, and the
// SimGrid tiers run their steps through the worker pool (whose call() is thread-safe); the
// runner passed in must be thread-safe (make_pool_runner's is). Inputs must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "optimizers/evaluator.hpp"
#include "sim/serving/load_sweep.hpp"
#include "sim/simgrid/fidelity.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

struct ModelSpec;
class Cluster;
struct RequestTrace;
class RoutingSource;
struct Metrics;

enum class Objective { Throughput, Goodput, ThroughputTpot, MaxRate };

struct EvaluatorInputs {
  const ModelSpec* model = nullptr;
  const Cluster* cluster = nullptr;
  std::string cluster_spec;
  const RequestTrace* trace = nullptr;
  const RoutingSource* routing = nullptr;   // null for dense models
  ServingOptions serving;
  std::string tier = "analytic";             // analytic | simgrid | full
  SimgridRunner* runner = nullptr;           // required unless tier = analytic
  int samples = 16;
  Objective objective = Objective::Throughput;
  SloGoal goal;                              // ThroughputTpot (its percentile) and MaxRate
  Arrival arrivals = Arrival::Poisson;       // MaxRate: how the rates' arrivals are drawn …
  std::uint64_t seed = 1;                    // … and from which seed
};

class ServingEvaluator : public Evaluator {
 public:
  explicit ServingEvaluator(EvaluatorInputs in);
  Score evaluate(const Plan& plan) const override { return evaluate_detailed(plan).score; }
  Evaluation evaluate_detailed(const Plan& plan) const override { return evaluate_reporting(plan, nullptr); }
  // The same, and the metrics of the plan's first serving run (the offline one for MaxRate) into
  // `metrics` when not null: what the open evaluator (tools/cli/eval_problem) reports per plan.
  Evaluation evaluate_reporting(const Plan& plan, Metrics* metrics) const;
  const EvaluatorInputs& inputs() const { return in_; }
  ThreadSafety thread_safety() const override { return ThreadSafety::Constant; }
  std::string objective_unit() const override;

 private:
  EvaluatorInputs in_;
};

}  // namespace shardsim
