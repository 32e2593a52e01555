// sim/step/executor.hpp — the interface both executors implement, and what a step's execution reports.
//
// Owns: StepTiming (makespan, per-stage spans, the critical path's time by operation class,
// communication busy and exposed per GPU, expert-load imbalance), TimelineEvent (for Chrome traces),
// AttentionCost (a step's core attention, which the fast path swaps between steps), and
// StepExecutor, the one call the serving loop makes per step.
// Thread-safety: executors declare it (docs/architecture.md, Conventions): AnalyticExecutor is "constant" (one instance
// shared by threads); the SimGrid executor is "none" and lives in worker processes.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "sim/step/step_program.hpp"
#include "topologies/link_class.hpp"

namespace shardsim {

struct TimelineEvent {
  int rank = 0;
  Stream stream = Stream::Compute;
  OpClass cls = OpClass::Norm;
  int layer = -1;
  double start = 0, duration = 0;  // seconds from the step's start
  std::string name;
};

// What one direction of a link carried in one step (SimGrid's flows): the per-link figures of
// `simulate --links`. dlink = 2 × link id + 0 (from link_ends().first) or + 1 (the other way).
struct LinkDirectionLoad {
  int dlink = 0;
  double bytes = 0;
  double busy_seconds = 0;  // bytes / the link's capacity: the time it needed at full rate
};

struct StepTiming {
  // One step of one replica. "Per GPU" = averaged over the replica's ranks. Exact definitions:
  // sim/step/schedule_summary.hpp. Invariants: Σ critical + idle_on_path = makespan;
  // 0 ≤ comm_exposed ≤ comm_busy = Σ coll_by_kind.
  double makespan = 0;                                // seconds
  std::vector<double> stage_time;                     // per pipeline stage: first start → last end
  std::array<double, kNumOpClasses> critical{};       // seconds of the critical path by class
  std::array<double, kNumOpClasses> busy{};           // op-seconds by class, per GPU
  double comm_busy = 0;                               // communication op-seconds, per GPU
  double comm_exposed = 0;                            // per GPU: communication while that GPU's compute is idle
  double expert_imbalance = 0;                        // Σ over MoE layers of (slowest − mean rank) expert time
  double expert_time = 0;                             // Σ over MoE layers of the slowest rank's expert time
  std::array<double, 4> coll_by_kind{};               // comm op-seconds per GPU by CollKind; sends count in the AllToAll slot
  double idle_on_path = 0;                            // critical-path time spent waiting (none analytically)
  int kernels = 0;                                    // operations of the busiest rank; counted only without CUDA graphs (host launches)
  // The compute operations' work, per GPU, as the seconds it would take at the GPU's peak: flops ÷
  // the peak tensor rate of their math type, HBM bytes ÷ the peak bandwidth (compute_work.hpp).
  // Independent of how fast the step ran; what the energy model charges (sim/serving/energy.hpp).
  double tensor_work = 0, hbm_work = 0;
  // Per link class (sim/step/link_traffic.hpp), when the serving loop counts it: bytes carried,
  // and seconds the class's busiest link direction needs for them.
  std::array<double, kNumLinkClasses> link_bytes{};
  std::array<double, kNumLinkClasses> link_busiest{};
};

// Calls f(a.x, b.x) for each quantity x that adds up over steps — everything in StepTiming but
// makespan (a run's sums call it step_time), stage_time and kernels — of two timings, or of a
// run's sums (ServingBreakdown) and a timing: the one list of what a step adds to a run. Each
// field is visited once, arrays element by element.
template <class A, class B, class F>
void for_each_sum(A& a, B& b, F&& f) {
  for (std::size_t i = 0; i < a.critical.size(); ++i) {
    f(a.critical[i], b.critical[i]);
    f(a.busy[i], b.busy[i]);
  }
  for (std::size_t i = 0; i < a.coll_by_kind.size(); ++i) f(a.coll_by_kind[i], b.coll_by_kind[i]);
  f(a.comm_busy, b.comm_busy);
  f(a.comm_exposed, b.comm_exposed);
  f(a.expert_imbalance, b.expert_imbalance);
  f(a.expert_time, b.expert_time);
  f(a.idle_on_path, b.idle_on_path);
  f(a.tensor_work, b.tensor_work);
  f(a.hbm_work, b.hbm_work);
  for (std::size_t i = 0; i < a.link_bytes.size(); ++i) {
    f(a.link_bytes[i], b.link_bytes[i]);
    f(a.link_busiest[i], b.link_busiest[i]);
  }
}

// A step's core attention: on its critical path (the slowest group's, stage after stage) and per
// GPU — its time, and its work at peak (StepTiming::tensor_work, hbm_work).
struct AttentionCost {
  double critical = 0, busy = 0;
  double tensor_work = 0, hbm_work = 0;
  // this += w · o, field by field (a fit's weighted sum of its anchors' attention).
  void add(const AttentionCost& o, double w) {
    critical += w * o.critical;
    busy += w * o.busy;
    tensor_work += w * o.tensor_work;
    hbm_work += w * o.hbm_work;
  }
};

class AnalyticExecutor;

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  virtual const char* name() const = 0;
  // Runs `program`; appends per-op events to `timeline` when it is not null.
  virtual StepTiming run(const StepProgram& program, std::vector<TimelineEvent>* timeline = nullptr) const = 0;
  // The analytic executor whose compute model prices this executor's compute operations (every
  // executor shares it), so that compute alone — a step's core attention, which no transfer
  // touches — is priced without running a program (Lowering::price_attention).
  virtual const AnalyticExecutor& compute_pricer() const = 0;
};

}  // namespace shardsim
