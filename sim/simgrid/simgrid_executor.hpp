// sim/simgrid/simgrid_executor.hpp — runs a step program as SimGrid activities on a cluster's platform.
//
// Owns: SimgridExecutor and ContentionReport (the expansion itself is TaskGraph, task_graph.hpp). The schedule follows the analytic executor's
// semantics exactly: an operation starts when its dependencies have finished and its stream is
// free on every rank it touches (the previous operation in program order on that rank's stream).
// Durations come from the discrete-event model instead of formulas:
//   compute     → an Exec on the GPU's host of roofline time × kSimgridHostSpeed flops
//   send        → one flow (after the route latency, paid as a timer)
//   collective  → the algorithm collective_time() picks for it (CollAlgo::Auto as NCCL would),
//                 expanded into flows: ring steps, binomial tree steps, NVLS steps, the intra- and
//                 inter-domain rings of the hierarchical algorithm, and all-to-all pairs aggregated
//                 as NCCL's PXN does (docs/simgrid.md gives each expansion and why it reproduces the
//                 analytic formula when nothing else shares its links).
// With no contention the two executors agree (tests/sim/simgrid/simgrid_test.cpp: within 2%, most programs to
// 1e-6); where they differ, last_contention() says which collective kinds took longer and which
// link class was busiest. The same program gives bit-identical results whatever ran before it
// (SimgridWorld::kClockOrigin). Units: seconds from the step's start, bytes, flops.
// Thread-safety: "none" (docs/architecture.md, Conventions) — one SimGrid Engine per process; run() must not be called
// concurrently or re-entered, by this or any other SimgridExecutor. Scores in worker processes.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "sim/step/collective_cost.hpp"
#include "sim/step/compute_cost.hpp"
#include "sim/step/executor.hpp"
#include "sim/simgrid/simgrid_platform.hpp"

namespace shardsim {

class Cluster;

// Index of sends in ContentionReport's per-kind arrays (after the four CollKind values).
inline constexpr int kContentionSendSlot = 4;

// Load of one link class during a run. Bytes are what SimGrid moved: flows that are sized to
// reproduce a calibrated rate (tree, NVLS, all-to-all NVLink legs; docs/simgrid.md) count as sized.
struct LinkClassLoad {
  double bytes = 0;            // bytes carried by links of this class, both directions, summed over links
  double busiest_seconds = 0;  // bytes / capacity of the busiest link-direction of this class, seconds
  double utilization = 0;      // busiest_seconds / the step's makespan
  int links_used = 0;          // link-directions of this class that carried any byte
  int busiest_link = -1;       // cluster link id of the busiest link-direction, -1 when unused
};

// How the last SimGrid run differed from the contention-free (analytic) durations of its operations.
struct ContentionReport {
  // Per collective kind (indexed by CollKind) and sends (kContentionSendSlot):
  std::array<double, 5> simgrid_seconds{};   // Σ operation durations in SimGrid, seconds
  std::array<double, 5> analytic_seconds{};  // Σ contention-free durations of the same operations, seconds
  std::array<int, 5> ops{};                  // operations of the kind
  // Simulated / analytic time of a kind (1 when it has no operations).
  double slowdown(int kind) const;
  std::array<LinkClassLoad, kNumLinkClasses> by_class{};  // indexed by LinkClass
  int most_loaded_class = -1;   // LinkClass with the largest busiest_seconds; −1 when no flow ran
  std::vector<LinkDirectionLoad> links;  // every link direction that carried a byte, by dlink
  double makespan = 0;          // SimGrid makespan of the step, seconds
  double analytic_makespan = 0; // AnalyticExecutor's makespan of the same program, seconds
  std::size_t flows = 0, execs = 0, timers = 0;  // SimGrid activities and timers used
  double wall_seconds = 0;      // wall time of run(), seconds
};
// One paragraph: per-kind slowdowns and the busiest link class.
std::string describe(const ContentionReport& r);

class SimgridExecutor final : public StepExecutor {
 public:
  // Builds (or reuses) `cluster`'s platform in SimgridWorld::instance(). `cluster` must outlive
  // the executor.
  explicit SimgridExecutor(const Cluster& cluster, ComputeModel compute = {}, CollectiveModel collective = {});
  ~SimgridExecutor() override;
  SimgridExecutor(const SimgridExecutor&) = delete;
  SimgridExecutor& operator=(const SimgridExecutor&) = delete;

  const char* name() const override { return "simgrid"; }
  // Runs `program` to completion in SimGrid (the Engine's clock keeps going; times are reported
  // from the step's start). Throws std::invalid_argument for a malformed program.
  StepTiming run(const StepProgram& program, std::vector<TimelineEvent>* timeline = nullptr) const override;
  const AnalyticExecutor& compute_pricer() const override;
  // The contention report of the last run().
  const ContentionReport& last_contention() const;
  // When each operation of the last run ended, seconds from its start (indexed like its ops).
  const std::vector<double>& last_op_ends() const;
  SimgridPlatform& platform() const;

 private:
  struct State;
  std::unique_ptr<State> st_;  // mutable run state: run() is const in the StepExecutor interface
};

}  // namespace shardsim
