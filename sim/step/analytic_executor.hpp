// sim/step/analytic_executor.hpp — runs a step program by formula: roofline compute, alpha-beta
// collectives on the cluster's routes, list scheduling over two streams per rank.
//
// Owns: AnalyticExecutor. Each operation starts when its dependencies have finished and its
// stream is free on every rank it touches (a collective occupies the comm stream of its whole
// group); its duration comes from compute_cost / collective_cost. No contention between
// concurrent transfers is modelled — that is the SimGrid executor's job, and the difference
// between the two is the contention. Thread-safety: "constant" — run() is const and keeps no
// state; one instance may serve many threads.
#pragma once

#include "sim/step/collective_cost.hpp"
#include "sim/step/compute_cost.hpp"
#include "sim/step/executor.hpp"

namespace shardsim {

class Cluster;

class AnalyticExecutor final : public StepExecutor {
 public:
  explicit AnalyticExecutor(const Cluster& cluster, ComputeModel compute = {}, CollectiveModel collective = {})
      : cluster_(cluster), compute_(compute), collective_(collective) {}
  const char* name() const override { return "analytic"; }
  StepTiming run(const StepProgram& program, std::vector<TimelineEvent>* timeline = nullptr) const override;
  // The duration of one operation in isolation (used by tests and by the SimGrid executor's
  // compute operations, so both executors share the compute model).
  double op_time(const StepProgram& program, const StepOp& op) const;
  const AnalyticExecutor& compute_pricer() const override { return *this; }
  // A compute operation's duration on `gpu` (a cluster GPU index) at compute share `share`, as
  // op_time() prices it on a rank of that GPU; and the cluster it prices on.
  double compute_seconds(int gpu, const StepOp& op, double share) const;
  const Cluster& cluster() const { return cluster_; }

 private:
  const Cluster& cluster_;
  ComputeModel compute_;
  CollectiveModel collective_;
};

}  // namespace shardsim
