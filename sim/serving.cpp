// sim/serving.cpp — continuous batching per replica, pipeline virtual engines, request metrics.
#include "sim/serving.hpp"

#include <algorithm>
#include <deque>
#include <cmath>
#include <limits>
#include <map>

#include "sim/lowering.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

namespace {

struct Seq {
  int req = 0;           // index into the trace / results
  int group = 0;         // attention-DP group
  int engine = 0;        // pipeline virtual engine
  int prompt = 0, output = 0;
  int prefilled = 0;     // prompt tokens already processed
  int generated = 0;     // output tokens produced
  long reserved = 0;     // KV tokens reserved
};

void accumulate(ServingBreakdown& b, const StepTiming& t) {
  b.step_time += t.makespan;
  for (int i = 0; i < kNumOpClasses; ++i) {
    b.critical[static_cast<std::size_t>(i)] += t.critical[static_cast<std::size_t>(i)];
    b.busy[static_cast<std::size_t>(i)] += t.busy[static_cast<std::size_t>(i)];
  }
  for (std::size_t i = 0; i < 4; ++i) b.coll_by_kind[i] += t.coll_by_kind[i];
  b.comm_busy += t.comm_busy;
  b.comm_exposed += t.comm_exposed;
  b.expert_time += t.expert_time;
  b.expert_imbalance += t.expert_imbalance;
  b.steps += 1;
}

class ReplicaSim {
 public:
  ReplicaSim(int replica, const Plan& plan, const ModelSpec& model, const Cluster& cluster, const RoutingSource* routing,
             const StepExecutor& ex, const ServingOptions& opt, double kv_capacity, ServingResult& out)
      : replica_(replica), plan_(plan), lowering_(plan, model, cluster, routing, replica), ex_(ex), opt_(opt),
        kv_capacity_(kv_capacity), out_(out), groups_(plan.deg.attn_dp), engines_(plan.deg.pp),
        kv_used_(static_cast<std::size_t>(plan.deg.attn_dp), 0), seqs_in_group_(static_cast<std::size_t>(plan.deg.attn_dp), 0),
        seqs_in_engine_(static_cast<std::size_t>(plan.deg.pp), 0), ready_(static_cast<std::size_t>(plan.deg.pp), 0.0),
        stage_free_(static_cast<std::size_t>(plan.deg.pp), 0.0), stage_busy_(static_cast<std::size_t>(plan.deg.pp), 0.0),
        stage_first_(static_cast<std::size_t>(plan.deg.pp), -1.0) {}

  void run(const std::vector<int>& reqs) {
    std::size_t next = 0;
    std::deque<int> waiting;
    long steps = 0;
    while (true) {
      // The engine that is ready first; among equals, one with sequences, then the lowest index.
      int e = 0;
      for (int k = 1; k < engines_; ++k) {
        auto key = [&](int i) {
          return std::make_pair(ready_[static_cast<std::size_t>(i)], seqs_in_engine_[static_cast<std::size_t>(i)] > 0 ? 0 : 1);
        };
        if (key(k) < key(e)) e = k;
      }
      double t = ready_[static_cast<std::size_t>(e)];
      if (t == kNever) break;
      while (next < reqs.size() && out_.requests[static_cast<std::size_t>(reqs[next])].arrival <= t) waiting.push_back(reqs[next++]);
      admit(waiting, t);
      ReplicaBatch batch;
      std::vector<std::pair<Seq*, int>> work;  // sequence, tokens this step
      build_batch(e, batch, work);
      if (work.empty()) {
        // Engine e has no sequences: sleep until the next arrival or until a busy engine finishes
        // a step (which may free KV room for a waiting request).
        double wake = next < reqs.size() ? out_.requests[static_cast<std::size_t>(reqs[next])].arrival : kNever;
        for (int k = 0; k < engines_; ++k)
          if (k != e && seqs_in_engine_[static_cast<std::size_t>(k)] > 0) wake = std::min(wake, ready_[static_cast<std::size_t>(k)]);
        if (wake == kNever && !waiting.empty()) {  // nothing runs and the head still cannot start
          reject(waiting);
          wake = t;
        }
        ready_[static_cast<std::size_t>(e)] = wake == kNever ? kNever : std::max(t, wake);
        continue;
      }
      if (++steps > opt_.max_steps) break;
      bool record = replica_ == 0 && out_.breakdown.steps < opt_.timeline_steps;
      std::vector<TimelineEvent> events;
      StepTiming timing;
      auto key = shape_key(batch);
      StepCache& cache = opt_.step_cache ? *opt_.step_cache : cache_;
      if (!key.empty()) key.push_back(replica_);
      auto hit = key.empty() || record ? cache.end() : cache.find(key);
      if (hit != cache.end()) {
        timing = hit->second;
      } else {
        lowering_.lower(batch, program_);
        timing = ex_.run(program_, record ? &events : nullptr);
        out_.breakdown.executed_steps++;
        if (opt_.on_executed_step) opt_.on_executed_step(replica_, batch, timing);
        if (!key.empty()) cache.emplace(std::move(key), timing);
      }
      if (opt_.transform_timing) {
        StepTiming tt = opt_.transform_timing(timing);
        double r = timing.makespan > 0 ? tt.makespan / timing.makespan : 1.0;
        for (auto& ev : events) {
          ev.start *= r;
          ev.duration *= r;
        }
        timing = std::move(tt);
      }
      accumulate(out_.breakdown, timing);
      // Through the pipeline: stage s starts when the previous stage is done and stage s is free.
      double clock = t;
      double step_start = t;
      for (int s = 0; s < engines_; ++s) {
        double st = timing.stage_time.size() > static_cast<std::size_t>(s) ? timing.stage_time[static_cast<std::size_t>(s)]
                                                                             : (s == 0 ? timing.makespan : 0);
        double begin = std::max(clock, stage_free_[static_cast<std::size_t>(s)]);
        if (s == 0) step_start = begin;
        if (stage_first_[static_cast<std::size_t>(s)] < 0) stage_first_[static_cast<std::size_t>(s)] = begin;
        clock = begin + st;
        stage_free_[static_cast<std::size_t>(s)] = clock;
        stage_busy_[static_cast<std::size_t>(s)] += st;
      }
      if (engines_ == 1) clock = std::max(clock, t + timing.makespan);
      if (record) {
        for (auto& ev : events) ev.start += step_start;
        out_.timeline.insert(out_.timeline.end(), events.begin(), events.end());
      }
      finish_step(work, clock);
      ready_[static_cast<std::size_t>(e)] = clock;
    }
    for (int s = 0; s < engines_; ++s) {
      if (stage_first_[static_cast<std::size_t>(s)] < 0) continue;
      double span = stage_free_[static_cast<std::size_t>(s)] - stage_first_[static_cast<std::size_t>(s)];
      out_.breakdown.pipeline_span += span;
      out_.breakdown.pipeline_bubble += std::max(0.0, span - stage_busy_[static_cast<std::size_t>(s)]);
    }
  }

