// sim/serving/serving.cpp — continuous batching per replica, pipeline virtual engines, request metrics.
#include "sim/serving/serving.hpp"

#include <algorithm>
#include <deque>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>

#include "common/input_error.hpp"
#include "sim/plan/plan_layout.hpp"
#include "sim/serving/arrivals.hpp"
#include "sim/serving/disaggregated.hpp"
#include "sim/serving/kv_transfer.hpp"
#include "sim/serving/prefix_cache.hpp"
#include "sim/serving/router.hpp"
#include "sim/serving/scheduler.hpp"
#include "sim/serving/step_costs.hpp"
#include "sim/serving/step_fit.hpp"
#include "sim/step/analytic_executor.hpp"
#include "sim/step/schedule_summary.hpp"
#include "sim/step/link_traffic.hpp"
#include "sim/step/lowering.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

namespace {

// An engine replaying one memoised decode step (ServingOptions::fast_forward): its sequences
// are not touched until the run is materialised; `done` steps have run, `left` may still run.
struct Armed {
  long left = 0, done = 0;
  int tokens = 0;        // decode tokens per step (its running sequences)
  int host_seqs = 0;     // of those, the most in one attention group (what its scheduler handles)
  StepTiming timing;     // as the loop uses it (transformed)
  bool active() const { return left > 0 || done > 0; }
};

// What the steady-state window needs from a replica.
struct ReplicaLoad {
  double last_admission = 0;
  int peak_running = 0;
  std::vector<double> completions;
};

// Adds one replica step's timing to the run's sums (scopes: ServingBreakdown).
void accumulate(ServingBreakdown& b, const StepTiming& t) {
  b.step_time += t.makespan;
  for_each_sum(b, t, [](double& x, double y) { x += y; });
  b.steps += 1;
}

// Counts the operations of the busiest rank: the kernels its host launches in one step.
// A folded operation counts as the `weight` kernels it stands for.
int kernels_per_step(const StepProgram& p) {
  std::vector<double> n(static_cast<std::size_t>(p.num_ranks()), 0);
  int pair[2];
  for (const auto& op : p.ops)
    for (int r : op_ranks(p, op, pair)) n[static_cast<std::size_t>(r)] += op.weight;
  return n.empty() ? 0 : static_cast<int>(std::lround(*std::max_element(n.begin(), n.end())));
}

// The plan the draft head runs under: the plan with the draft head's types (Dtypes::draft).
Plan draft_plan(const Plan& plan) {
  Plan p = plan;
  p.dtypes = plan.dtypes.draft();
  return p;
}

class ReplicaSim {
 public:
  ReplicaSim(int replica, int key_replica, const Plan& plan, const ModelSpec& model, const Cluster& cluster,
             const RoutingSource* routing, const StepExecutor& ex, const ServingOptions& opt, const MemoryReport& mem,
             const std::shared_ptr<const ExpertLayout>& experts, const RequestTrace& trace, ServingResult& out)
      : replica_(replica), eng_(plan.engine), trace_(trace),
        lowering_(plan, model, cluster, routing, replica, folded(opt, experts, run_fold(opt, plan, model))),
        draft_model_(plan.engine.spec_tokens > 0 ? draft_head_model(model) : ModelSpec{}),
        draft_(plan.engine.spec_tokens > 0
                   ? std::make_unique<Lowering>(draft_plan(plan), draft_model_, cluster, routing, replica, folded(opt, experts, 1))
                   : nullptr),
        unfolded_(opt.fold_moe_layers > 0 && replica == 0 && opt.timeline_steps > 0
                      ? std::make_unique<Lowering>(plan, model, cluster, routing, replica, folded(opt, experts, 0))
                      : nullptr),
        links_(opt.link_traffic ? std::make_unique<LinkTrafficCounter>(cluster) : nullptr),
        ex_(ex),
        opt_(opt), kv_capacity_(mem.kv_capacity_tokens), kv_bytes_per_token_(mem.worst().kv_per_token), out_(out),
        groups_(plan.deg.attn_dp), engines_(plan.deg.pp), group_seqs_(seqs_per_group(plan.engine, plan.deg.attn_dp)),
        group_tokens_(tokens_per_group(plan.engine, plan.deg.attn_dp)),
        kv_used_(static_cast<std::size_t>(groups_), 0), seqs_in_group_(static_cast<std::size_t>(groups_), 0),
        seqs_in_engine_(static_cast<std::size_t>(engines_), 0), ready_(static_cast<std::size_t>(engines_), 0.0),
        stage_free_(static_cast<std::size_t>(engines_), 0.0), stage_busy_(static_cast<std::size_t>(engines_), 0.0),
        stage_first_(static_cast<std::size_t>(engines_), -1.0), armed_(static_cast<std::size_t>(engines_)),
        costs_(opt.shape_buckets_per_octave, opt.interpolate_context, opt.interpolate_mixed, key_replica,
               *opt.step_cache, [this](const ReplicaBatch& b) { return attention_cost(b); }),
        sched_(make_scheduler(plan.engine, plan.deg.attn_dp)) {
    if (const int large = large_fold(opt, plan, model); large < run_fold(opt, plan, model))
      large_ = std::make_unique<Lowering>(plan, model, cluster, routing, replica, folded(opt, experts, large));
    out_.breakdown.layers_lowered = lowering_.num_lowered_layers();
    out_.breakdown.large_layers_lowered = (large_ ? *large_ : lowering_).num_lowered_layers();
    out_.breakdown.link_traffic = opt.link_traffic;
    out_.breakdown.model_layers = model.layers;
    if (eng_.weight_offload > 0) {
      double bytes = 0;
      for (const auto& st : mem.stages) bytes = std::max(bytes, st.offloaded);
      stream_s_ = bytes / cluster.pool_gpu(plan.first_gpu).host_bw;
    }
    if (eng_.prefix_cache && trace.prefix_block_tokens > 0)
      prefix_.assign(static_cast<std::size_t>(groups_),
                     PrefixCache(trace.prefix_block_tokens,
                                 kv_bytes_per_token_ > 0 ? static_cast<long>(eng_.kv_host / kv_bytes_per_token_) : 0));
  }

  void run(Arrivals& arrivals, ReplicaLoad& load) {
    start(arrivals);
    advance(kNever, load);
    finish();
  }

  // A run in pieces (serve() with a router that reads loads): start, advance to each arrival the
  // router decides, then to the end (limit kNever), finish.
  void start(Arrivals& arrivals) {
    arrivals_ = &arrivals;
    begin_.assign(static_cast<std::size_t>(engines_) + 1, 0);
  }

  // Runs every event before `limit` (all of them with kNever).
  void advance(double limit, ReplicaLoad& load) {
    Arrivals& arrivals = *arrivals_;
    while (!out_.stopped_early) {
      int e = next_engine();
      double t = ready_[static_cast<std::size_t>(e)];
      if (t == kNever || t >= limit) break;
      if (stop_at_admission_ && waiting_.empty() && admissions_ > 0 && arrivals.next_time() == kNever) {
        out_.drain_skipped = out_.drain_skipped || !running_.empty();  // the rest only drains (ServingOptions::stop_at_last_admission)
        break;
      }
      if (fast_step(e, t, arrivals.next_time())) continue;
      if (steps_ >= opt_.max_steps) break;
      materialize(e);
      while (arrivals.next_time() <= t) {
        if (waiting_.empty()) head_blocked_ = false;  // a new head
        Seq s = new_seq(arrivals.pop());
        if (!s.pinned) s.queue = sched_->queue_of(arrived_++);
        waiting_.push_back(s);
      }
      step_admitted_ = step_preempted_ = 0;
      // vLLM serves its running requests (their next blocks, preempting if it must) before the
      // waiting queue, and admits nobody in a step that preempted; the others admit first.
      const bool running_first = sched_->running_first();
      const bool preempted = running_first && grow_kv(e);
      if (!preempted && !waiting_.empty() && !head_known_blocked()) {
        materialize_all();  // admission reads the exact KV use
        admit(t, load);
        head_blocked_ = !waiting_.empty();
        blocked_at_ = frees_;
      }
      if (!running_first) grow_kv(e);
      work_.clear();
      build_batch(e, batch_, work_);
      StepWork& work = work_;
      ReplicaBatch& batch = batch_;
      if (work.empty()) {
        sleep(e, t, arrivals.next_time());
        continue;
      }
      ++steps_;
      const int seqs = static_cast<int>(work.size());
      const bool whole_decode = seqs == seqs_in_engine_[static_cast<std::size_t>(e)] && batch_is_decode(work);
      const bool decoded = std::any_of(work.begin(), work.end(), [](const auto& w) { return !w.first->prefilling(); });
      double end = run_step(t, batch, work);
      finish_step(e, work, end, load);  // (work's pointers die here)
      sched_->after_step(decoded);
      ready_[static_cast<std::size_t>(e)] = end;
      arm(e, seqs, whole_decode);
    }
  }

