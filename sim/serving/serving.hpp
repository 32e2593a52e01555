// sim/serving/serving.hpp — the serving loop: continuous batching of a request trace on every replica.
//
// Owns: serve(), which replays requests on the plan's dp replicas (open loop: as the plan's
// dispatch says — round robin in arrival order, or a router that reads the replicas' loads, which
// then run in lockstep, sim/serving/router.hpp; closed loop: each client on one replica,
// sim/serving/arrivals.hpp), and inside a
// replica to the attention-DP group its scheduler picks. Each replica is one
// engine with the plan's EngineSettings (sim/plan/engine.hpp): FCFS admission limited by max_seqs
// (split over attention groups) and by the KV policy — reserve prompt + max output, reserve the
// true output (an oracle), or allocate blocks on demand and preempt the most recently admitted
// sequence (recompute or swap) when a step needs a block that is not free; the scheduler never
// knows output lengths unless the policy is the oracle. What each step carries, which request
// starts where, and whom to preempt is the engine's scheduler's decision (scheduler.hpp: vLLM V1
// and TensorRT-LLM run decode first, then prompt work, in one step; SGLang prefill first). Every step is
// lowered with its real tokens, contexts and routing and run by the executor; the host adds its
// per-iteration and per-sequence cost and, without CUDA graphs, launches that can outlast the
// GPU work. The steady-state window (SteadyWindow) runs from the moment every replica has turned
// its peak batch over once to the first replica's last admission. Pipeline parallelism runs
// pp micro-batches in flight ("virtual engines"): a micro-batch enters stage s when stage s is
// free, so steady-state throughput follows the slowest stage and the bubble is measured.
// Scoring paths (ServingOptions): the fast path memoises steps by shape (replicas of one cost
// class share the cache) and times new shapes from executed steps of their family with their own
// attention (sim/serving/step_costs.hpp),
// lowers folded layers and fast-forwards unchanging decode batches;
// set_exact() lowers every step whole. Units: seconds. Thread-safety: serve() is pure given a thread-safe executor and routing.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sim/step/executor.hpp"
#include "sim/plan/memory_model.hpp"
#include "sim/plan/plan.hpp"

namespace shardsim {

struct ModelSpec;
class Cluster;
class RoutingSource;
struct RequestTrace;
struct ReplicaBatch;

// Step timings by bucketed step shape (+ cost class), untransformed (sim/serving/step_costs.hpp).
struct StepCache;

// Where a request whose prompt was prefilled elsewhere (the prefill pool of a disaggregated plan)
// continues: the decode replica and attention group its KV cache was sent to; replica −1 = not here.
struct DecodeSlot {
  int replica = -1, group = 0;
};

class Cluster;

// Which replicas of a plan cost the same to the executor (their steps share one cache) depends
// only on where their GPUs sit, and finding out compares routes pair by pair: O(replica size²)
// per replica, 0.1 s for a 1,024-GPU plan. A search scores many plans with one layout, so its
// evaluator keeps the answers here, by the replicas' GPUs. For one cluster; thread-safe.
class CostClassMemo {
 public:
  // cost_classes(plan, cluster), remembered. std::logic_error for a second cluster.
  std::vector<int> classes(const Plan& plan, const Cluster& cluster);

