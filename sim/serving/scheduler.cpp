// sim/serving/scheduler.cpp — the engines' schedulers (rules and sources: docs/engines.md).
#include "sim/serving/scheduler.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sim/step/lowering.hpp"

namespace shardsim {

long Scheduler::blocks(long tokens) const {
  long b = std::max(1, eng_.kv_block);
  return (tokens + b - 1) / b * b;
}

long Scheduler::admission_kv(const Seq& s) const {
  switch (eng_.policy) {
    case KvPolicy::ReserveExact: return static_cast<long>(s.prompt) + s.output - s.generated;
    case KvPolicy::Reserve: {
      long out = eng_.max_output > 0 ? eng_.max_output : static_cast<long>(eng_.max_context) - s.prompt;
      return std::min<long>(eng_.max_context, static_cast<long>(s.prompt) + std::max<long>(out, 1));
    }
    case KvPolicy::OnDemand: return blocks(s.swapped ? s.ctx + 1 : s.prompt + 1);
  }
  return s.prompt;
}

long Scheduler::lifetime_kv(const Seq& s) const {
  if (eng_.policy == KvPolicy::OnDemand) return blocks(static_cast<long>(s.prompt) + s.output);
  return admission_kv(s);
}

// A swapped-out or handed-over sequence only in its own group (its KV is there); one in a rank's
// own queue only in that rank.
bool Scheduler::fits(const Seq& s, int g, long need, const ReplicaQueues& q) {
  const auto k = static_cast<std::size_t>(g);
  if (q.seqs_in_group[k] >= q.group_seqs || q.kv_used[k] + need > q.kv_capacity) return false;
  if ((s.swapped || s.pinned) && g != s.group) return false;
  return s.queue < 0 || g == s.queue;
}

// The group with the fewest sequences.
int Scheduler::place(const Seq& s, long need, const ReplicaQueues& q) const {
  return least(s, need, q, [](int) { return true; }, [&q](int g) { return q.seqs_in_group[static_cast<std::size_t>(g)]; });
}

void Scheduler::add_decode(Seq& s, ReplicaBatch& batch, StepWork& work) const {
  batch.groups[static_cast<std::size_t>(s.group)].push_back(SeqWork{static_cast<std::uint32_t>(s.req), static_cast<std::uint32_t>(s.ctx),
                                                                    1 + eng_.spec_tokens, static_cast<int>(s.ctx), true, eng_.spec_tokens});
  work.emplace_back(&s, 1);
}

void Scheduler::add_chunk(Seq& s, int chunk, ReplicaBatch& batch, StepWork& work) {
  batch.groups[static_cast<std::size_t>(s.group)].push_back(
      SeqWork{static_cast<std::uint32_t>(s.req), static_cast<std::uint32_t>(s.prefilled), chunk, s.prefilled, s.prefilled + chunk == s.prompt, 0});
  work.emplace_back(&s, chunk);
}

// The latest admitted of group g still running (Seq::order counts admissions).
Seq& Scheduler::victim(int g, std::vector<Seq>& running) const {
  Seq* v = nullptr;
  for (auto& s : running)
    if (s.req >= 0 && s.group == g && (v == nullptr || s.order > v->order)) v = &s;
  if (v == nullptr) throw std::logic_error("serving: no running sequence in attention group " + std::to_string(g));
  return *v;
}

void Scheduler::take(std::span<Seq> running, ReplicaBatch& batch, StepWork& work, bool decode, bool prefill,
                     bool block_chunks) const {
  // Each rank's own token budget (limits=rank: each rank's scheduler fills its own, docs/engines.md
  // "Limits per attention-DP rank"), or one the engine's ranks share (slot 0); `open`: the rank
  // (or the engine) still takes prompt work this step.
  const int slots = eng_.rank_limits ? groups_ : 1;
  const int per = eng_.max_batch_tokens;
  budget_.assign(static_cast<std::size_t>(slots), per);
  open_.assign(static_cast<std::size_t>(slots), 1);
  auto slot = [&](const Seq& s) { return eng_.rank_limits ? static_cast<std::size_t>(s.group) : std::size_t{0}; };
  if (decode)
    for (auto& s : running) {
      if (s.prefilling()) continue;
      int& budget = budget_[slot(s)];
      if (budget <= 0) continue;
      add_decode(s, batch, work);
      budget -= 1 + eng_.spec_tokens;
    }
  if (prefill)
    for (auto& s : running) {  // in admission order
      const std::size_t g = slot(s);
      int& budget = budget_[g];
      if (!s.prefilling() || budget <= 0 || !open_[g]) continue;
      int remaining = s.prompt - s.prefilled;
      int chunk = remaining;
      if (eng_.prefill_chunk > 0) {
        chunk = std::min({remaining, eng_.prefill_chunk, budget});
        if (block_chunks && chunk < remaining) chunk -= chunk % std::max(1, eng_.kv_block);  // whole blocks when cut
        if (chunk <= 0) {
          open_[g] = 0;
          continue;
        }
      } else if (chunk > budget && budget < per) {
        open_[g] = 0;  // whole prompts only: the first that does not fit ends the rank's prompts (head of line)
        continue;      // (the first work of a rank's step, or of the engine's, always runs)
      }
      add_chunk(s, chunk, batch, work);
      budget -= chunk;
    }
}

namespace {

// vLLM V1 (docs/engines.md, "vLLM"): running requests first — decode, then the prompt chunks of
// those admitted — within one token budget.
class VllmScheduler : public Scheduler {
 public:
  using Scheduler::Scheduler;
  // The running requests get their blocks first; the waiting queue only in a step that preempted
  // nobody (`if not preempted_reqs`, docs/engines.md).
  bool running_first() const override { return true; }
  void compose(std::span<Seq> running, ReplicaBatch& batch, StepWork& work) const override {
    take(running, batch, work, true, true, false);
  }
};

// TensorRT-LLM in-flight batching (docs/engines.md, "TensorRT-LLM"): the capacity scheduler puts
// generation requests first, then contexts in arrival order; the micro-batch scheduler fills
// max_num_tokens in that order — a whole context that does not fit ends the scan; with chunked
// context, a context cut short is cut to whole KV blocks (the chunk unit). With attention-DP, a
// new request goes to the rank with the fewest active prompt tokens.
class TrtllmScheduler : public Scheduler {
 public:
  using Scheduler::Scheduler;
  int place(const Seq& s, long need, const ReplicaQueues& q) const override {
    if (q.kv_used.size() <= 1) return Scheduler::place(s, need, q);  // one rank: no tokens to count
    std::vector<double> tokens(q.kv_used.size(), 0.0);
    for (const auto& r : q.running)
      if (r.req >= 0) tokens[static_cast<std::size_t>(r.group)] += r.prompt;
    return least(s, need, q, [](int) { return true; }, [&tokens](int g) { return tokens[static_cast<std::size_t>(g)]; });
  }
  void compose(std::span<Seq> running, ReplicaBatch& batch, StepWork& work) const override {
    take(running, batch, work, true, true, true);
  }
};

// SGLang (docs/engines.md, "SGLang"). Each attention-DP rank runs its own scheduler: a rank with
// prompt work runs a prefill (extend) batch of up to its chunk budget and no decode; the others
// decode all their running requests, in the same step. A request starts only if its prompt and
// its clipped max_new_tokens fit beside the running requests' clipped remaining outputs scaled by
// new_token_ratio — the benchmark clients send max_new_tokens = the request's output length — and
// only into a rank whose pending prompt tokens leave room in this step's chunk.
class SglangScheduler : public Scheduler {
 public:
  SglangScheduler(const EngineSettings& e, int groups)
      : Scheduler(e, groups), round_(static_cast<std::size_t>(groups_), 0.0) {
    // init 0.7 × schedule_conservativeness (× 0.3 under DP attention), floor init × 0.14,
    // reached in 600 decode steps.
    init_ = 0.7 * (groups_ > 1 ? 0.3 : 1.0);
    min_ = init_ * 0.14;
    decay_ = (init_ - min_) / 600;
    ratio_ = init_;
    // The engine's token budget shared by its ranks, each rank's chunk at most prefill_chunk
    // (SGLang divides chunked_prefill_size by the DP size; a validated run states its per-GPU batch).
    const int share = e.rank_limits ? e.max_batch_tokens : e.max_batch_tokens / groups_;
    chunk_ = std::max(1, e.prefill_chunk > 0 ? std::min(e.prefill_chunk, share) : share);
  }