  void finish() {
    materialize_all();
    for (int s = 0; s < engines_ && engines_ > 1; ++s) {  // one stage has no pipeline bubble
      if (stage_first_[static_cast<std::size_t>(s)] < 0) continue;
      double span = stage_free_[static_cast<std::size_t>(s)] - stage_first_[static_cast<std::size_t>(s)];
      out_.breakdown.pipeline_span += span;
      out_.breakdown.pipeline_bubble += std::max(0.0, span - stage_busy_[static_cast<std::size_t>(s)]);
    }
  }

 private:
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // The engine that is ready first; among equals, one with sequences, then the lowest index.
  int next_engine() const {
    int e = 0;
    auto key = [&](int i) {
      return std::make_pair(ready_[static_cast<std::size_t>(i)], seqs_in_engine_[static_cast<std::size_t>(i)] > 0 ? 0 : 1);
    };
    for (int k = 1; k < engines_; ++k)
      if (key(k) < key(e)) e = k;
    return e;
  }

  // Engine e has no work: sleep until the next arrival or until a busy engine finishes a step
  // (which may free KV room for a waiting request).
  void sleep(int e, double t, double next_arrival) {
    if (running_.empty()) sched_->on_idle();
    double wake = next_arrival;
    for (int k = 0; k < engines_; ++k)
      if (k != e && seqs_in_engine_[static_cast<std::size_t>(k)] > 0) wake = std::min(wake, ready_[static_cast<std::size_t>(k)]);
    if (wake == kNever && !waiting_.empty()) {  // nothing runs and the head still cannot start
      reject(t);
      wake = t;
    }
    ready_[static_cast<std::size_t>(e)] = wake == kNever ? kNever : std::max(t, wake);
  }

  Seq new_seq(int req) const {
    const auto& r = out_.requests[static_cast<std::size_t>(req)];
    Seq s;
    s.req = req;
    s.prompt = r.prompt_tokens;
    s.output = r.output_tokens;
    if (!opt_.decode_slots.empty()) {  // prefilled by the prefill pool; its first token is out
      s.prefilled = s.prompt;
      s.ctx = s.prompt;
      s.generated = 1;
      s.group = opt_.decode_slots[static_cast<std::size_t>(req)].group;
      s.pinned = true;
    }
    return s;
  }

  // Refuses the waiting sequence at position `at` (the head unless said otherwise).
  void reject(double t, std::size_t at = 0) {
    ++frees_;  // a new head
    out_.rejected_any = true;
    out_.note = "some requests need more KV cache than one attention group holds; they were not served";
    arrivals_->done(waiting_[at].req, t);
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(at));
  }

