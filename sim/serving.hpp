// sim/serving.hpp — the serving loop: continuous batching of a request trace on every replica.
//
// Owns: serve(), which replays requests on the plan's dp replicas (requests go to the replica
// with the least outstanding work at arrival, ties to the lowest index), and inside a replica to
// the attention-DP group with the fewest sequences. Each replica runs a vLLM-like scheduler:
// admission limited by max_seqs per group and by KV-cache capacity (prompt + output tokens
// reserved at admission, so nothing is ever evicted), decode tokens first, then prefill tokens up
// to max_batch_tokens (whole prompts, or chunks of prefill_chunk tokens). Every step is lowered
// with its real tokens, contexts and routing and run by the executor. Pipeline parallelism runs
// pp micro-batches in flight ("virtual engines"): a micro-batch enters stage s when stage s is
// free, so steady-state throughput follows the slowest stage and the bubble is measured.
// Units: seconds. Thread-safety: serve() is pure given a thread-safe executor and routing.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/executor.hpp"
#include "sim/memory_model.hpp"
#include "sim/plan.hpp"

namespace shardsim {

struct ModelSpec;
class Cluster;
class RoutingSource;
struct RequestTrace;
struct ReplicaBatch;

// Step timings by bucketed step shape (+ replica), untransformed; see ServingOptions.
using StepCache = std::map<std::vector<int>, StepTiming>;

struct ServingOptions {
  bool offline = false;            // all requests arrive at t = 0
  double slo_ttft = 2.0;           // seconds
  double slo_tpot = 0.2;           // seconds
  int timeline_steps = 0;          // record the timeline of the first N steps of replica 0
  long max_steps = 50'000'000;     // safety stop
  // Step memoisation: steps whose shape (per attention group: decode sequences, prefill tokens,
  // context tokens; sums and maxima) falls in the same ~6% buckets reuse one executed step's
  // timing (its routing included). 0 = execute every step. The analytic tier uses it by default;
  // the result reports how many steps were executed.
  int shape_buckets_per_octave = 12;
  // Called for every step that is executed (not memoised), in simulation order per replica.
  std::function<void(int replica, const ReplicaBatch& batch, const StepTiming& timing)> on_executed_step;
  // A step cache shared between serve() calls (the simgrid tier's two passes); null = private.
  std::shared_ptr<StepCache> step_cache;
  // Applied to every step's timing (cached or executed) before the loop uses it; caches keep the
  // untransformed timing. The simgrid tier scales by the SimGrid/analytic ratio here.
  std::function<StepTiming(const StepTiming&)> transform_timing;
};

struct RequestResult {
  int id = 0;
  int replica = 0, group = 0;
  int prompt_tokens = 0, output_tokens = 0;
  double arrival = 0, admitted = 0, first_token = 0, finish = 0;  // seconds
  double ttft() const { return first_token - arrival; }
  double tpot() const { return output_tokens > 1 ? (finish - first_token) / (output_tokens - 1) : 0; }
  bool completed = false;
};

// Sums over steps of a replica (or all replicas) of what the executor reported.
struct ServingBreakdown {
  double step_time = 0;                           // Σ step makespans (all replicas)
  std::array<double, kNumOpClasses> critical{};   // Σ critical-path seconds by class
  std::array<double, kNumOpClasses> busy{};       // Σ rank-averaged busy seconds by class
  std::array<double, 4> coll_by_kind{};           // as StepTiming::coll_by_kind, summed over steps
  double comm_busy = 0, comm_exposed = 0;
  double expert_time = 0, expert_imbalance = 0;
  double pipeline_bubble = 0;                     // Σ over replicas and stages of idle stage time
  double pipeline_span = 0;                       // Σ over replicas and stages of the busy span
  long steps = 0, prefill_tokens = 0, decode_tokens = 0;
  long executed_steps = 0;                        // steps actually lowered and run (rest memoised)
  int peak_seqs = 0;                              // most sequences ever running in one attention group
};

struct ServingResult {
  std::vector<RequestResult> requests;
  double makespan = 0;            // last completion, seconds
  ServingBreakdown breakdown;
  MemoryReport memory;
  std::vector<TimelineEvent> timeline;
  bool rejected_any = false;      // some request can never fit (prompt + output > KV capacity)
  std::string note;               // e.g. why requests were rejected
};

ServingResult serve(const Plan& plan, const ModelSpec& model, const Cluster& cluster, const RequestTrace& trace,
                    const RoutingSource* routing, const StepExecutor& executor, const ServingOptions& options);

}  // namespace shardsim