  static constexpr long kClip = 4096;  // SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
  static long clipped_left(const Seq& s) { return std::min<long>(std::max(0, s.output - s.generated), kClip); }

  int place(const Seq& s, long need, const ReplicaQueues& q) const override {
    std::vector<double> reserve(static_cast<std::size_t>(groups_), 0.0), pending(static_cast<std::size_t>(groups_), 0.0);
    for (const auto& r : q.running) {
      if (r.req < 0) continue;
      reserve[static_cast<std::size_t>(r.group)] += ratio_ * static_cast<double>(clipped_left(r));
      pending[static_cast<std::size_t>(r.group)] += r.prompt - r.prefilled;
    }
    const double wants = static_cast<double>(s.prompt - s.prefilled) + static_cast<double>(clipped_left(s)) + std::max(1, eng_.kv_block);
    auto ok = [&](int g) {
      const auto k = static_cast<std::size_t>(g);
      return pending[k] < chunk_  // this step's prefill batch has room
             && wants < q.kv_capacity - static_cast<double>(q.kv_used[k]) - reserve[k] - round_[k];
    };
    return least(s, need, q, ok, [&q](int g) { return q.seqs_in_group[static_cast<std::size_t>(g)]; });
  }
  bool blocked_until_free() const override { return false; }  // the reserve shrinks as requests decode
  // The DP controller sends requests to the ranks round robin (load_balance_method "auto").
  int queue_of(long n) const override { return groups_ > 1 ? static_cast<int>(n % groups_) : -1; }