  // FCFS admission (preempted sequences first, they sit at the head). Sequences in the replica's
  // one queue (Seq::queue < 0): the head waits for room and holds back the rest. Sequences in an
  // attention-DP rank's own queue (SGLang): each rank's head waits for room in its rank only.
  void admit(double t, ReplicaLoad& load) {
    sched_->begin_admission();
    std::vector<char> rank_blocked;
    int blocked_ranks = 0;
    for (std::size_t i = 0; i < waiting_.size();) {
      Seq s = waiting_[i];
      if (s.queue >= 0 && !rank_blocked.empty() && rank_blocked[static_cast<std::size_t>(s.queue)]) {
        ++i;
        continue;
      }
      auto& r = out_.requests[static_cast<std::size_t>(s.req)];
      if (sched_->lifetime_kv(s) > kv_capacity_) {
        reject(t, i);
        continue;
      }
      long need = sched_->admission_kv(s);
      int best = sched_->place(s, need, queues());
      if (best < 0) {
        if (s.queue < 0) return;
        if (rank_blocked.empty()) rank_blocked.assign(static_cast<std::size_t>(groups_), 0);
        rank_blocked[static_cast<std::size_t>(s.queue)] = 1;
        if (++blocked_ranks == groups_) return;
        ++i;
        continue;
      }
      if (s.swapped) pending_swap_ += s.ctx * kv_bytes_per_token_ / eng_.swap_bw;
      s.swapped = false;
      s.group = best;
      reuse_prefix(s, r);
      s.engine = static_cast<int>(std::min_element(seqs_in_engine_.begin(), seqs_in_engine_.end()) - seqs_in_engine_.begin());
      s.kv = need;
      s.order = ++admissions_;
      if (r.admitted < 0) r.admitted = t;
      if (s.pinned && r.first_token < 0) {  // handed over by a prefill pool: its first token goes out now
        r.first_token = t;
        out_.emissions.push_back({t, 1});
      }
      r.replica = replica_;
      r.group = best;
      load.last_admission = t;
      kv_used_[static_cast<std::size_t>(best)] += need;
      make_room(best);
      seqs_in_group_[static_cast<std::size_t>(best)]++;
      out_.breakdown.peak_seqs = std::max(out_.breakdown.peak_seqs, seqs_in_group_[static_cast<std::size_t>(best)]);
      seqs_in_engine_[static_cast<std::size_t>(s.engine)]++;
      if (ready_[static_cast<std::size_t>(s.engine)] == kNever || ready_[static_cast<std::size_t>(s.engine)] < t)
        ready_[static_cast<std::size_t>(s.engine)] = t;
      ++step_admitted_;
      running_.insert(running_.begin() + static_cast<std::ptrdiff_t>(begin_[static_cast<std::size_t>(s.engine) + 1]), s);
      for (std::size_t k = static_cast<std::size_t>(s.engine) + 1; k < begin_.size(); ++k) ++begin_[k];
      sched_->admitted(s);
      load.peak_running = std::max(load.peak_running, static_cast<int>(running_.size()));
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  // The prompt's leading blocks its group's prefix cache holds are not prefilled: the sequence
  // starts with them in its KV (always computing its last token, as the engines do) and references
  // them. A swapped-in or handed-over sequence has its KV already.
  void reuse_prefix(Seq& s, RequestResult& r) {
    if (prefix_.empty() || s.swapped || s.pinned || s.prefilled > 0) return;
    PrefixCache& cache = prefix_[static_cast<std::size_t>(s.group)];
    const auto& blocks = trace_.requests[static_cast<std::size_t>(s.req)].prefix_blocks;
    const int usable = std::min(static_cast<int>(blocks.size()), (s.prompt - 1) / cache.block_tokens());
    const PrefixCache::Hit found = cache.find(blocks, usable);
    const int hit = found.blocks;
    const int tokens = hit * cache.block_tokens();
    out_.breakdown.prompt_tokens_admitted += s.prompt;
    out_.breakdown.cached_tokens += tokens;
    if (found.from_host > 0) {  // copied back from host memory before the prompt's next chunk
      const double bytes = static_cast<double>(found.from_host) * cache.block_tokens() * kv_bytes_per_token_;
      pending_swap_ += bytes / eng_.swap_bw;
      out_.breakdown.host_cached_tokens += static_cast<long>(found.from_host) * cache.block_tokens();
    }
    if (r.admitted < 0) r.cached_tokens = tokens;
    if (hit == 0) return;
    cache.hold(blocks, hit);
    s.held = hit;
    s.prefilled = tokens;
    s.ctx = tokens;
  }

  // The sequence's whole blocks among its first `tokens` join its group's prefix cache, referenced
  // by it: its prompt's once prefilled, its answer's (where the trace names them) when released.
  void cache_blocks(Seq& s, long tokens) {
    if (prefix_.empty()) return;
    PrefixCache& cache = prefix_[static_cast<std::size_t>(s.group)];
    const auto& blocks = trace_.requests[static_cast<std::size_t>(s.req)].prefix_blocks;
    const int whole = static_cast<int>(std::min<long>(static_cast<long>(blocks.size()), tokens / cache.block_tokens()));
    if (whole <= s.held) return;
    cache.hold(std::span<const std::uint64_t>(blocks).subspan(static_cast<std::size_t>(s.held)), whole - s.held);
    s.held = whole;
  }

  // Cached blocks nobody references live in group g's free KV: evicted (LRU) as use grows.
  void make_room(int g) {
    if (prefix_.empty()) return;
    PrefixCache& cache = prefix_[static_cast<std::size_t>(g)];
    const long free = static_cast<long>(kv_capacity_) - kv_used_[static_cast<std::size_t>(g)];
    if (cache.evictable_tokens() <= free) return;
    const long before = cache.evicted_blocks(), dropped = cache.host_dropped_blocks();
    cache.trim(std::max(0L, free));
    out_.breakdown.prefix_evicted_blocks += cache.evicted_blocks() - before;
    out_.breakdown.host_dropped_blocks += cache.host_dropped_blocks() - dropped;
  }

  // On-demand KV: every decoding sequence of engine e gets the block its next token needs;
  // when a group has none free, the scheduler's victim is preempted. True when one was.
  bool grow_kv(int e) {
    if (eng_.policy != KvPolicy::OnDemand) return false;
    bool preempted = false;
    for (std::size_t i = begin_[static_cast<std::size_t>(e)]; i < begin_[static_cast<std::size_t>(e) + 1]; ++i) {
      Seq& s = running_[i];
      const long step_kv = s.ctx + 1 + eng_.spec_tokens;  // a verify step writes its drafts' KV too
      if (s.req < 0 || s.prefilled < s.prompt || step_kv <= s.kv) continue;
      long more = sched_->blocks(step_kv) - s.kv;
      auto& used = kv_used_[static_cast<std::size_t>(s.group)];
      if (used + more > kv_capacity_) materialize_all();  // runs' pre-allocations are not real use
      while (used + more > kv_capacity_ && s.req >= 0) {
        preempt(sched_->victim(s.group, running_));
        preempted = true;
      }
      if (s.req < 0) continue;  // it was the latest itself
      used += more;
      s.kv += more;
      make_room(s.group);
    }
    if (preempted) {  // the only sequences marked here; finish_step removes the ones it completes
      compact();  // (victims may run on other engines)
      sched_->after_preemption(running_);
    }
    return preempted;
  }

  // Gives back a running sequence's KV and slots and marks it for removal (req = −1).
  void release(Seq& s) {
    ++frees_;
    if (s.prefilled >= s.prompt) cache_blocks(s, s.ctx);  // its whole blocks stay cached, evictable
    if (s.held > 0) {
      prefix_[static_cast<std::size_t>(s.group)].release(trace_.requests[static_cast<std::size_t>(s.req)].prefix_blocks, s.held);
      s.held = 0;
    }
    kv_used_[static_cast<std::size_t>(s.group)] -= s.kv;
    seqs_in_group_[static_cast<std::size_t>(s.group)]--;
    seqs_in_engine_[static_cast<std::size_t>(s.engine)]--;
    s.req = -1;
  }

  // Frees a running sequence's KV and puts it back at the head of the queue.
  void preempt(Seq& s) {
    out_.breakdown.preemptions++;
    ++step_preempted_;
    Seq back = s;
    release(s);
    back.kv = 0;
    back.held = 0;  // its blocks stay cached: a recomputed prompt finds them again
    if (back.queue >= 0) back.queue = s.group;  // back into its own rank's queue
    if (eng_.preemption == Preemption::Swap && s.prefilled >= s.prompt) {
      back.swapped = true;
      pending_swap_ += s.ctx * kv_bytes_per_token_ / eng_.swap_bw;
    } else {  // recompute: the prompt and what was generated are prefilled again
      back.pinned = false;
      back.prompt = s.prefilled >= s.prompt ? static_cast<int>(s.ctx) + 1 : s.prompt;
      back.prefilled = 0;
      back.ctx = 0;
      out_.breakdown.recomputed_tokens += s.ctx;
    }
    if (sched_->requeue_at_head()) waiting_.push_front(back);
    else waiting_.push_back(back);
  }

  // Engine e's next step, as the engine's scheduler composes it.
  void build_batch(int e, ReplicaBatch& batch, StepWork& work) {
    batch.groups.resize(static_cast<std::size_t>(groups_));
    for (auto& g : batch.groups) g.clear();  // (keeps their memory for the next step)
    sched_->compose(engine_seqs(e), batch, work);
  }

  // Executes (or recalls) the step's timing and advances the clock by it; returns when the step's
  // last stage ends.
  double run_step(double t, const ReplicaBatch& batch, const std::vector<std::pair<Seq*, int>>& work) {
    std::size_t seqs = 0;  // per attention group: each group's scheduler handles its own sequences
    for (const auto& g : batch.groups) seqs = std::max(seqs, g.size());
    const bool record = records(batch_is_decode(work));
    std::vector<TimelineEvent> events;
    last_timing_ = step_timing(batch, record, events);
    double step_start = t;
    double end = advance_clock(t, last_timing_, static_cast<int>(seqs), &step_start);
    if (record) {
      for (auto& ev : events) ev.start += step_start;
      out_.timeline.insert(out_.timeline.end(), events.begin(), events.end());
      out_.timeline_steps.push_back(marker(step_start, end, work));
    }
    return end;
  }

  // ---- the timeline (ServingOptions::timeline_*) ----

  // Replica 0 records from the chosen step on, until it has recorded timeline_steps.
  bool timeline_pending() const {
    return replica_ == 0 && static_cast<long>(out_.timeline_steps.size()) < opt_.timeline_steps;
  }
  bool records(bool decode_only) {
    if (!timeline_pending()) return false;
    if (!timeline_started_)
      timeline_started_ = opt_.timeline_from_decode ? decode_only : steps_ - 1 >= opt_.timeline_from;
    return timeline_started_;
  }
  TimelineStep marker(double start, double end, const std::vector<std::pair<Seq*, int>>& work) const {
    TimelineStep m;
    m.index = steps_ - 1;
    m.start = start;
    m.end = end;
    for (const auto& [s, n] : work) {
      const bool prefill = s->prefilled < s->prompt;
      (prefill ? m.prefill_tokens : m.decode_tokens) += n;
      (prefill ? m.prefill_seqs : m.decode_seqs) += 1;
    }
    m.running = static_cast<int>(running_.size());
    for (long used : kv_used_) m.kv_tokens += used;
    m.kv_capacity = static_cast<long>(kv_capacity_) * groups_;
    m.admitted = step_admitted_;
    m.preempted = step_preempted_;
    return m;
  }

  // Adds a step's timing to the sums and the host's share to the clock, runs it through the
  // pipeline stages; returns when its last stage ends (and in *first_stage when it began).
  // `seqs`: the step's sequences in its fullest attention group. With attention-DP, SGLang and
  // TensorRT-LLM run one scheduler per attention-DP rank, side by side, so the per-sequence host
  // work is that of the busiest rank, not of the whole engine (issue 42, defect 1).
  double advance_clock(double t, const StepTiming& timing, int seqs, double* first_stage = nullptr) {
    accumulate(out_.breakdown, timing);
    if (opt_.on_step) opt_.on_step(timing);
    // Host: the scheduler's fixed and per-sequence work, swaps, and — without CUDA graphs — kernel
    // launches, which stretch the GPU time when the host cannot keep ahead.
    const double work = eng_.step_overhead + eng_.seq_overhead * seqs;
    double host = work + pending_swap_;
    pending_swap_ = 0;
    double launch = eng_.cuda_graphs ? 0 : timing.kernels * eng_.launch_overhead;
    double stretch = timing.makespan > 0 && launch > timing.makespan ? launch / timing.makespan : 1.0;
    double clock = t + host;
    // An overlap scheduler prepared this step while the GPU ran the one before, from the moment it
    // launched that one: the step starts when both are done (docs/engines.md "Host costs"). Only
    // back to back — after an idle engine the host starts with the step — and with one pipeline
    // stage (with several, each micro-batch's host work already runs beside the others' stages).
    double exposed = host;
    // (with one stage, engaged_until_ is when the last step ended)
    if (eng_.overlap_schedule && engines_ == 1 && last_launch_ >= 0 && t <= engaged_until_) {
      exposed = std::max(0.0, last_launch_ + work - t) + (host - work);  // (a swap's copy still waits)
      clock = t + exposed;
    }
    out_.breakdown.host_time += exposed + (stretch - 1) * timing.makespan;
    for (int s = 0; s < engines_; ++s) {
      double st = stretch * (timing.stage_time.size() > static_cast<std::size_t>(s) ? timing.stage_time[static_cast<std::size_t>(s)]
                                                                                   : (s == 0 ? timing.makespan : 0));
      double begin = std::max(clock, stage_free_[static_cast<std::size_t>(s)]);
      if (s == 0) last_launch_ = begin;
      if (s == 0 && first_stage != nullptr) *first_stage = begin;
      if (stage_first_[static_cast<std::size_t>(s)] < 0) stage_first_[static_cast<std::size_t>(s)] = begin;
      clock = begin + st;
      stage_free_[static_cast<std::size_t>(s)] = clock;
      stage_busy_[static_cast<std::size_t>(s)] += st;
    }
    if (engines_ == 1) clock = std::max(clock, last_launch_ + stretch * timing.makespan);
    // The replica had work from t to clock (pipelined steps overlap: only the new part counts).
    const double engaged = std::max(0.0, clock - std::max(t, engaged_until_));
    engaged_until_ = std::max(engaged_until_, clock);
    out_.breakdown.engaged += engaged;
    if (opt_.record_work) out_.step_work.push_back({clock, compute_busy(timing.busy), timing.tensor_work, timing.hbm_work, engaged});
    return clock;
  }

  // ---- fast-forward (ServingOptions::fast_forward) ----

  bool head_known_blocked() const { return head_blocked_ && blocked_at_ == frees_ && sched_->blocked_until_free(); }

  static bool batch_is_decode(const std::vector<std::pair<Seq*, int>>& work) {
    for (const auto& [s, n] : work)
      if (s->prefilled < s->prompt) return false;
    return true;
  }

  // Replays engine e's memoised decode step when nothing the exact loop would do differs: no
  // arrival it could admit, no head that may have become admissible. False = take the normal path.
  bool fast_step(int e, double t, double next_arrival) {
    Armed& a = armed_[static_cast<std::size_t>(e)];
    if (a.left <= 0 || steps_ >= opt_.max_steps) return false;
    if (waiting_.empty() ? next_arrival <= t : !head_known_blocked()) return false;
    ++steps_;
    --a.left;
    ++a.done;
    out_.breakdown.forwarded_steps++;
    sched_->after_step(true);
    double end = advance_clock(t, a.timing, a.host_seqs);
    out_.breakdown.decode_tokens += a.tokens;
    out_.emissions.push_back({end, a.tokens});
    ready_[static_cast<std::size_t>(e)] = end;
    return true;
  }

  // After a decode step that held all of engine e's sequences (`all_decode`, judged before the
  // step): how many more steps keep the same shape key (contexts grow by one a step), complete
  // nobody and — on demand — fit their KV blocks; those steps' blocks are pre-allocated so that
  // no other engine's step can take them.
  void arm(int e, int seqs, bool all_decode) {
    const bool recording = timeline_pending();  // no fast-forward past or through recorded steps
    const ShapeKey& last_key = costs_.last_key();
    // (speculative decoding emits a varying number of tokens a step: every step is built)
    if (!opt_.fast_forward || !costs_.memoises() || recording || !all_decode || seqs > engine_tokens(eng_, groups_) ||
        eng_.spec_tokens > 0)
      return;
    std::vector<double> n(static_cast<std::size_t>(groups_), 0), c(static_cast<std::size_t>(groups_), 0);
    long min_left = std::numeric_limits<long>::max();
    int total = 0;
    for (const auto& x : engine_seqs(e)) {
      if (x.req < 0) continue;
      n[static_cast<std::size_t>(x.group)] += 1;
      c[static_cast<std::size_t>(x.group)] += static_cast<double>(x.ctx);
      min_left = std::min<long>(min_left, x.output - x.generated);
      ++total;
    }
    // (the decode tokens within the token budgets — each rank's own, or the engine's: the step held them all)
    if (total == 0 || (eng_.rank_limits ? *std::max_element(n.begin(), n.end()) > group_tokens_ : total > eng_.max_batch_tokens)) return;
    auto key_after = [&](long m) {  // the key of the m-th next step
      double sums[3] = {0, 0, 0}, maxs[3] = {0, 0, 0};
      for (int g = 0; g < groups_; ++g) {
        double v[3] = {n[static_cast<std::size_t>(g)], 0, c[static_cast<std::size_t>(g)] + static_cast<double>(m) * n[static_cast<std::size_t>(g)]};
        for (int i = 0; i < 3; ++i) {
          sums[i] += v[i];
          maxs[i] = std::max(maxs[i], v[i]);
        }
      }
      return costs_.key(sums, maxs, total);
    };
    long hi = min_left - 1;  // the step that completes a sequence runs normally
    if (hi <= 0 || key_after(0) != last_key) return;
    long lo = 1;  // key_after(m) == last_key for m < lo; keys only grow with m
    while (lo < hi) {
      long mid = lo + (hi - lo + 1) / 2;
      if (key_after(mid - 1) == last_key) lo = mid;
      else hi = mid - 1;
    }
    long steps = lo;
    if (eng_.policy == KvPolicy::OnDemand) steps = preallocate(e, steps);
    if (steps <= 0) return;
    armed_[static_cast<std::size_t>(e)] = Armed{steps, 0, total, static_cast<int>(*std::max_element(n.begin(), n.end())), last_timing_};
  }

  // On-demand KV: the blocks engine e's sequences need for `steps` more steps, halving `steps`
  // until every group has room; returns the steps granted (0 = none).
  long preallocate(int e, long steps) {
    std::vector<long> more(static_cast<std::size_t>(groups_));
    for (; steps > 0; steps /= 2) {
      std::fill(more.begin(), more.end(), 0);
      for (const auto& x : engine_seqs(e))
        if (x.req >= 0) more[static_cast<std::size_t>(x.group)] += std::max(0L, sched_->blocks(x.ctx + steps) - x.kv);
      bool fits = true;
      for (int g = 0; g < groups_; ++g)
        fits = fits && kv_used_[static_cast<std::size_t>(g)] + more[static_cast<std::size_t>(g)] <= kv_capacity_;
      if (fits) break;
    }
    if (steps <= 0) return 0;
    for (auto& x : engine_seqs(e)) {
      if (x.req < 0) continue;
      x.kv_unarmed = x.kv;
      long grown = std::max(x.kv, sched_->blocks(x.ctx + steps));
      kv_used_[static_cast<std::size_t>(x.group)] += grown - x.kv;
      x.kv = grown;
    }
    return steps;
  }

  // Brings engine e's sequences up to date with the steps it fast-forwarded and gives back the
  // KV blocks pre-allocated for steps it did not run.
  void materialize(int e) {
    Armed& a = armed_[static_cast<std::size_t>(e)];
    if (!a.active()) return;
    for (auto& x : engine_seqs(e)) {
      if (x.req < 0) continue;
      x.ctx += a.done;
      x.generated += static_cast<int>(a.done);
      if (eng_.policy != KvPolicy::OnDemand) continue;
      long real = a.done > 0 ? std::max(x.kv_unarmed, sched_->blocks(x.ctx)) : x.kv_unarmed;
      kv_used_[static_cast<std::size_t>(x.group)] -= x.kv - real;
      x.kv = real;
    }
    a = Armed{};
  }

  void materialize_all() {
    for (int e = 0; e < engines_; ++e) materialize(e);
  }

  // The batch's core attention as the executor prices it inside a step (StepCosts swaps it),
  // priced without a program by the executor's compute model (Lowering::price_attention). Only
  // called when steps are interpolated, never on the full tier's exact SimGrid path.
  AttentionCost attention_cost(const ReplicaBatch& batch) {
    AttentionCost a = lowering_.price_attention(batch, ex_.compute_pricer());
    if (draft_ && draft_batch_of(batch))  // the draft head's passes attend over the contexts too
      a.add(draft_->price_attention(draft_batch_, ex_.compute_pricer()), eng_.spec_tokens);
    return a;
  }

  // The batch one draft-head pass runs (draft_batch_): every sequence of `batch` that decodes, one
  // token on its context and the token it emits; false when none decodes.
  bool draft_batch_of(const ReplicaBatch& batch) {
    draft_batch_.groups.resize(batch.groups.size());
    bool any = false;
    for (std::size_t g = 0; g < batch.groups.size(); ++g) {
      auto& out = draft_batch_.groups[g];
      out.clear();
      for (const SeqWork& w : batch.groups[g]) {
        if (w.draft <= 0 || !w.decodes()) continue;
        out.push_back(SeqWork{w.request, w.first_pos + 1, 1, w.context + 1, true, 0});
        any = true;
      }
    }
    return any;
  }

  // The step's timing as the run uses it. A recorded step (`record`) is timed exactly as it would
  // be without a timeline — a timeline must not change what it records — and its events come
  // from the step lowered whole, run apart (counted nowhere), scaled to that timing.
  StepTiming step_timing(const ReplicaBatch& batch, bool record, std::vector<TimelineEvent>& events) {
    const bool apart = record && costs_.memoises();  // else the step is executed whole anyway
    auto execute = [&] {
      lowering_for(batch, record && !apart).lower(batch, program_);
      StepTiming t = ex_.run(program_, record && !apart ? &events : nullptr);
      if (draft_ && draft_batch_of(batch)) {  // then spec_tokens passes of the draft head, one after another
        draft_->lower(draft_batch_, draft_program_);
        const StepTiming d = ex_.run(draft_program_);
        t = weighted({{&t, 1.0}, {&d, static_cast<double>(eng_.spec_tokens)}});
      }
      if (!eng_.cuda_graphs) t.kernels = kernels_per_step(program_);  // only launches need it
      if (links_) {
        const LinkTraffic lt = links_->count(program_);
        t.link_bytes = lt.bytes;
        t.link_busiest = lt.busiest;
      }
      out_.breakdown.executed_steps++;
      if (batch.has_chunks()) out_.breakdown.executed_chunk_steps++;
      if (opt_.on_executed_step) opt_.on_executed_step(replica_, batch, t);
      return t;
    };
    const long interpolated = costs_.interpolated(), mixed = costs_.interpolated_mixed();
    StepTiming timing = costs_.timing(batch, execute);
    out_.breakdown.interpolated_steps += costs_.interpolated() - interpolated;
    out_.breakdown.interpolated_mixed_steps += costs_.interpolated_mixed() - mixed;
    if (apart) {
      lowering_for(batch, true).lower(batch, timeline_program_);
      const StepTiming whole = ex_.run(timeline_program_, &events);
      const double r = whole.makespan > 0 ? timing.makespan / whole.makespan : 1.0;
      for (auto& ev : events) {
        ev.start *= r;
        ev.duration *= r;
      }
    }
    if (stream_s_ > timing.makespan) {  // the offloaded weights arrive no faster than the host link
      const double r = timing.makespan > 0 ? stream_s_ / timing.makespan : 1.0;
      for (double& st : timing.stage_time) st *= r;
      for (auto& ev : events) {
        ev.start *= r;
        ev.duration *= r;
      }
      out_.breakdown.offload_stall += stream_s_ - timing.makespan;
      timing.makespan = stream_s_;
    }
    if (opt_.transform_timing) {
      StepTiming tt = opt_.transform_timing(timing);
      double r = timing.makespan > 0 ? tt.makespan / timing.makespan : 1.0;
      for (auto& ev : events) {
        ev.start *= r;
        ev.duration *= r;
      }
      tt.kernels = timing.kernels;
      timing = std::move(tt);
    }
    return timing;
  }

  void finish_step(int e, const std::vector<std::pair<Seq*, int>>& work, double end, ReplicaLoad& load) {
    int emitted = 0;
    for (auto [s, n] : work) {
      auto& r = out_.requests[static_cast<std::size_t>(s->req)];
      if (s->prefilled < s->prompt) {
        s->prefilled += n;
        s->ctx = s->prefilled;
        out_.breakdown.prefill_tokens += n;
        if (s->prefilled < s->prompt) continue;
        cache_blocks(*s, s->prompt);
      } else {
        const int n = accepted(*s);  // 1, or with speculative drafts 1 + those accepted
        s->ctx += n;
        s->generated += n - 1;
        emitted += n - 1;
        out_.breakdown.decode_tokens += n;
        if (eng_.spec_tokens > 0) {
          out_.breakdown.spec_steps += 1;
          out_.breakdown.spec_tokens += n;
        }
      }
      s->generated += 1;
      ++emitted;
      if (r.first_token < 0) {
        r.first_token = end;
        judge(r, false);
      }
      if (s->generated >= s->output) {
        r.finish = end;
        r.completed = true;
        judge(r, true);
        load.completions.push_back(end);
        arrivals_->done(s->req, end);
        release(*s);
      }
    }
    if (emitted > 0) out_.emissions.push_back({end, emitted});
    compact(e);
  }

  // Tokens a decoding sequence's step emits: 1, and with speculative decoding (spec_tokens = K)
  // the drafts accepted before the first rejection — draft i accepted with probability
  // spec_accept[i] (the last value repeats) — at most what it has left to generate. The draws are
  // a hash of the request's index and its position (the step's), so a run repeats exactly.
  int accepted(const Seq& s) const {
    const int k = eng_.spec_tokens;
    if (k <= 0) return 1;
    const int left = std::max(1, s.output - s.generated);
    int n = 1;
    const std::uint64_t at = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(s.req)) << 32) ^ static_cast<std::uint64_t>(s.ctx);
    for (int i = 0; i < k && n < left; ++i) {
      const double p = eng_.spec_accept[static_cast<std::size_t>(std::min<int>(i, static_cast<int>(eng_.spec_accept.size()) - 1))];
      const std::uint64_t bits = hash_combine(hash_combine(0x73706563ULL, at), static_cast<std::uint64_t>(i));
      if (static_cast<double>(bits >> 11) * 0x1.0p-53 >= p) break;
      ++n;
    }
    return n;
  }

