// sim/serving/disaggregated.hpp — serving with prefill and decode on separate GPU pools (xPyD).
//
// Owns: serve_disaggregated() and DisaggReport. A disaggregated plan (Plan::decode_pool) runs in
// three phases, each pool with its own degrees, engine, dtypes and experts:
//   1. prefill pool: every request arrives as in a colocated run (its trace time, a rate, or 0
//      offline) and is served with max_tokens = 1 — the pool prefills it and emits its first token;
//   2. KV transfer (sim/serving/kv_transfer.hpp): in the order their prefills end, requests are dealt
//      round-robin to the decode replicas (and to their attention groups); each prompt's KV moves from
//      the prefill replica's GPUs to the decode group's GPUs as flows over the fabric;
//   3. decode pool: a request arrives when its KV has landed, is admitted by the decode engine's own
//      rules (the KV stays in the group it was sent to), and its first token reaches the user on
//      admission; TTFT therefore = prefill queue + prefill + transfer + decode admission wait.
// Requests with one output token end in phase 1. The prefill pool frees a request's KV when its
// prefill ends (no back-pressure from a full decode pool); closed-loop clients (concurrency) are
// not supported, since a client's next request would couple the phases.
// The result's requests, emissions, breakdown (both pools summed) and steady window (where both
// pools' windows overlap) read like a colocated run's; DisaggReport adds each pool's own figures.
// Units: seconds, bytes. Thread-safety: as serve().
#pragma once

#include <functional>
#include <string>

#include "sim/serving/kv_transfer.hpp"
#include "sim/serving/serving.hpp"

namespace shardsim {

// Serves one pool (a plain Plan) under the caller's executor or fidelity tier.
using PoolServer = std::function<ServingResult(const Plan& pool, const RequestTrace& trace, const ServingOptions& options)>;

// The prefill pool as phase 1 runs it: the plan's prefill pool with max_output = 1, serving
// `trace` with every output set to one token.
Plan prefill_pool(const Plan& plan);
RequestTrace prefill_trace(const RequestTrace& trace);

ServingResult serve_disaggregated(const Plan& plan, const ModelSpec& model, const Cluster& cluster, const RequestTrace& trace,
                                  const ServingOptions& options, const PoolServer& serve_pool, const TransferTimer& transfer);

}  // namespace shardsim