 private:
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // Bucketed shape of a step (see ServingOptions::shape_buckets_per_octave); empty = no memoising.
  std::vector<int> shape_key(const ReplicaBatch& batch) const {
    const int b = opt_.shape_buckets_per_octave;
    if (b <= 0) return {};
    auto q = [b](double x) {
      return x <= 2.0 * b ? static_cast<int>(x) : static_cast<int>(2 * b + std::lround(b * std::log2(x / (2.0 * b))));
    };
    double sums[3] = {0, 0, 0}, maxs[3] = {0, 0, 0};
    int emits = 0;
    for (const auto& g : batch.groups) {
      double v[3] = {0, 0, 0};
      for (const auto& s : g) {
        (s.new_tokens == 1 && s.context > 0 ? v[0] : v[1]) += s.new_tokens;
        v[2] += s.context;
        emits += s.emits;
      }
      for (int i = 0; i < 3; ++i) {
        sums[i] += v[i];
        maxs[i] = std::max(maxs[i], v[i]);
      }
    }
    return {q(sums[0]), q(sums[1]), q(sums[2]), q(maxs[0]), q(maxs[1]), q(maxs[2]), q(emits)};
  }

  void reject(std::deque<int>& waiting) {
    out_.rejected_any = true;
    out_.note = "some requests need more KV cache than one attention group holds; they were not served";
    waiting.pop_front();
  }

  void admit(std::deque<int>& waiting, double t) {
    while (!waiting.empty()) {
      auto& r = out_.requests[static_cast<std::size_t>(waiting.front())];
      long need = static_cast<long>(r.prompt_tokens) + r.output_tokens;
      if (need > kv_capacity_) {  // can never fit
        reject(waiting);
        continue;
      }
      int best = -1;
      for (int g = 0; g < groups_; ++g) {
        if (seqs_in_group_[static_cast<std::size_t>(g)] >= plan_.batch.max_seqs) continue;
        if (kv_used_[static_cast<std::size_t>(g)] + need > kv_capacity_) continue;
        if (best < 0 || seqs_in_group_[static_cast<std::size_t>(g)] < seqs_in_group_[static_cast<std::size_t>(best)]) best = g;
      }
      if (best < 0) return;  // FCFS: the head waits for room
      int engine = static_cast<int>(std::min_element(seqs_in_engine_.begin(), seqs_in_engine_.end()) - seqs_in_engine_.begin());
      Seq s;
      s.req = waiting.front();
      s.group = best;
      s.engine = engine;
      s.prompt = r.prompt_tokens;
      s.output = r.output_tokens;
      s.reserved = need;
      r.admitted = t;
      r.replica = replica_;
      r.group = best;
      kv_used_[static_cast<std::size_t>(best)] += need;
      seqs_in_group_[static_cast<std::size_t>(best)]++;
      out_.breakdown.peak_seqs = std::max(out_.breakdown.peak_seqs, seqs_in_group_[static_cast<std::size_t>(best)]);
      seqs_in_engine_[static_cast<std::size_t>(engine)]++;
      if (ready_[static_cast<std::size_t>(engine)] == kNever || ready_[static_cast<std::size_t>(engine)] < t)
        ready_[static_cast<std::size_t>(engine)] = t;
      running_.push_back(s);
      waiting.pop_front();
    }
  }

