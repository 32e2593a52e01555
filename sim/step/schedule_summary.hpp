// sim/step/schedule_summary.hpp — what a finished schedule of a step program means, for both executors.
//
// Owns: summarize_schedule — from every operation's start, end and the operation it waited for
// (its dependency or stream predecessor), the StepTiming both executors report: makespan, stage
// spans, the critical path by class, busy time by class and collective kind, communication busy
// and exposed per GPU, expert time and EP imbalance; and the per-rank timeline events. One
// function so that an analytic and a SimGrid report of the same program mean the same thing.
//
// Definitions (one step of one replica; "per GPU" = averaged over the replica's ranks):
//   critical[c]   seconds of class c on the critical path (walked back from the op that ends
//                 last through the op each one waited for); Σ critical + idle_on_path = makespan.
//   busy[c]       op-seconds of class c per GPU (a collective counts on every rank of its group).
//   comm_busy     per GPU: seconds of communication ops on the rank (Σ of the comm classes).
//   comm_exposed  per GPU: seconds the rank's communication runs while its compute stream is idle
//                 (the union of its comm intervals minus its compute intervals) — so
//                 0 ≤ comm_exposed ≤ comm_busy on every rank, hence on average.
// Communication on the critical path is Σ critical over the comm classes (is_comm_class): replica
// time, not comparable with the per-GPU figures (a pp = 2 path crosses both stages' collectives).
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <span>
#include <string>
#include <vector>

#include "sim/step/executor.hpp"
#include "topologies/gpu_spec.hpp"

namespace shardsim {

// Ranks an operation occupies: the compute rank (or its group, for a kernel lowered once for a
// TP group: LoweringOptions::group_compute), both ends of a send, or a collective's whole group —
// a view of the group, or of `pair` (filled here) for one rank or a send; no copy.
std::span<const int> op_ranks(const StepProgram& p, const StepOp& op, int (&pair)[2]);
// The same, copied into `out`.
void involved_ranks(const StepProgram& p, const StepOp& op, std::vector<int>& out);
// "attention", "tp_comm all-reduce", "pipeline_p2p send", …
std::string op_name(const StepOp& op);
// Classes whose operations are communication (collectives and sends).
bool is_comm_class(OpClass c);
// Σ busy over the compute classes: the seconds a GPU's compute stream ran (StepTiming::busy or a
// run's sums of it).
double compute_busy(const std::array<double, kNumOpClasses>& busy);

// Adds the compute operations' work (compute_work) to t.tensor_work and t.hbm_work, per GPU (a
// kernel counts on every rank it occupies); `rank_gpu[r]` is rank r's GPU.
void add_compute_work(const StepProgram& p, const std::vector<const GpuSpec*>& rank_gpu, StepTiming& t);

// REQUIRES: start, end, pred sized like p.ops; pred[i] < i or −1.
StepTiming summarize_schedule(const StepProgram& p, const std::vector<double>& start, const std::vector<double>& end,
                              const std::vector<int>& pred, std::vector<TimelineEvent>* timeline);

}  // namespace shardsim
