// sim/serving/kv_transfer.hpp — moving each prompt's KV cache from its prefill replica to its decode replica.
//
// Owns: KvHandoff (one request's hand-over between the pools of a disaggregated plan), the KV-transfer
// program (every hand-over of a run as one StepProgram of sends) and when each hand-over's last byte
// lands. What moves: the decode side's KV of the prompt, i.e. for every GPU of the decode attention
// group that will hold the sequence (its tp ranks in every stage), prompt × that GPU's KV bytes per
// token (sim/plan/memory_model.hpp; MLA's latent is whole on every TP rank, GQA heads are split). The
// i-th such flow leaves the prefill replica's i-th GPU (mod its size). Each flow is a send released
// when the prefill emitted the first token (StepOp::not_before); sends of one GPU queue on its
// communication stream in release order (its NIC moves one transfer at a time, as NIXL/Mooncake
// transfer engines post them), so under the analytic executor a flow takes the route's latency +
// bytes / bottleneck bandwidth after the flows queued before it, and under SimGrid flows also share
// the fabric's links (an oversubscribed spine) with each other.
// Not modelled: layer-by-layer streaming that overlaps the transfer with the prefill (Mooncake,
// SGLang) — the transfer starts when the prefill ends, as vLLM's disaggregated connector does; the
// steps' own collectives do not slow these flows (they are simulated apart).
// Units: seconds, bytes. Thread-safety: pure functions.
#pragma once

#include <functional>
#include <vector>

#include "sim/plan/memory_model.hpp"
#include "sim/plan/plan.hpp"
#include "sim/step/step_program.hpp"

namespace shardsim {

class Cluster;

struct KvHandoff {
  int req = 0;                 // index into the trace
  int prefill_replica = 0;
  int decode_replica = 0, decode_group = 0;  // the decode replica and attention-DP group that receive it
  int prompt_tokens = 0;
  double ready = 0;            // when the prefill pool emitted the request's first token, seconds
};

struct KvTransferProgram {
  StepProgram program;         // sends only, in release order
  std::vector<int> handoff_of_op;  // for each send, its index into the hand-overs
  double bytes = 0;            // Σ bytes moved
};

// The sends of every hand-over. `disagg` is the disaggregated plan; `decode_memory` its decode
// pool's memory report (KV bytes per token of each stage).
KvTransferProgram kv_transfer_program(const Plan& disagg, const MemoryReport& decode_memory,
                                      const std::vector<KvHandoff>& handoffs);

// When each hand-over's last byte has landed, given when each send of its program ended.
std::vector<double> handoff_arrivals(const KvTransferProgram& t, const std::vector<double>& op_end, std::size_t handoffs);

// Runs a transfer program and returns when each of its operations ended (seconds from 0).
using TransferTimer = std::function<std::vector<double>(const StepProgram&)>;
// The analytic executor's schedule (contention only where sends share a GPU).
TransferTimer analytic_transfer_timer(const Cluster& cluster);

}  // namespace shardsim
