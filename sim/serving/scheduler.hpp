// sim/serving/scheduler.hpp — an engine's iteration-level scheduler: which waiting request starts
// and where, what KV it holds, which running sequences a step carries and how much of each prompt,
// and whom to evict when KV runs out.
//
// Owns: Seq (a waiting or running sequence), ReplicaQueues (the loop's view of one replica's
// sequences and KV accounting), Scheduler (the one interface the serving loop calls) and one
// scheduler per engine family, made by make_scheduler(EngineSettings::scheduler):
//   vllm     vLLM V1: one token budget per step, running sequences first (decode), then prompt
//            chunks in admission order; prompts admitted on their own blocks only.
//   trtllm   TensorRT-LLM in-flight batching: generation requests first, then context requests;
//            without chunked context a prompt runs whole or waits for a step with room.
//   sglang   SGLang: prefill first — a step with prompt work carries only prompt work and decode
//            waits for it (enable_mixed_chunk off); admission also keeps room for the running
//            requests' future tokens, scaled by new_token_ratio, which decays step by step and
//            resets after a preemption.
// The rules and the source lines they come from: docs/engines.md. The serving loop
// (serving.cpp) keeps the bookkeeping and the clock; the step pricer (step_costs.hpp) prices what
// compose() returns. Thread-safety: one scheduler per replica run.
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "sim/plan/engine.hpp"

namespace shardsim {

struct ReplicaBatch;

struct Seq {
  int req = 0;           // index into the trace / results; −1 once finished or preempted
  int group = -1;        // attention-DP group
  int engine = 0;        // pipeline virtual engine
  int prompt = 0;        // tokens to prefill before decoding (after a recompute: prompt + generated)
  int output = 0;        // tokens to generate in all
  int prefilled = 0;     // of `prompt`, processed
  int generated = 0;     // output tokens produced
  long ctx = 0;          // tokens in the KV cache
  long kv = 0;           // KV tokens reserved or allocated
  long order = 0;        // admission order (the latest is preempted first)
  bool swapped = false;  // preempted by swap: its KV waits in host memory
  bool pinned = false;   // its KV was sent to `group` by a prefill pool: admitted there only
  int queue = -1;        // the attention-DP rank whose own queue it waits in (−1: the replica's one queue)
  long kv_unarmed = 0;   // while its engine fast-forwards: `kv` before the run's pre-allocation
  int held = 0;          // leading prefix blocks of its prompt it references in its group's prefix cache
  bool prefilling() const { return prefilled < prompt; }
};

// One replica's sequences as the serving loop keeps them (read by the scheduler's decisions).
struct ReplicaQueues {
  const std::deque<Seq>& waiting;        // FCFS; preempted sequences at the head
  const std::vector<Seq>& running;       // by pipeline engine, each engine's in admission order (Seq::order)
  const std::vector<long>& kv_used;      // per attention group, tokens
  const std::vector<int>& seqs_in_group;
  double kv_capacity = 0;                // per attention group, tokens
  int group_seqs = 0;                    // sequences one attention group may run
};

// A step's work: a running sequence and the tokens it processes (1 when decoding).
using StepWork = std::vector<std::pair<Seq*, int>>;

class Scheduler {
 public:
  Scheduler(const EngineSettings& e, int groups) : eng_(e), groups_(std::max(1, groups)) {}
  virtual ~Scheduler() = default;

  // KV tokens a sequence must hold when it is admitted (the engine's KV policy).
  long admission_kv(const Seq& s) const;
  // The most KV it can ever need: refused outright when that exceeds a group's capacity.
  long lifetime_kv(const Seq& s) const;
  // Tokens rounded up to whole KV blocks.
  long blocks(long tokens) const;

  // The attention group the waiting head `s`, needing `need` KV tokens, starts in; −1: it waits.
  virtual int place(const Seq& s, long need, const ReplicaQueues& q) const;
  // Which attention-DP rank's own queue the `n`-th arriving request joins; −1: the replica keeps
  // one queue for all its ranks.
  virtual int queue_of(long /*n*/) const { return -1; }
  // Whether a head found blocked stays blocked until some KV or slot is freed (the loop then skips
  // admission until one is). False when admission also depends on the running sequences' progress.
  virtual bool blocked_until_free() const { return true; }
  // The running sequence of group g to evict when a step needs a block none is free for
  // (`running`: all of the replica's; ties go to the earlier admitted).
  virtual Seq& victim(int g, std::vector<Seq>& running) const;
  // The sequences a pipeline engine's next step carries, group by group, and their tokens
  // (`running`: that engine's, in admission order).
  virtual void compose(std::span<Seq> running, ReplicaBatch& batch, StepWork& work) const = 0;
  // Admission: begin_admission() before the loop offers the waiting head(s) to place(),
  // admitted() after each one starts.
  virtual void begin_admission() {}
  virtual void admitted(const Seq& /*s*/) {}
  // Where a preempted sequence waits again: at the head of the queue (true) or at its tail.
  virtual bool requeue_at_head() const { return true; }
  // Whether a step serves its running sequences' KV growth (and preempts) before it admits, and
  // admits nobody when it preempted (vLLM); false: admission first, then growth.
  virtual bool running_first() const { return false; }
  // After each step the loop ran or fast-forwarded (`decoded`: it carried decode tokens), after
  // the preemptions of a step (`running`: the sequences still running), and when the replica has
  // nothing running.
  virtual void after_step(bool /*decoded*/) {}
  virtual void after_preemption(const std::vector<Seq>& /*running*/) {}
  virtual void on_idle() {}

 protected:
  // Decode tokens first, then prompt work in admission order, each attention-DP rank within its
  // own token budget (tokens_per_group): chunks of prefill_chunk (`block_chunks`: a chunk cut
  // short is cut to whole KV blocks), or whole prompts when it is 0, where the first prompt that
  // does not fit ends the rank's prompts (the first work of a rank's step always runs);
  // `decode`/`prefill` select the kinds taken.
  void take(std::span<Seq> running, ReplicaBatch& batch, StepWork& work, bool decode, bool prefill,
            bool block_chunks) const;
  // Whether group g can take `s` now: a free slot, room for `need`, and its own group when its KV
  // or its queue is there.
  static bool fits(const Seq& s, int g, long need, const ReplicaQueues& q);
  // Of the groups that fit `s` and pass `ok(g)`, the one with the smallest `key(g)` (the lowest
  // index among equals); −1 when none does.
  template <class Ok, class Key>
  static int least(const Seq& s, long need, const ReplicaQueues& q, Ok ok, Key key) {
    int best = -1;
    for (int g = 0; g < static_cast<int>(q.kv_used.size()); ++g)
      if (fits(s, g, need, q) && ok(g) && (best < 0 || key(g) < key(best))) best = g;
    return best;
  }
  // Adds `s` to its group's list in `batch` and to `work`: one decode token (and the engine's
  // speculative drafts to verify, EngineSettings::spec_tokens), or `chunk` prompt tokens.
  void add_decode(Seq& s, ReplicaBatch& batch, StepWork& work) const;
  static void add_chunk(Seq& s, int chunk, ReplicaBatch& batch, StepWork& work);

  const EngineSettings& eng_;
  int groups_;  // attention-DP groups of the replica
  mutable std::vector<int> budget_;  // take()'s per-rank token budgets and open flags (reused)
  mutable std::vector<char> open_;
};

// The scheduler EngineSettings::scheduler names, for a replica of `groups` attention-DP groups.
std::unique_ptr<Scheduler> make_scheduler(const EngineSettings& e, int groups);

}  // namespace shardsim
