// optimizers/space/serving_evaluator.hpp — the search's scorer: replay the trace under a plan at a
// fidelity tier and return the objective.
//
// Owns: ServingEvaluator. Objectives (docs/optimizers.md, "What a plan is scored by"):
//   Capacity       the default: the highest Poisson rate (req/s) whose run meets the goal (SloGoal),
//                  bracketed by the plan's saturated request rate, each probe as long as the
//                  converged saturated run (sim/serving/capacity.hpp): about 6-8 serving runs;
//                  infeasible when even 1/32 of the saturated rate misses the goal.
//   Saturated      saturated output tok/s: a backlog run extended until its window holds three
//                  batch turnovers and its batch-means interval is within ±2%.
//   Drain          output tok/s of the given requests' run (offline unless arrivals are given),
//                  in its saturated window, else over the whole run: depends on the run length.
//   Goodput        requests per second meeting both SLOs over that same run.
//   DrainTpot      Drain, feasible only when TPOT at the goal's percentile is within the SLO.
//   TokensPerJoule generated tokens per joule (GPU and network energy, sim/serving/energy.hpp) of
//                  the Saturated measure's last backlog run — the batch kept full, where a plan is
//                  most efficient — feasible only when its TPOT at the goal's percentile is within
//                  the SLO (a plan that is frugal only because it is slow is not a serving plan).
// Capacity and Saturated draw their requests from `population` (the whole trace, not only the
// requests given), so their figures do not depend on --requests beyond sampling noise.
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

#include "optimizers/space/evaluator.hpp"
#include "sim/serving/capacity.hpp"
#include "sim/serving/load_sweep.hpp"
#include "sim/simgrid/fidelity.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

struct ModelSpec;
class Cluster;
struct RequestTrace;
class RoutingSource;
struct Metrics;

enum class Objective { Capacity, Saturated, Drain, Goodput, DrainTpot, TokensPerJoule };

// The objectives by their one set of names (every command, the evaluator protocol and the Python
// module): capacity | saturated | drain | goodput | drain-tpot. The old names say what they became:
// throughput and throughput-tpot (a run of the given requests) are refused with the new name
// (drain, drain-tpot); max-rate is capacity; tokens-per-joule. InputError(source, text, …) for anything else.
Objective parse_objective(const std::string& text, const std::string& source);
const char* objective_name(Objective o);
// "capacity | saturated | drain | goodput | drain-tpot": for help texts.
const char* objective_names();
// Capacity, DrainTpot and TokensPerJoule read the goal (SloGoal).
bool objective_uses_goal(Objective o);
// Capacity, Saturated and TokensPerJoule choose their own load: --rate, --concurrency and --offline do not apply.
bool objective_sets_load(Objective o);

struct EvaluatorInputs {
  const ModelSpec* model = nullptr;
  const Cluster* cluster = nullptr;
  std::string cluster_spec;
  const RequestTrace* trace = nullptr;      // the requests given (Drain, Goodput, DrainTpot)
  const RequestTrace* population = nullptr; // Capacity, Saturated: drawn from; null = `trace`
  const RoutingSource* routing = nullptr;   // null for dense models
  ServingOptions serving;
  Tier tier = Tier::Analytic;
  SimgridRunner* runner = nullptr;           // required unless tier = analytic
  int samples = 16;
  Objective objective = Objective::Capacity;
  SloGoal goal;                              // DrainTpot (its percentile) and Capacity
  Arrival arrivals = Arrival::Poisson;       // Capacity: how the rates' arrivals are drawn …
  std::uint64_t seed = 1;                    // … and from which seed (the samples' too)
  long capacity_start = 0;                   // Capacity, Saturated: the first sample (0 = trace's size)
  // Capacity, Saturated: one simulated replica stands for the plan's alike replicas, with its
  // share of the requests (CapacityOptions::replicas, sim/serving/capacity.hpp); false = every
  // replica simulated (about dp times the cost).
  bool capacity_one_replica = true;
  // The capacity's saturated bound narrowed to its ±2% interval even when the SLO search needed
  // only the bound (CapacityOptions::converge_saturated): for a report that prints it (simulate
  // --capacity); scoring leaves it off, since the score never depends on it.
  bool capacity_converge_saturated = false;
};

class ServingEvaluator : public Evaluator {
 public:
  explicit ServingEvaluator(EvaluatorInputs in);
  Score evaluate(const Plan& plan) const override { return evaluate_detailed(plan).score; }
  Evaluation evaluate_detailed(const Plan& plan) const override { return evaluate_reporting(plan, nullptr); }
  // The same, and the metrics of the run that decided the score into `metrics` when not null (for
  // Capacity the second half of the run at the capacity rate, for Saturated the backlog run): what
  // the open evaluator (studies/eval_problem) reports per plan.
  Evaluation evaluate_reporting(const Plan& plan, Metrics* metrics) const;
  // The capacity measures of `plan` with the evaluator's inputs (whatever its objective).
  SloCapacity capacity(const Plan& plan, EvalFaults* faults = nullptr) const;
  SaturatedThroughput saturated(const Plan& plan, EvalFaults* faults = nullptr) const;
  const EvaluatorInputs& inputs() const { return in_; }
  CapacityOptions capacity_options_for(const Plan& plan) const;
  ThreadSafety thread_safety() const override { return ThreadSafety::Constant; }
  std::string objective_unit() const override;

 private:
  // Serves `plan` at the evaluator's tier, adding SimGrid faults to `faults` (both outlive it).
  CapacityServe runner_for(const Plan& plan, EvalFaults& faults) const;
  EvaluatorInputs in_;
};

}  // namespace shardsim