  // ServingOptions::slo_stop: counts request r against the goal's allowances when its first token
  // (`finished` false) or its last one came out, with summarize()'s tests, and stops the run when
  // a count exceeds its allowance.
  void judge(const RequestResult& r, bool finished) {
    if (!opt_.slo_stop) return;
    const SloStop& st = *opt_.slo_stop;
    int kind = -1;
    if (st.joint) {  // Metrics::met_slo's test; the TTFT's miss is counted once, when it is known
      if (!finished) kind = r.ttft() <= st.ttft_s ? -1 : 0;
      else kind = r.ttft() <= st.ttft_s && !(r.tpot() <= st.tpot_s) ? 0 : -1;
    } else if (!finished) {  // the percentiles' values: milliseconds, TPOT only beyond one token
      kind = r.ttft() * 1e3 <= st.ttft_s * 1e3 ? -1 : 0;
    } else if (r.output_tokens > 1) {
      kind = r.tpot() * 1e3 <= st.tpot_s * 1e3 ? -1 : 1;
    }
    if (kind < 0) return;
    for (int w = 0; w < (r.arrival >= st.late_from ? 2 : 1); ++w)
      if (++out_.slo_misses[w][kind] > st.allowed[w][kind]) out_.stopped_early = true;
  }

  // The Lowering an executed step uses: timeline steps every layer; steps that route
  // ServingOptions::kLargeStepTokens or more at each layer fewer representatives
  // (ServingOptions::fold_moe_layers_large); the rest the run's.
  const Lowering& lowering_for(const ReplicaBatch& batch, bool record) const {
    if (record && unfolded_) return *unfolded_;
    if (large_ && routed_tokens(batch) >= ServingOptions::kLargeStepTokens) return *large_;
    return lowering_;
  }

