// sim/simgrid/scorer.hpp — the front door for serving a scenario at a tier: one Scenario value in,
// one ServingResult out, the SimGrid worker pool owned behind it.
//
// Owns: ServeScenario (what one run serves: model, cluster, plan, requests, routing, options —
// load, engine overrides, SLO, memoisation) and Scorer (a tier, the worker pool and its runner
// when the tier needs SimGrid, the steps sampled per run). Every command, the open evaluator and
// the Python module serve through one; a new tier is added here and in sim/serving/tier, not in
// each of them.
// Lifetime: construct a Scorer before any thread exists (its pool forks a zygote process) and
// keep it alive while anything it served may still run. Thread-safety: as the tier's runner —
// constant at the analytic tier; the pool runner takes calls from many threads.
#pragma once

#include <memory>
#include <string>

#include "sim/simgrid/fidelity.hpp"

namespace shardsim {

class WorkerPool;

struct ServeScenario {
  const ModelSpec& model;
  const Cluster& cluster;
  const std::string& cluster_spec;  // how `cluster` was named (the workers load it again)
  const Plan& plan;
  const RequestTrace& trace;
  const RoutingSource* routing;     // null for dense models
  const ServingOptions& options;
};

class Scorer {
 public:
  // `workers` SimGrid worker processes when the tier needs them (0 = one per core); none at the
  // analytic tier. `samples`: steps sampled into SimGrid per run at the simgrid tier.
  Scorer(Tier tier, int workers, int samples = 16);
  ~Scorer();
  Scorer(const Scorer&) = delete;
  Scorer& operator=(const Scorer&) = delete;

  Tier tier() const { return tier_; }
  int samples() const { return samples_; }
  // The worker pool (null at the analytic tier): for a scorer of its own kind (the open evaluator's
  // problems, validate's rows), which must not outlive this Scorer.
  WorkerPool* pool() const { return pool_.get(); }
  SimgridRunner* runner() const { return runner_.get(); }

  ServingResult serve(const ServeScenario& s, FidelityReport& report) const;
  // The same at another tier (analytic, or this one): a sweep's quick passes.
  ServingResult serve(const ServeScenario& s, FidelityReport& report, Tier tier) const;

 private:
  Tier tier_;
  int samples_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<SimgridRunner> runner_;
};

}  // namespace shardsim