 private:
  std::mutex mu_;
  const Cluster* cluster_ = nullptr;
  std::map<std::vector<int>, std::vector<int>> by_layout_;  // every replica's GPUs, in turn → classes
};

// How many of the plan's replicas are alike — the same step costs (one cost class, or replicas
// inside one node each, whose rails carry nothing) and, under open-loop round-robin, statistically
// the same share of any trace — so that one simulated replica stands for them all
// (ServingOptions::replica_share): plan.deg.dp, or 1 for a disaggregated plan, one replica, or
// replicas whose GPUs sit differently in the cluster.
int alike_replicas(const Plan& plan, const Cluster& cluster, CostClassMemo* memo = nullptr);

// Stops a run once it cannot meet an SLO goal: the capacity search's probes need only pass or
// fail, and a rate above the capacity fails long before its last request (sim/serving/capacity.cpp).
// Requests over a bound are counted as their first and last tokens come out — over all requests
// and over those arriving at `late_from` or later — judged exactly as summarize() judges them; the
// run stops when a count exceeds what the goal allows (ServingResult::stopped_early). A stopped
// result is incomplete: only its failure may be read from it.
struct SloStop {
  double ttft_s = 0, tpot_s = 0;   // the bounds
  bool joint = false;              // one count, of requests over either bound (an attainment goal); else TTFT and TPOT apart
  double late_from = std::numeric_limits<double>::infinity();
  static constexpr long kAny = std::numeric_limits<long>::max();
  long allowed[2][2] = {{kAny, kAny}, {kAny, kAny}};  // [all requests, late ones][TTFT (or joint), TPOT]
};

struct ServingOptions {
  bool offline = false;            // all requests arrive at t = 0
  // Closed loop (as vLLM's benchmark with --max-concurrency and AIConfigurator run it): this many
  // clients each send a request, wait for its last token (or its refusal), think `think_time`
  // seconds and send their next; 0 = open loop (the trace's arrival times, or 0 when offline).
  // Client c sends the trace's requests c, c + N, c + 2N, … and is served by replica c mod dp
  // (sim/serving/arrivals.hpp); a request's arrival in the results is when it was sent.
  int concurrency = 0;
  double think_time = 0;           // seconds
  double slo_ttft = 2.0;           // seconds
  double slo_tpot = 0.2;           // seconds
  // Timeline of replica 0: record `timeline_steps` steps (0 = none), from step `timeline_from`
  // (0-based), or from its first decode-only step when `timeline_from_decode`. A recorded step is
  // timed as it would be without a timeline (the timeline changes no figure); its events are those
  // of the step lowered whole (every layer) and run apart, scaled to that timing; each carries a
  // TimelineStep marker.
  int timeline_steps = 0;
  long timeline_from = 0;
  bool timeline_from_decode = false;
  long max_steps = 50'000'000;     // safety stop
  // Step memoisation: steps whose shape (per attention group: decode sequences, prefill tokens,
  // context tokens; sums and maxima) falls in the same ~6% buckets reuse one executed step's
  // timing (its routing included). 0 = execute every step. The analytic tier uses it by default;
  // the result reports how many steps were executed.
  int shape_buckets_per_octave = 12;
  // Fold the model's MoE layers onto about this many routed representatives (at least one per
  // pipeline stage) and each stage's dense layers onto one (LoweringOptions::fold_moe_layers);
  // 0 lowers every layer. Timeline steps and two-batch-overlap plans are never folded.
  int fold_moe_layers = 16;
  // Steps that route at least kLargeStepTokens at each MoE layer (a prompt chunk's window, or as
  // many decode tokens) fold onto this many (at least two per stage, at most the above; 0 = the
  // above): each layer's routing sample of such a step is steadier by √tokens than that of a
  // decode step of a few tokens, which the above is sized for (docs/performance-log.md).
  int fold_moe_layers_large = 8;
  static constexpr int kLargeStepTokens = 32;
  // A pipeline of kDeepPipeline stages or more lowers at least kDeepPipelineFold representatives,
  // kMinFoldPerStage per stage, in every step (large ones too): its slowest stage sets its pace.
  static constexpr int kDeepPipeline = 4;
  static constexpr int kDeepPipelineFold = 24;
  static constexpr int kMinFoldPerStage = 3;
  // Tokens of a prompt chunk routed per step (LoweringOptions::max_routed_tokens_per_seq, sim/step/batch_routing.hpp); the
  // rest are estimated from them. 0 routes every token (the exact path).
  int routed_tokens_per_seq = 32;
  // A decode-only step of a new shape is its family's mean over executed steps with its own
  // attention (sim/serving/step_costs.hpp) instead of being executed.
  bool interpolate_context = true;
  // A step mixing decode tokens and prompt chunks of a new shape is interpolated along its tokens
  // between executed steps of its family (sim/serving/step_costs.hpp) instead of being executed.
  bool interpolate_mixed = true;
  // Count every executed step's bytes per link class (sim/step/link_traffic.hpp) into the
  // breakdown; memoised steps carry their executed step's count. Off in searches (cost).
  bool link_traffic = false;
  // Record every replica step's work (ServingResult::step_work): energy over a window of the run
  // (the steady window ML.ENERGY measures in). Off by default (memory).
  bool record_work = false;
  // Decode-only steps whose shape key cannot change (no arrival, admission, completion, KV
  // growth that could preempt, or bucket crossing) are replayed without rebuilding the batch:
  // the loop advances the clock, not the sequences. Exact given the memoisation above.
  bool fast_forward = true;
  // The exact path: every step lowered with every layer and every token routed, nothing reused.
  void set_exact() {
    shape_buckets_per_octave = 0;
    fold_moe_layers = 0;
    fold_moe_layers_large = 0;
    routed_tokens_per_seq = 0;
    fast_forward = false;
    interpolate_context = false;
    interpolate_mixed = false;
  }
  bool exact() const { return shape_buckets_per_octave <= 0 && fold_moe_layers <= 0 && routed_tokens_per_seq <= 0; }
  // The decode pool of a disaggregated plan (sim/serving/disaggregated.hpp): request i arrives at
  // its trace arrival time (when its KV landed; `offline` and `concurrency` do not apply) with its
  // prompt prefilled on decode_slots[i] and its first token delivered when it is admitted there.
  // Empty = every request arrives with its prompt to prefill.
  std::vector<DecodeSlot> decode_slots;
  // Decode only (simulate --prefilled): every request arrives with its prompt already in the KV
  // cache, prefilled elsewhere with capacity to spare, as decode-phase benchmarks measure (SGLang's
  // and DeepSeek's decode pools alone): serve() hands request i to replica i mod dp, attention
  // group (i / dp) mod attn_dp as decode_slots above, at its arrival time (t = 0 when `offline`);
  // its first token goes out when it is admitted, so its TTFT is its wait for admission. Not with
  // a closed loop or a disaggregated plan (which has its own prefill pool): InputError.
  bool prefilled = false;
  // Replica 0's share: the trace is what open-loop round-robin hands replica 0 of a plan.deg.dp
  // times larger one (its requests 0, dp, 2dp, …), so only replica 0 is simulated and it is given
  // every request — its run is the one it would have in the larger trace's, step for step. For
  // replicas that are alike (alike_replicas()): the capacity search (sim/serving/capacity.hpp)
  // judges one replica's requests instead of all. std::logic_error with a disaggregated plan, a
  // closed loop or decode slots.
  bool replica_share = false;
  // Called for every step the loop runs or fast-forwards, with the timing its clock advances by
  // (after transform_timing), in simulation order per replica.
  std::function<void(const StepTiming& timing)> on_step;
  // Called for every step that is executed (not memoised), in simulation order per replica.
  std::function<void(int replica, const ReplicaBatch& batch, const StepTiming& timing)> on_executed_step;
  // A step cache shared between serve() calls (the simgrid tier's two passes); null = one for this
  // call, shared by the replicas of one cost class.
  std::shared_ptr<StepCache> step_cache;
  // Remembers replicas' cost classes across serve() calls (a search's evaluator); null = found
  // afresh.
  std::shared_ptr<CostClassMemo> cost_classes;
  // Applied to every step's timing (cached or executed) before the loop uses it; caches keep the
  // untransformed timing. The simgrid tier scales by the SimGrid/analytic ratio here.
  std::function<StepTiming(const StepTiming&)> transform_timing;
  // Set: the run stops as soon as it can no longer meet an SLO goal (SloStop). Not applied to
  // disaggregated plans, whose pools judge no request whole.
  std::optional<SloStop> slo_stop;
  // An offline run (open loop, every request at t = 0) stops at each replica's last admission:
  // what follows only drains, and the saturated window ends there (capacity.hpp's backlog runs,
  // whose drain steps were most of their executed steps). The requests still running are left
  // unfinished (ServingResult::drain_skipped). Not applied to disaggregated plans or closed loops.
  bool stop_at_last_admission = false;
};

struct RequestResult {
  int id = 0;
  int replica = 0, group = 0;      // disaggregated: the decode replica and group
  int prompt_tokens = 0, output_tokens = 0;
  double arrival = 0, admitted = 0, first_token = 0, finish = 0;  // seconds
  // Disaggregated plans only (else −1): the prefill replica, when it emitted the first token, and
  // when the prompt's KV cache had landed on the decode replica (first_token: when it was admitted there).
  int prefill_replica = -1;
  double prefilled = -1, kv_arrived = -1;
  int cached_tokens = 0;           // prompt tokens its first admission found in the prefix cache
  double ttft() const { return first_token - arrival; }
  double tpot() const { return output_tokens > 1 ? (finish - first_token) / (output_tokens - 1) : 0; }
  bool completed = false;
};

// Sums over every step of every replica (the dp replicas' steps added together) of what the
// executor reported (StepTiming; definitions in sim/step/schedule_summary.hpp). Two scopes:
//   replica-time  step_time, critical, idle_on_path, expert_*: seconds of replica steps, Σ over
//                 replicas (÷ dp = the mean replica's); Σ critical + idle_on_path = step_time.
//   per-GPU time  busy, coll_by_kind, comm_*: each step's per-GPU mean over its replica's ranks,
//                 Σ over replicas (÷ dp = the mean over all GPUs); comm_exposed ≤ comm_busy.
// pipeline_*: replica time per stage, Σ over replicas and stages; a bubble only exists for pp > 1.
struct ServingBreakdown {
  double step_time = 0;                           // Σ step makespans (all replicas)
  std::array<double, kNumOpClasses> critical{};   // Σ critical-path seconds by class (all replicas)
  double idle_on_path = 0;                        // Σ critical-path waits (all replicas); 0 analytically
  std::array<double, kNumOpClasses> busy{};       // Σ per-GPU busy seconds by class (all replicas)
  std::array<double, 4> coll_by_kind{};           // as StepTiming::coll_by_kind, Σ over steps (all replicas)
  double comm_busy = 0, comm_exposed = 0;         // Σ per-GPU communication busy / exposed (all replicas)
  double expert_time = 0, expert_imbalance = 0;   // Σ slowest-rank expert time / its excess over the mean
  double pipeline_bubble = 0;                     // Σ over replicas and stages of idle stage time
  double pipeline_span = 0;                       // Σ over replicas and stages of the busy span
  long steps = 0, prefill_tokens = 0, decode_tokens = 0;
  long executed_steps = 0;                        // steps actually lowered and run (rest memoised)
  long executed_chunk_steps = 0;                  // of those, steps with prompt chunks (the costliest)
  long forwarded_steps = 0;                       // of the memoised, replayed by fast-forward (no batch built)
  long interpolated_steps = 0;                    // decode shapes timed from their family (none executed)
  long interpolated_mixed_steps = 0;              // mixed shapes timed by interpolation along tokens
  int layers_lowered = 0, model_layers = 0;       // per replica: layers in a step program / in the model
  int large_layers_lowered = 0;                   // per replica: in a step routing many tokens (fold_moe_layers_large)
  int peak_seqs = 0;                              // most sequences ever running in one attention group
  long preemptions = 0;                           // sequences preempted for KV blocks (on-demand policy)
  long recomputed_tokens = 0;                     // KV tokens dropped by recompute preemptions (prefilled again)
  long cached_tokens = 0;                         // prompt tokens admissions found in a prefix cache (not prefilled)
  long prompt_tokens_admitted = 0;                // prompt tokens of those admissions (the hit rate's denominator)
  long prefix_evicted_blocks = 0;                 // prefix-cache blocks evicted from GPU memory for room
  long host_cached_tokens = 0;                    // of cached_tokens, found in the host tier (copied back)
  long host_dropped_blocks = 0;                   // blocks the host tier dropped for room
  long spec_steps = 0, spec_tokens = 0;          // speculative decoding: sequence-steps that verified drafts, tokens they emitted
  double offload_stall = 0;                       // Σ seconds steps waited for offloaded weights beyond their GPU time (all replicas)
  double host_time = 0;                           // Σ over steps (all replicas) of host time not hidden by the GPU
  double engaged = 0;                             // Σ over replicas of the time they had a step under way (host and GPU)
  double tensor_work = 0, hbm_work = 0;          // Σ per-GPU work at peak (StepTiming::tensor_work, hbm_work; all replicas)
  // Per link class, Σ over steps (all replicas), when ServingOptions::link_traffic: bytes carried,
  // and seconds the class's busiest link direction of each step needed (÷ step_time = how busy).
  std::array<double, kNumLinkClasses> link_bytes{};
  std::array<double, kNumLinkClasses> link_busiest{};
  bool link_traffic = false;                      // the two above were counted
};

// The saturated part of a run (see serve()): what steady-state throughput is measured over.
struct SteadyWindow {
  double start = 0, end = 0;      // seconds; end ≤ start means no window
  long tokens = 0;                // generated tokens emitted inside (start, end]
  long completions = 0;           // requests completed inside
  long turnover = 0;              // Σ over replicas of their peak running sequences: one batch turnover
  bool trusted = false;           // the window holds at least one more full turnover of the batch
  std::string note;               // why it is missing or short
  double seconds() const { return end > start ? end - start : 0; }
};

// Redundant experts (EPLB): the EP ranks' load max/mean over the layout's measured sample, mean
// over MoE layers, with contiguous placement and with the plan's layout (sim/step/expert_layout.hpp).
struct ExpertBalance {
  int redundant = 0;              // 0 = no redundant experts (the rest is unset)
  double before = 1, after = 1;
  long sample_tokens = 0;
};

// One pool of a disaggregated run (sim/serving/disaggregated.hpp).
struct PoolReport {
  int gpus = 0, replicas = 0;
  double utilization = 0;         // Σ replica step time / (replicas × the run's span, first arrival to last completion)
  ServingBreakdown breakdown;
  MemoryReport memory;
  ExpertBalance experts;
};

// What a disaggregated run adds to a colocated one: each pool, and the KV hand-over between them.
struct DisaggReport {
  bool on = false;                // false for a colocated plan (the rest is unset)
  PoolReport prefill, decode;
  long transfers = 0;             // requests whose KV moved to the decode pool
  double bytes = 0;               // Σ KV bytes moved
  // kv_arrived − prefilled per request, seconds (queueing behind other transfers and contention included)
  double transfer_mean = 0, transfer_p50 = 0, transfer_p99 = 0, transfer_max = 0;
  double alone_mean = 0;          // the same transfers each alone on the fabric (latency + bytes / bandwidth), mean
  double decode_wait_mean = 0;    // first_token − kv_arrived: waiting for the decode engine's admission, mean
  std::string transfer_tier = "analytic";  // or "simgrid": who timed the transfers
};

// A recorded step of replica 0 (ServingOptions::timeline_*): when it ran and what its batch held.
struct TimelineStep {
  long index = 0;                   // the replica's step number, 0-based
  double start = 0, end = 0;        // seconds (first stage's start, last stage's end)
  int decode_tokens = 0, prefill_tokens = 0;
  int decode_seqs = 0, prefill_seqs = 0;  // sequences decoding / prefilling (a chunk) in this step
  int running = 0;                  // sequences admitted on the replica
  long kv_tokens = 0;               // KV tokens allocated or reserved, all attention groups
  long kv_capacity = 0;             // KV tokens the replica holds, all attention groups
  int admitted = 0, preempted = 0;  // sequences admitted and preempted while the step was composed
};

// One replica step's work, per GPU (ServingOptions::record_work): when it ended, the seconds its
// compute stream ran (compute_busy) and its tensor and HBM work at peak (StepTiming) — what energy
// over a window of the run sums (sim/serving/energy.hpp).
struct StepEnergyWork {
  double end = 0, active = 0, tensor_work = 0, hbm_work = 0;
  double engaged = 0;  // the replica time this step added to ServingBreakdown::engaged
};

struct ServingResult {
  std::vector<RequestResult> requests;
  double makespan = 0;            // last completion, seconds
  std::vector<std::pair<double, int>> emissions;  // (step end, tokens generated) over all replicas, sorted by time
  std::vector<StepEnergyWork> step_work;  // every replica step, when ServingOptions::record_work (unsorted)
  SteadyWindow steady;
  ServingBreakdown breakdown;
  MemoryReport memory;
  std::vector<TimelineEvent> timeline;
  std::vector<TimelineStep> timeline_steps;  // one per recorded step, in order
  ExpertBalance experts;
  DisaggReport disagg;            // disaggregated plans only
  bool rejected_any = false;      // some request can never fit (prompt + output > KV capacity)
  bool stopped_early = false;     // ServingOptions::slo_stop: the goal was already missed (incomplete)
  bool drain_skipped = false;     // ServingOptions::stop_at_last_admission: some replica stopped with requests running
  long slo_misses[2][2] = {};     // requests counted against ServingOptions::slo_stop's allowances
  std::string note;               // e.g. why requests were rejected
};

ServingResult serve(const Plan& plan, const ModelSpec& model, const Cluster& cluster, const RequestTrace& trace,
                    const RoutingSource* routing, const StepExecutor& executor, const ServingOptions& options);

}  // namespace shardsim