  // Tokens of `batch` routed at each lowered MoE layer: each sequence's up to its window.
  int routed_tokens(const ReplicaBatch& batch) const {
    const int window = opt_.routed_tokens_per_seq > 0 ? opt_.routed_tokens_per_seq : ServingOptions::kLargeStepTokens;
    int n = 0;
    for (const auto& g : batch.groups)
      for (const auto& w : g) n += std::min(w.new_tokens, window);
    return n;
  }

  // MoE representatives of the run's steps: ServingOptions::fold_moe_layers, and in a pipeline of
  // ServingOptions::kDeepPipeline stages or more at least kDeepPipelineFold (kMinFoldPerStage per
  // stage). A pipeline runs at its slowest stage's pace, and the maximum over stages turns each
  // stage's routing-sample noise into a bias: with two representatives per stage the deepest
  // reference case ran 1.6-2.8% slow on two of three routing seeds (docs/performance-log.md).
  // Under two-batch overlap nothing is folded: a representative standing for w layers stretches
  // one layer's two-stream overlap w times, and the in-order streams never win back the stagger
  // that costs — one fill of w − 1 layers per step, a bias no number of representatives removes
  // (its reference case ran 0.1-1.3% slow; every layer lowered, inside 0.1%; performance-log.md).
  static int run_fold(const ServingOptions& o, const Plan& plan, const ModelSpec& model) {
    if (two_micro_batches(plan, model)) return 0;
    if (o.fold_moe_layers <= 0 || plan.deg.pp < ServingOptions::kDeepPipeline) return o.fold_moe_layers;
    return std::max({o.fold_moe_layers, ServingOptions::kDeepPipelineFold, ServingOptions::kMinFoldPerStage * plan.deg.pp});
  }