  void build_batch(int e, ReplicaBatch& batch, std::vector<std::pair<Seq*, int>>& work) {
    batch.groups.assign(static_cast<std::size_t>(groups_), {});
    int budget = plan_.batch.max_batch_tokens;
    for (auto& s : running_) {  // decode first
      if (s.engine != e || s.prefilled < s.prompt) continue;
      if (budget <= 0) break;
      batch.groups[static_cast<std::size_t>(s.group)].push_back(
          SeqWork{static_cast<std::uint32_t>(s.req), static_cast<std::uint32_t>(s.prompt + s.generated - 1), 1,
                  s.prompt + s.generated - 1, true});
      work.emplace_back(&s, 1);
      --budget;
    }
    for (auto& s : running_) {  // then prefill, in admission order
      if (s.engine != e || s.prefilled >= s.prompt || budget <= 0) continue;
      int remaining = s.prompt - s.prefilled;
      int chunk = remaining;
      if (plan_.batch.prefill_chunk > 0) chunk = std::min({remaining, plan_.batch.prefill_chunk, budget});
      else if (chunk > budget && !work.empty()) continue;  // whole prompts only: wait for a step with room
      batch.groups[static_cast<std::size_t>(s.group)].push_back(
          SeqWork{static_cast<std::uint32_t>(s.req), static_cast<std::uint32_t>(s.prefilled), chunk, s.prefilled,
                  s.prefilled + chunk == s.prompt});
      work.emplace_back(&s, chunk);
      budget -= chunk;
    }
  }

  void finish_step(const std::vector<std::pair<Seq*, int>>& work, double end) {
    for (auto [s, n] : work) {
      auto& r = out_.requests[static_cast<std::size_t>(s->req)];
      if (s->prefilled < s->prompt) {
        s->prefilled += n;
        out_.breakdown.prefill_tokens += n;
        if (s->prefilled < s->prompt) continue;
      } else {
        out_.breakdown.decode_tokens += 1;
      }
      s->generated += 1;
      if (s->generated == 1) r.first_token = end;
      if (s->generated >= s->output) {
        r.finish = end;
        r.completed = true;
        kv_used_[static_cast<std::size_t>(s->group)] -= s->reserved;
        seqs_in_group_[static_cast<std::size_t>(s->group)]--;
        seqs_in_engine_[static_cast<std::size_t>(s->engine)]--;
        s->req = -1;
      }
    }
    running_.erase(std::remove_if(running_.begin(), running_.end(), [](const Seq& s) { return s.req < 0; }), running_.end());
  }

  int replica_;
  const Plan& plan_;
  Lowering lowering_;
  const StepExecutor& ex_;
  const ServingOptions& opt_;
  double kv_capacity_;
  ServingResult& out_;
  int groups_, engines_;
  std::vector<long> kv_used_;
  std::vector<int> seqs_in_group_, seqs_in_engine_;
  std::vector<double> ready_, stage_free_, stage_busy_, stage_first_;
  std::deque<Seq> running_;
  StepProgram program_;  // reused step after step
  StepCache cache_;  // memoised step timings by bucketed shape, when no shared cache is given
};

}  // namespace

ServingResult serve(const Plan& plan, const ModelSpec& model, const Cluster& cluster, const RequestTrace& trace,
                    const RoutingSource* routing, const StepExecutor& executor, const ServingOptions& options) {
  ServingResult out;
  out.memory = plan_memory(plan, model, cluster);
  out.requests.resize(trace.requests.size());
  for (std::size_t i = 0; i < trace.requests.size(); ++i) {
    auto& r = out.requests[i];
    r.id = static_cast<int>(i);
    r.arrival = options.offline ? 0.0 : trace.requests[i].arrival_s;
    r.prompt_tokens = std::max(1, trace.requests[i].prompt_tokens);
    r.output_tokens = std::max(1, trace.requests[i].output_tokens);
  }
  // Requests go round-robin to replicas in arrival order (replicas never talk to each other).
  std::vector<std::vector<int>> per_replica(static_cast<std::size_t>(plan.deg.dp));
  for (std::size_t i = 0; i < out.requests.size(); ++i) per_replica[i % per_replica.size()].push_back(static_cast<int>(i));
  for (int rep = 0; rep < plan.deg.dp; ++rep) {
    ReplicaSim sim(rep, plan, model, cluster, routing, executor, options, out.memory.kv_capacity_tokens, out);
    sim.run(per_replica[static_cast<std::size_t>(rep)]);
  }
  for (const auto& r : out.requests)
    if (r.completed) out.makespan = std::max(out.makespan, r.finish);
  return out;
}

}  // namespace shardsim