  // Retraction: the fewest output tokens first, then the longest prompt.
  Seq& victim(int g, std::vector<Seq>& running) const override {
    Seq* v = nullptr;
    for (auto& s : running) {
      if (s.req < 0 || s.group != g) continue;
      if (v == nullptr || s.generated < v->generated ||
          (s.generated == v->generated && (s.prompt - s.generated > v->prompt - v->generated ||
                                           (s.prompt - s.generated == v->prompt - v->generated && s.order < v->order))))
        v = &s;
    }
    if (v == nullptr) return Scheduler::victim(g, running);  // (throws)
    return *v;
  }
  bool requeue_at_head() const override { return false; }  // retracted requests rejoin the queue's tail

  void compose(std::span<Seq> running, ReplicaBatch& batch, StepWork& work) const override {
    std::vector<char> prefill(static_cast<std::size_t>(groups_), 0);
    for (const auto& s : running)
      if (s.prefilling()) prefill[static_cast<std::size_t>(s.group)] = 1;
    for (auto& s : running) {  // the decoding ranks: every running request, one token each
      if (s.prefilling() || prefill[static_cast<std::size_t>(s.group)]) continue;
      add_decode(s, batch, work);
    }
    std::vector<int> budget(static_cast<std::size_t>(groups_), chunk_);
    for (auto& s : running) {  // the prefilling ranks: prompt work in admission order, within the chunk
      if (!s.prefilling()) continue;
      const auto k = static_cast<std::size_t>(s.group);
      if (budget[k] <= 0) continue;
      const int remaining = s.prompt - s.prefilled;
      int chunk = remaining;
      if (eng_.prefill_chunk > 0) chunk = std::min(remaining, budget[k]);
      else if (chunk > budget[k] && !batch.groups[k].empty()) continue;  // unchunked: the first prompt always runs
      add_chunk(s, chunk, batch, work);
      budget[k] -= chunk;
    }
  }

  void begin_admission() override { std::fill(round_.begin(), round_.end(), 0.0); }
  // A request admitted in this round reserves its whole clipped output until it runs.
  void admitted(const Seq& s) override { round_[static_cast<std::size_t>(s.group)] += (1 - ratio_) * static_cast<double>(clipped_left(s)); }
  void after_step(bool decoded) override {
    if (decoded) ratio_ = std::max(ratio_ - decay_, min_);
  }
  void after_preemption(const std::vector<Seq>& running) override {
    double out = 0, want = 0;
    long n = 0;
    for (const auto& s : running) {
      if (s.req < 0) continue;
      out += s.generated;
      want += s.output;
      ++n;
    }
    ratio_ = std::min(1.0, (out + 20.0 * static_cast<double>(n)) / (want + 1));
  }
  void on_idle() override { ratio_ = init_; }

 private:
  double init_ = 0, min_ = 0, decay_ = 0, ratio_ = 0;
  int chunk_ = 1;                 // prompt tokens per rank per step
  std::vector<double> round_;     // per group: the admitted-this-round requests' reserve beyond the ratio's
};

}  // namespace

std::unique_ptr<Scheduler> make_scheduler(const EngineSettings& e, int groups) {
  switch (e.scheduler) {
    case SchedulerKind::Sglang: return std::make_unique<SglangScheduler>(e, groups);
    case SchedulerKind::Trtllm: return std::make_unique<TrtllmScheduler>(e, groups);
    case SchedulerKind::Vllm: break;
  }
  return std::make_unique<VllmScheduler>(e, groups);
}

}  // namespace shardsim