  // MoE representatives of a step routing many tokens (ServingOptions::fold_moe_layers_large): at
  // least two per pipeline stage, and never more than the run's; a deep pipeline keeps the run's.
  static int large_fold(const ServingOptions& o, const Plan& plan, const ModelSpec& model) {
    const int fold = run_fold(o, plan, model);
    if (fold <= 0 || o.fold_moe_layers_large <= 0 || plan.deg.pp >= ServingOptions::kDeepPipeline) return fold;
    return std::min(fold, std::max(o.fold_moe_layers_large, 2 * plan.deg.pp));
  }

  static LoweringOptions folded(const ServingOptions& o, const std::shared_ptr<const ExpertLayout>& experts, int fold) {
    LoweringOptions lo;
    lo.fold_moe_layers = fold;
    lo.group_compute = fold > 0;  // the fast path: an analytic executor
    lo.max_routed_tokens_per_seq = o.routed_tokens_per_seq;
    lo.experts = experts;
    return lo;
  }

  int replica_;
  const EngineSettings& eng_;
  const RequestTrace& trace_;  // the requests' prefix blocks
  Lowering lowering_;
  ModelSpec draft_model_;               // speculative decoding's draft head as a model (draft_head_model)
  std::unique_ptr<Lowering> draft_;     // its lowering, when EngineSettings::spec_tokens > 0
  StepProgram draft_program_;
  ReplicaBatch draft_batch_;
  std::unique_ptr<Lowering> unfolded_;  // timeline steps show every layer
  std::unique_ptr<Lowering> large_;  // steps routing many tokens, when they fold further
  std::unique_ptr<LinkTrafficCounter> links_;  // ServingOptions::link_traffic
  const StepExecutor& ex_;
  const ServingOptions& opt_;
  double kv_capacity_;
  double kv_bytes_per_token_;   // per GPU, the worst stage: what a swap moves per token
  ServingResult& out_;
  int groups_, engines_, group_seqs_, group_tokens_;
  std::vector<PrefixCache> prefix_;  // per attention group, when the engine caches prefixes and the trace has them
  std::vector<long> kv_used_;
  std::vector<int> seqs_in_group_, seqs_in_engine_;
  std::vector<double> ready_, stage_free_, stage_busy_, stage_first_;
  Arrivals* arrivals_ = nullptr;  // of the run in progress
  ReplicaBatch batch_;            // the step being built (kept: its memory is reused)
  StepWork work_;                 // sequence, tokens this step
  std::deque<Seq> waiting_;
  // By pipeline engine — running_[begin_[e], begin_[e + 1]) are engine e's, in admission order —
  // so that an engine's step walks its own sequences only (a vector: the loop walks it every step).
  std::vector<Seq> running_;
  std::vector<std::size_t> begin_;
  long admissions_ = 0;
  // ServingOptions::stop_at_last_admission, where it applies (an offline, open-loop run)
  const bool stop_at_admission_ = opt_.stop_at_last_admission && opt_.offline && opt_.concurrency <= 0 && opt_.decode_slots.empty();
  long arrived_ = 0;          // requests that have arrived (the scheduler's queue assignment counts them)
  double pending_swap_ = 0;
  double engaged_until_ = 0;  // when the last step that counted toward ServingBreakdown::engaged ended
  double last_launch_ = -1;   // when the last step began on the first stage (−1: none yet)
  // Seconds a forward needs to stream the offloaded weights in (EngineSettings::weight_offload,
  // the slowest GPU's host link): a step lasts at least this.
  double stream_s_ = 0;   // host↔GPU swap seconds to charge to the next step
  long steps_ = 0;
  bool timeline_started_ = false;  // replica 0 has reached the first step to record
  long frees_ = 0;             // releases and rejections so far: a blocked head may now fit
  int step_admitted_ = 0, step_preempted_ = 0;  // in the step being composed (TimelineStep)
  long blocked_at_ = 0;        // frees_ when the head was last found blocked
  bool head_blocked_ = false;
  std::vector<Armed> armed_;   // per engine
  StepTiming last_timing_;     // the timing of the last step run normally, as the loop used it
  StepProgram program_;  // reused step after step
  StepProgram timeline_program_;   // a recorded step lowered whole, for its events
  StepCosts costs_;      // memoised, interpolated or executed step timings (in the run's shared cache)
  std::unique_ptr<Scheduler> sched_;  // the engine's admission, composition and preemption rules

  std::span<Seq> engine_seqs(int e) {
    return {running_.data() + begin_[static_cast<std::size_t>(e)], running_.data() + begin_[static_cast<std::size_t>(e) + 1]};
  }
  // Removes the finished and preempted (req < 0) from engine e's sequences, or from all (e < 0).
  void compact(int e = -1) {
    if (e < 0) {
      running_.erase(std::remove_if(running_.begin(), running_.end(), [](const Seq& x) { return x.req < 0; }), running_.end());
      std::fill(begin_.begin(), begin_.end(), 0);
      for (const Seq& x : running_) ++begin_[static_cast<std::size_t>(x.engine) + 1];
      for (std::size_t k = 1; k < begin_.size(); ++k) begin_[k] += begin_[k - 1];
      return;
    }
    const auto k = static_cast<std::size_t>(e);
    auto first = running_.begin() + static_cast<std::ptrdiff_t>(begin_[k]), last = running_.begin() + static_cast<std::ptrdiff_t>(begin_[k + 1]);
    const auto kept = std::remove_if(first, last, [](const Seq& x) { return x.req < 0; });
    const auto removed = static_cast<std::size_t>(last - kept);
    if (removed == 0) return;
    running_.erase(kept, last);
    for (std::size_t j = k + 1; j < begin_.size(); ++j) begin_[j] -= removed;
  }
  ReplicaQueues queues() const { return ReplicaQueues{waiting_, running_, kv_used_, seqs_in_group_, kv_capacity_, group_seqs_}; }
};

