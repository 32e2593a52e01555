// sim/executor.hpp — the interface both executors implement, and what a step's execution reports.
//
// Owns: StepTiming (makespan, per-stage spans, the critical path's time by operation class,
// communication exposed vs overlapped, expert-load imbalance), TimelineEvent (for Chrome traces),
// and StepExecutor, the one call the serving loop makes per step.
// Thread-safety: executors declare it (STYLE.md §2): AnalyticExecutor is "constant" (one instance
// shared by threads); the SimGrid executor is "none" and lives in worker processes.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "sim/step_program.hpp"

namespace shardsim {

struct TimelineEvent {
  int rank = 0;
  Stream stream = Stream::Compute;
  OpClass cls = OpClass::Norm;
  int layer = -1;
  double start = 0, duration = 0;  // seconds from the step's start
  std::string name;
};

struct StepTiming {
  double makespan = 0;                                // seconds
  std::vector<double> stage_time;                     // per pipeline stage: first start → last end
  std::array<double, kNumOpClasses> critical{};       // seconds of the critical path by class
  std::array<double, kNumOpClasses> busy{};           // op-seconds by class, averaged over ranks
  double comm_busy = 0;                               // communication op-seconds averaged over ranks
  double comm_exposed = 0;                            // communication seconds on the critical path
  double expert_imbalance = 0;                        // Σ over MoE layers of (max − mean) expert time
  double expert_time = 0;                             // Σ over MoE layers of the max expert time
  std::array<double, 4> coll_by_kind{};               // rank-averaged op-seconds by CollKind; sends count in the AllToAll slot
  double idle_on_path = 0;                            // critical-path time spent waiting (none analytically)
};

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  virtual const char* name() const = 0;
  // Runs `program`; appends per-op events to `timeline` when it is not null.
  virtual StepTiming run(const StepProgram& program, std::vector<TimelineEvent>* timeline = nullptr) const = 0;
};

}  // namespace shardsim
