// sim/simgrid/fidelity.hpp — the fidelity tiers: analytic, simgrid (sampled steps), full (every step).
//
// Owns: serve_at_fidelity(), SimgridRunner (where SimGrid steps run: in this process, or in the
// worker pool) and the worker-side request handler. Tiers (docs/simulation.md):
//   analytic  the serving loop with the analytic executor (steps memoised by shape).
//   simgrid   pass 1 runs the analytic loop and records every executed step; a stratified sample
//             (quantiles of analytic step time) is lowered with representative layers (per stage:
//             one dense and two MoE layers) and run under both executors; pass 2 re-runs the loop
//             with each step's analytic timing scaled by the SimGrid/analytic ratio of the nearest
//             sampled step (by analytic step time). Failed SimGrid evaluations are counted and
//             their strata fall back to the nearest successful sample (or ratio 1); the report
//             counts them and the worker restarts they caused.
//   full      every step (no memoisation) runs whole in SimGrid.
// Thread-safety: serve_at_fidelity is single-threaded; SimgridRunner implementations say theirs.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/step/executor.hpp"
#include "sim/serving/serving.hpp"
#include "sim/serving/tier.hpp"

namespace shardsim {

class WorkerPool;

// What one SimGrid step evaluation returns.
struct SimgridStepResult {
  bool ok = false;
  std::string error;                        // when !ok
  StepTiming timing;
  std::array<double, 5> simgrid_seconds{};  // per CollKind + sends: Σ durations under SimGrid
  std::array<double, 5> analytic_seconds{}; // the same operations' contention-free durations
  int most_loaded_class = -1;               // LinkClass, −1 when no flow ran
  double analytic_makespan = 0;
  std::vector<double> op_end;               // when each operation ended, seconds from the start
  std::vector<LinkDirectionLoad> links;     // per link direction that carried a byte
};

class SimgridRunner {
 public:
  virtual ~SimgridRunner() = default;
  // Runs each program on the cluster named by `cluster_spec` (a load_cluster spec).
  virtual std::vector<SimgridStepResult> run(const std::string& cluster_spec, const std::vector<StepProgram>& programs) = 0;
  // Worker processes restarted so far (after crashes or timeouts); 0 in process.
  virtual std::uint64_t restarts() const { return 0; }
};

// The simgrid tier's contention figure over a run: each step's contention-free collective time
// by kind (StepTiming::coll_by_kind; sends count in the all-to-all slot, so the sends figure is
// weighed by it too) times the per-kind slowdown of the sample that stands for the step.
class RunWeightedSlowdown {
 public:
  // `slowdowns`: per sample, per CollKind + sends, SimGrid over analytic (1 where it ran none).
  explicit RunWeightedSlowdown(std::vector<std::array<double, 5>> slowdowns) : slowdowns_(std::move(slowdowns)) {}
  // One step (or `repeats` alike ones) stood for by sample i.
  void add(std::size_t sample, const std::array<double, 4>& coll_by_kind, double repeats = 1);
  // Kind k over the steps added; `fallback` when they spent no time in it.
  double slowdown(std::size_t k, double fallback) const;

 private:
  std::vector<std::array<double, 5>> slowdowns_;
  std::array<double, 5> analytic_{}, stretched_{};
};

// Runs in this process (one SimGrid Engine for the whole process). Not thread-safe.
std::unique_ptr<SimgridRunner> make_in_process_runner();
// Runs in the worker pool, programs in parallel (one call per program from a few threads).
// The pool's workers must run simgrid_worker_handler.
std::unique_ptr<SimgridRunner> make_pool_runner(WorkerPool& pool);
// The worker-side handler: request = cluster spec + encoded program; reply = encoded result.
std::string simgrid_worker_handler(std::string_view request);

struct FidelityReport {
  Tier tier = Tier::Analytic;
  long sampled_steps = 0;          // steps executed in SimGrid
  long failed = 0;                 // SimGrid evaluations that failed (worker died, error)
  long worker_restarts = 0;        // worker processes restarted during this run
  double ratio_min = 1, ratio_median = 1, ratio_max = 1;  // SimGrid / analytic step time
  // Per CollKind + sends, SimGrid time over contention-free time. Full tier: Σ over every step.
  // Simgrid tier: over the run — each step's analytic time of that kind (fast-forwarded steps
  // included) times the slowdown of the sample that stretched it, over the steps' analytic time
  // (RunWeightedSlowdown); a plain sum over the sampled steps would weigh each stratum of the
  // sample alike, and move with which steps the fast path happened to execute.
  std::array<double, 5> slowdown{1, 1, 1, 1, 1};
  std::array<int, 5> ops{};        // operations of each kind in the sampled programs
  int most_loaded_class = -1;      // LinkClass busiest in the most samples
  // Per link direction, over the steps run in SimGrid (a sample's representative layers at the
  // simgrid tier, whole steps at the full tier): bytes carried, busy seconds (bytes / capacity),
  // and the highest busy share of one step's makespan. `simgrid_seconds` = Σ those steps'
  // SimGrid makespans, so busy_seconds / simgrid_seconds is a link's mean utilisation.
  struct LinkLoad {
    int dlink = 0;
    double bytes = 0, busy_seconds = 0, peak = 0;
    long steps = 0;                // steps in which it carried a byte
  };
  std::vector<LinkLoad> links;     // by dlink
  double simgrid_seconds = 0;
  std::vector<std::string> errors; // first few failure messages
};

// Serves `trace` at `tier`. `runner` may be null for the analytic tier (and then every tier is analytic).
ServingResult serve_at_fidelity(Tier tier, const Plan& plan, const ModelSpec& model,
                                const Cluster& cluster, const std::string& cluster_spec, const RequestTrace& trace,
                                const RoutingSource* routing, const ServingOptions& options, SimgridRunner* runner,
                                FidelityReport& report, int samples = 16);

}  // namespace shardsim