// Sorts `v`, which arrives as a few ascending runs (each replica's steps in time order), by merging
// the runs, or by sorting when they are many; equal elements are alike, so the order is std::sort's.
template <class T>
void sort_runs(std::vector<T>& v) {
  constexpr std::size_t kMaxRuns = 64;
  std::vector<std::size_t> ends;
  for (std::size_t i = 1; i < v.size() && ends.size() <= kMaxRuns; ++i)
    if (v[i] < v[i - 1]) ends.push_back(i);
  if (ends.size() > kMaxRuns) {
    std::sort(v.begin(), v.end());
    return;
  }
  ends.push_back(v.size());
  for (std::size_t k = 1; k < ends.size(); ++k)  // [0, ends[k−1]) is sorted: merge the next run in
    std::inplace_merge(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(ends[k - 1]),
                       v.begin() + static_cast<std::ptrdiff_t>(ends[k]));
}

// The saturated window: from the moment every replica has turned its peak batch over once (as
// many completions as its peak of running sequences) to the first replica's last admission
// (after it, that replica only drains).
SteadyWindow steady_window(const std::vector<ReplicaLoad>& loads, std::vector<std::pair<double, int>>& emissions) {
  SteadyWindow w;
  w.start = 0;
  w.end = std::numeric_limits<double>::infinity();
  long turnover = 0;
  for (const auto& l : loads) {
    if (l.completions.empty()) continue;
    std::size_t k = static_cast<std::size_t>(std::max(1, l.peak_running));
    // (a replica that has not turned its peak batch over — a run stopped at its last admission
    // before it did — has no saturated window)
    w.start = std::max(w.start, k <= l.completions.size() ? l.completions[k - 1] : std::numeric_limits<double>::infinity());
    w.end = std::min(w.end, l.last_admission);
    turnover += l.peak_running;
  }
  sort_runs(emissions);
  if (!(w.end > w.start)) {
    w = SteadyWindow{};
    w.note = "no saturated window: the run ends before its batches turn over once (more requests, or a higher rate)";
    return w;
  }
  for (const auto& [t, n] : emissions)
    if (t > w.start && t <= w.end) w.tokens += n;
  for (const auto& l : loads)
    for (double t : l.completions)
      if (t > w.start && t <= w.end) w.completions++;
  w.turnover = turnover;
  w.trusted = w.completions >= turnover;
  if (!w.trusted)
    w.note = "short saturated window: " + std::to_string(w.completions) + " completions in it, fewer than one more turnover (" +
             std::to_string(turnover) + "); use more requests";
  return w;
}

// True when two replicas' steps cost the same to the analytic executor: rank by rank the same
// rail, NIC bandwidth and NVLink domain pattern, and pair by pair routes of the same latency,
// bottleneck and kind, on GPUs of the same type. (All the collective formulas read; sim/step/collective_cost.cpp.)
// `in_node_rails_free`: rails and NICs are not compared for replicas that each stay inside one
// node, where nothing reaches a NIC (two tp=4 replicas of one DGX on rails 0-3 and 4-7 cost the
// same). Their step caches are still kept apart: sharing them would let fewer routing samples
// reach more steps, which moved a Mixtral case's TPOT p50 by −1.3% (docs/performance-log.md).
bool same_costs(const Cluster& c, const std::vector<int>& a, const std::vector<int>& b, bool in_node_rails_free = false) {
  const std::size_t p = a.size();
  bool one_node = in_node_rails_free;
  for (std::size_t i = 1; i < p && one_node; ++i) one_node = c.node_of(a[0]) == c.node_of(a[i]) && c.node_of(b[0]) == c.node_of(b[i]);
  for (std::size_t i = 0; i < p; ++i) {
    if (c.gpu_type_of(a[i]) != c.gpu_type_of(b[i])) return false;  // (a pool lies on one type; kept for safety)
    if (!one_node && (c.rail_of(a[i]) != c.rail_of(b[i]) || c.injection_bw(a[i]) != c.injection_bw(b[i]))) return false;
    for (std::size_t j = 0; j < p; ++j) {
      if (c.same_nvlink_domain(a[i], a[j]) != c.same_nvlink_domain(b[i], b[j])) return false;
      if (i == j) continue;
      Route x = c.route(a[i], a[j]), y = c.route(b[i], b[j]);
      if (x.latency != y.latency || x.bottleneck_bw != y.bottleneck_bw || x.nvlink_only != y.nvlink_only) return false;
    }
  }
  return true;
}

// For each replica, the first replica with the same costs (its step cache entries are shared).
std::vector<int> cost_classes(const Plan& plan, const Cluster& cluster) {
  PlanLayout layout(plan);
  std::vector<int> cls(static_cast<std::size_t>(plan.deg.dp));
  std::vector<std::vector<int>> gpus;
  std::vector<int> firsts;
  for (int r = 0; r < plan.deg.dp; ++r) {
    gpus.push_back(layout.replica(r));
    cls[static_cast<std::size_t>(r)] = r;
    for (int f : firsts)
      if (same_costs(cluster, gpus[static_cast<std::size_t>(f)], gpus.back())) {
        cls[static_cast<std::size_t>(r)] = f;
        break;
      }
    if (cls[static_cast<std::size_t>(r)] == r) firsts.push_back(r);
  }
  return cls;
}

// Replica `rep`'s arrivals when no router reads loads (replicas never talk to each other). Open
// loop: requests go round-robin to replicas in arrival order. Closed loop: client c is served by
// replica c mod dp; that replica's clients share, in order, the requests c, c + N, c + 2N, … of
// theirs, each sending the next unsent one when its last finished.
Arrivals replica_arrivals(std::vector<RequestResult>& requests, int dp, int rep, const ServingOptions& o) {
  const int n = static_cast<int>(requests.size());
  if (!o.decode_slots.empty()) {  // a decode pool: the requests handed to this replica, as their KV lands
    std::vector<int> mine;
    for (int i = 0; i < n; ++i)
      if (o.decode_slots[static_cast<std::size_t>(i)].replica == rep) mine.push_back(i);
    std::stable_sort(mine.begin(), mine.end(), [&](int a, int b) {
      return requests[static_cast<std::size_t>(a)].arrival < requests[static_cast<std::size_t>(b)].arrival;
    });
    return Arrivals::open(std::move(mine), requests);
  }
  if (o.concurrency <= 0) {
    std::vector<int> mine;
    for (int i = o.replica_share ? 0 : rep; i < n; i += o.replica_share ? 1 : dp) mine.push_back(i);
    return Arrivals::open(std::move(mine), requests);
  }
  // This replica's clients (c ≡ rep mod dp) and, in order, the requests they would be dealt
  // (i mod concurrency ≡ one of them): one list they share, as a benchmark's semaphore does.
  int clients = 0;
  for (int c = rep; c < o.concurrency && c < n; c += dp) ++clients;
  std::vector<int> queue;
  for (int i = 0; i < n; ++i)
    if ((i % o.concurrency) % dp == rep) queue.push_back(i);
  return Arrivals::closed(std::move(queue), clients, o.think_time, requests);
}

}  // namespace

