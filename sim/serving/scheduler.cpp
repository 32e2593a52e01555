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

// The group with the fewest sequences among those with a free slot and room for `need`; a
// swapped-out or handed-over sequence only in its own group (its KV is there).
int Scheduler::place(const Seq& s, long need, const ReplicaQueues& q) const {
  int best = -1;
  for (int g = 0; g < static_cast<int>(q.kv_used.size()); ++g) {
    if (q.seqs_in_group[static_cast<std::size_t>(g)] >= q.group_seqs) continue;
    if (q.kv_used[static_cast<std::size_t>(g)] + need > q.kv_capacity) continue;
    if ((s.swapped || s.pinned) && g != s.group) continue;
    if (best < 0 || q.seqs_in_group[static_cast<std::size_t>(g)] < q.seqs_in_group[static_cast<std::size_t>(best)]) best = g;
  }
  return best;
}

// The running sequences stay in admission order (appended when admitted, removed stably), so
// the latest admitted of group g is the last of its group still running.
Seq& Scheduler::victim(int g, std::vector<Seq>& running) const {
  for (auto s = running.rbegin(); s != running.rend(); ++s)
    if (s->req >= 0 && s->group == g) return *s;
  throw std::logic_error("serving: no running sequence in attention group " + std::to_string(g));
}

void Scheduler::take(int e, std::vector<Seq>& running, ReplicaBatch& batch, StepWork& work, bool decode, bool prefill) const {
  int budget = eng_.max_batch_tokens;
  if (decode)
    for (auto& s : running) {
      if (s.engine != e || s.prefilling()) continue;
      if (budget <= 0) break;
      batch.groups[static_cast<std::size_t>(s.group)].push_back(
          SeqWork{static_cast<std::uint32_t>(s.req), static_cast<std::uint32_t>(s.ctx), 1, static_cast<int>(s.ctx), true});
      work.emplace_back(&s, 1);
      --budget;
    }
  if (prefill)
    for (auto& s : running) {  // in admission order
      if (s.engine != e || !s.prefilling() || budget <= 0) continue;
      int remaining = s.prompt - s.prefilled;
      int chunk = remaining;
      if (eng_.prefill_chunk > 0) chunk = std::min({remaining, eng_.prefill_chunk, budget});
      else if (chunk > budget && !work.empty()) continue;  // whole prompts only: wait for a step with room
      batch.groups[static_cast<std::size_t>(s.group)].push_back(
          SeqWork{static_cast<std::uint32_t>(s.req), static_cast<std::uint32_t>(s.prefilled), chunk, s.prefilled,
                  s.prefilled + chunk == s.prompt});
      work.emplace_back(&s, chunk);
      budget -= chunk;
    }
}

namespace {

// vLLM V1 and TensorRT-LLM's in-flight batching: decode first, then prompt work, in one step.
class MixedScheduler : public Scheduler {
 public:
  using Scheduler::Scheduler;
  void compose(int e, std::vector<Seq>& running, ReplicaBatch& batch, StepWork& work) const override {
    take(e, running, batch, work, true, true);
  }
};

}  // namespace

std::unique_ptr<Scheduler> make_scheduler(const EngineSettings& e) { return std::make_unique<MixedScheduler>(e); }

}  // namespace shardsim