// ServingOptions::prefilled (a colocated plan): the requests handed over as a prefill pool would
// hand them, to every replica and attention group in turn.
static ServingResult serve_prefilled(const Plan& plan, const ModelSpec& model, const Cluster& cluster, const RequestTrace& trace,
                                     const RoutingSource* routing, const StepExecutor& executor, const ServingOptions& options) {
  if (options.concurrency > 0)
    throw InputError("--prefilled", "--concurrency", "decode only takes open-loop arrivals (the trace's, a rate, or offline)");
  ServingOptions o = options;
  o.prefilled = false;
  const std::size_t dp = static_cast<std::size_t>(plan.deg.dp), groups = static_cast<std::size_t>(plan.deg.attn_dp);
  o.decode_slots.resize(trace.requests.size());
  for (std::size_t i = 0; i < trace.requests.size(); ++i)
    o.decode_slots[i] = DecodeSlot{static_cast<int>(i % dp), static_cast<int>(i / dp % groups)};
  if (!options.offline) return serve(plan, model, cluster, trace, routing, executor, o);
  RequestTrace at_once = trace;  // handed over at t = 0
  for (auto& r : at_once.requests) r.arrival_s = 0;
  return serve(plan, model, cluster, at_once, routing, executor, o);
}

std::vector<int> CostClassMemo::classes(const Plan& plan, const Cluster& cluster) {
  const PlanLayout layout(plan);
  std::vector<int> key;
  for (int r = 0; r < plan.deg.dp; ++r) {
    const std::vector<int> gpus = layout.replica(r);
    key.insert(key.end(), gpus.begin(), gpus.end());
    key.push_back(-1);  // replicas' ends: the same GPUs in other replica sizes are another layout
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cluster_ != nullptr && cluster_ != &cluster) throw std::logic_error("CostClassMemo: used with a second cluster");
    cluster_ = &cluster;
    auto hit = by_layout_.find(key);
    if (hit != by_layout_.end()) return hit->second;
  }
  std::vector<int> cls = cost_classes(plan, cluster);  // outside the lock: the slow part
  std::lock_guard<std::mutex> lock(mu_);
  by_layout_.emplace(std::move(key), cls);
  return cls;
}

int alike_replicas(const Plan& plan, const Cluster& cluster, CostClassMemo* memo) {
  // (a router that reads loads sends each replica other requests than round-robin's share)
  if (plan.disaggregated() || plan.deg.dp <= 1 || Router::reads_load(plan.engine.dispatch)) return 1;
  const std::vector<int> cls = memo ? memo->classes(plan, cluster) : cost_classes(plan, cluster);
  if (std::all_of(cls.begin(), cls.end(), [](int c) { return c == 0; })) return plan.deg.dp;
  // Not one cost class: alike all the same when only rails inside a node differ — which needs a
  // replica inside one node (across nodes the relaxed test is the cost classes' own, already failed).
  const PlanLayout layout(plan);
  const std::vector<int> first = layout.replica(0);
  if (std::any_of(first.begin(), first.end(), [&](int g) { return cluster.node_of(g) != cluster.node_of(first[0]); })) return 1;
  for (int r = 1; r < plan.deg.dp; ++r)
    if (!same_costs(cluster, first, layout.replica(r), true)) return 1;
  return plan.deg.dp;
}

ServingResult serve(const Plan& plan, const ModelSpec& model, const Cluster& cluster, const RequestTrace& trace,
                    const RoutingSource* routing, const StepExecutor& executor, const ServingOptions& options) {
  if (plan.disaggregated()) {  // (which refuses ServingOptions::prefilled)
    auto pool = [&](const Plan& p, const RequestTrace& t, const ServingOptions& o) {
      return serve(p, model, cluster, t, routing, executor, o);
    };
    return serve_disaggregated(plan, model, cluster, trace, options, pool, analytic_transfer_timer(cluster));
  }
  if (options.replica_share && (plan.disaggregated() || options.concurrency > 0 || options.prefilled || !options.decode_slots.empty()))
    throw std::logic_error("serve: replica_share is for open-loop runs of a colocated plan");
  if (options.prefilled && options.decode_slots.empty()) return serve_prefilled(plan, model, cluster, trace, routing, executor, options);
  ServingResult out;
  out.memory = plan_memory(plan, model, cluster);
  out.requests.resize(trace.requests.size());
  const bool handed_over = !options.decode_slots.empty();
  for (std::size_t i = 0; i < trace.requests.size(); ++i) {
    auto& r = out.requests[i];
    r.id = static_cast<int>(i);
    r.arrival = (options.offline || options.concurrency > 0) && !handed_over ? 0.0 : trace.requests[i].arrival_s;
    r.prompt_tokens = std::max(1, trace.requests[i].prompt_tokens);
    r.admitted = r.first_token = -1;
    r.output_tokens = std::max(1, trace.requests[i].output_tokens);
  }
  const int simulated = options.replica_share ? 1 : plan.deg.dp;
  std::vector<ReplicaLoad> loads(static_cast<std::size_t>(simulated));
  ServingOptions opts = options;  // the replicas of one cost class share the run's step cache
  if (!opts.step_cache) opts.step_cache = std::make_shared<StepCache>();
  const std::vector<int> classes = options.shape_buckets_per_octave <= 0 ? std::vector<int>(static_cast<std::size_t>(plan.deg.dp), 0)
                                   : options.cost_classes       ? options.cost_classes->classes(plan, cluster)
                                                                : cost_classes(plan, cluster);
  const auto experts = expert_layout_for(plan, model, routing);  // once for every replica
  if (experts->balanced())
    out.experts = ExpertBalance{plan.redundant_experts, experts->imbalance_before(), experts->imbalance_after(),
                                experts->sample_tokens()};
  if (Router::reads_load(plan.engine.dispatch) && plan.deg.dp > 1 && !options.replica_share && options.concurrency <= 0 &&
      !handed_over) {
    // The router reads the replicas' loads: run them in lockstep, each advanced to the arrival
    // before the router decides where it goes.
    const std::size_t dp = static_cast<std::size_t>(plan.deg.dp);
    std::vector<Arrivals> arrivals;
    arrivals.reserve(dp);  // (the replicas keep pointers to them)
    for (std::size_t rep = 0; rep < dp; ++rep) arrivals.push_back(Arrivals::routed(out.requests));
    std::vector<std::unique_ptr<ReplicaSim>> sims;
    for (std::size_t rep = 0; rep < dp; ++rep) {
      sims.push_back(std::make_unique<ReplicaSim>(static_cast<int>(rep), classes[rep], plan, model, cluster, routing, executor,
                                                  opts, out.memory, experts, trace, out));
      sims.back()->start(arrivals[rep]);
    }
    std::vector<int> order(out.requests.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return out.requests[static_cast<std::size_t>(a)].arrival < out.requests[static_cast<std::size_t>(b)].arrival;
    });
    Router router(plan.engine.dispatch, plan.deg.dp, trace);
    std::vector<int> in_flight(dp, 0);
    for (int req : order) {
      const double t = out.requests[static_cast<std::size_t>(req)].arrival;
      for (std::size_t rep = 0; rep < dp; ++rep) {
        arrivals[rep].set_horizon(t);
        sims[rep]->advance(t, loads[rep]);
        in_flight[rep] = arrivals[rep].in_flight(t);
      }
      if (out.stopped_early) break;
      arrivals[static_cast<std::size_t>(router.route(req, in_flight))].feed(req);
    }
    for (std::size_t rep = 0; rep < dp; ++rep) {
      arrivals[rep].set_horizon(Arrivals::kNever);
      sims[rep]->advance(Arrivals::kNever, loads[rep]);
      sims[rep]->finish();
    }
  } else {
    for (int rep = 0; rep < simulated; ++rep) {
      ReplicaSim sim(rep, classes[static_cast<std::size_t>(rep)], plan, model, cluster, routing, executor, opts, out.memory,
                     experts, trace, out);
      Arrivals arrivals = replica_arrivals(out.requests, plan.deg.dp, rep, opts);
      sim.run(arrivals, loads[static_cast<std::size_t>(rep)]);
      if (out.stopped_early) break;  // the goal is missed: the other replicas cannot mend it
    }
  }
  for (const auto& r : out.requests)
    if (r.completed) out.makespan = std::max(out.makespan, r.finish);
  out.steady = steady_window(loads, out.emissions);
  return out;
}

}  // namespace shardsim
