// sim/plan/engine.hpp — the serving engine's settings, as users of TensorRT-LLM, vLLM and SGLang know them.
//
// Owns: EngineSettings (batch limits, KV-memory budget, scheduler policy, CUDA graphs, host cost
// per iteration), the named presets, and reading them from the compact plan string and from the
// plan JSON's "engine" object (docs/plan-format.md, "Engine settings"). Every limit is per
// **engine = one replica** (the dp-th part of the cluster), never per GPU — except, with
// attention-DP and `limits=rank`, max_seqs and max_batch_tokens, which are then each rank's.
// Units: tokens, bytes, seconds. Thread-safety: value types and pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/json_reader.hpp"
#include "sim/plan/allreduce_kernels.hpp"

namespace shardsim {

// How KV-cache memory is budgeted on each GPU.
enum class KvBudget {
  FreeFraction,   // fraction of the memory left free after weights, activations and buffers (TensorRT-LLM
                  // kv_cache_free_gpu_mem_fraction)
  TotalFraction,  // fraction of the GPU's memory for everything, KV takes what is left (vLLM gpu_memory_utilization,
                  // SGLang mem_fraction_static)
};

// When KV blocks are taken and what happens when they run out.
enum class KvPolicy {
  Reserve,       // reserve prompt + max_output tokens at admission (TensorRT-LLM GUARANTEED_NO_EVICT): never evicts
  OnDemand,      // blocks as sequences grow; when a step needs a block and none is free, the most recently admitted
                 // sequence is preempted (vLLM, SGLang, TensorRT-LLM MAX_UTILIZATION)
  ReserveExact,  // reserve prompt + the request's true output length: an oracle no engine has (studies only)
};
enum class Preemption { Recompute, Swap };
// Whose iteration-level scheduler runs the engine (sim/serving/scheduler.hpp, docs/engines.md).
enum class SchedulerKind {
  Vllm,    // vLLM V1: running sequences first, then prompt chunks, one token budget per step
  Trtllm,  // TensorRT-LLM in-flight batching: generation requests first, then context requests
  Sglang,  // SGLang: prefill first (a rank with prompt work runs no decode that step), new_token_ratio admission
};

// How an expert-parallel all-to-all that spans nodes moves its tokens (docs/communication.md):
// PerRank sends a token once to each destination EP rank (DeepEP's low-latency kernels, NCCL's
// pairwise all-to-all); PerNode once to each destination node over RDMA and on over NVLink
// (DeepEP's normal kernels); Auto runs steps with prompt chunks per node and decode-only steps per
// rank, as SGLang's DeepEP "auto" mode picks the normal kernels for prefill batches and the
// low-latency ones for decode. Every preset defaults to PerRank: DeepEP is something a deployment
// turns on (SGLang's DeepEP MoE backend, vLLM's deepep_* all-to-all backends), not a default.
enum class A2aKernel { Auto, PerNode, PerRank };

// Which replica an arriving request goes to (open loop; sim/serving/router.hpp, docs/engines.md
// "Routing across replicas"): RoundRobin deals requests in turn; LeastLoaded sends each to the
// replica with the fewest requests in flight; PrefixAffinity is SGLang's cache-aware router (the
// replica sent the longest leading run of its prefix blocks when that covers more than 30% of
// its prompt, the least loaded one when loads are imbalanced, else the smallest tree).
enum class Dispatch { RoundRobin, PrefixAffinity, LeastLoaded };

struct EngineSettings {
  std::string preset = "vllm";   // the preset the other fields started from
  int max_seqs = 1024;           // concurrent sequences per engine (replica), or per attention-DP rank (rank_limits)
  int max_batch_tokens = 8192;   // tokens per iteration per engine, or per attention-DP rank (max_num_tokens / max_num_batched_tokens)
  // With attention-DP, whose limits max_seqs and max_batch_tokens are. false (every preset): the
  // engine's — its ranks share one token budget a step and split max_seqs evenly. true (plan key
  // `limits=rank`): each rank's, with its own token budget, as vLLM (a core engine per DP rank)
  // and TensorRT-LLM (an executor per attention-DP rank) apply --max-num-seqs / max_batch_size and
  // the token budget; SGLang divides its limits by the DP size instead. docs/engines.md "Limits
  // per attention-DP rank" says why the presets do not turn it on yet.
  bool rank_limits = false;
  int max_context = 8192;        // longest prompt + output admitted, tokens
  int prefill_chunk = 8192;      // chunked prefill: largest prompt chunk per iteration; 0 = whole prompts only
  int max_output = 0;            // Reserve: output tokens reserved per request; 0 = max_context − prompt
  KvBudget kv_budget = KvBudget::TotalFraction;
  double kv_fraction = 0.9;      // the budget's fraction (see KvBudget)
  KvPolicy policy = KvPolicy::OnDemand;
  Preemption preemption = Preemption::Recompute;
  SchedulerKind scheduler = SchedulerKind::Vllm;
  A2aKernel a2a = A2aKernel::PerRank;
  // Whose kernels a tensor-parallel all-reduce inside one NVLink domain runs (allreduce_kernels.hpp):
  // each preset its engine's own custom all-reduce, which the engines use by default for the sizes
  // they allow (TensorRT-LLM AllReduceStrategy AUTO, vLLM and SGLang custom_all_reduce); nccl turns
  // it off (vLLM --disable-custom-all-reduce, SGLang --disable-custom-all-reduce).
  AllReduceKernels allreduce = AllReduceKernels::Vllm;
  int kv_block = 16;             // tokens per KV block (OnDemand allocates whole blocks)
  double swap_bw = 25e9;         // Swap: host↔GPU bytes/s per GPU (PCIe 5 x16 achieved)
  bool cuda_graphs = true;       // off: every kernel is launched by the host (see launch_overhead)
  // Two-batch overlap (SGLang --enable-two-batch-overlap, DeepSeek): with EP, each step runs as
  // two micro-batches whose all-to-alls overlap each other's compute (sim/step/micro_batches.hpp).
  bool two_batch_overlap = false;
  // Overlap scheduling (SGLang's overlap scheduler, on by default since v0.4; TensorRT-LLM's PyTorch
  // executor's, on by default; vLLM's async scheduling, off through 0.11): the host prepares step
  // n+1 (scheduling, inputs, the outputs of step n−1) while the GPU runs step n, so a step's host
  // work (step_overhead, seq_overhead) delays it only by what the GPU step before it does not cover.
  // Off: the host works between steps, in series with them. docs/engines.md "Host costs".
  bool overlap_schedule = false;
  // SMs DeepEP's normal (node-level) kernels hold while two-batch overlap runs compute beside them
  // (DeepEP's Buffer.num_sms, 20 by default): those steps' compute gets (SMs − comm_sms)/SMs of the
  // GPU's flop rate. Its low-latency (per-rank) kernels hold none (hook-based receive).
  int comm_sms = 20;
  // Prefix caching (vLLM enable_prefix_caching, SGLang's radix cache, TensorRT-LLM
  // enable_block_reuse; on by default in all three): a prompt's leading blocks another prompt
  // computed are served from KV instead of prefilled (sim/serving/prefix_cache.hpp). Acts only on
  // traces with prefix blocks (Mooncake hash_ids, synthetic system=).
  bool prefix_cache = true;
  // Host memory per GPU for prefix-cache blocks evicted from GPU memory (SGLang's HiCache, vLLM's
  // KV offloading, LMCache): bytes, 0 = none. A hit there is copied back at swap_bw, charged to
  // the next step's host time.
  double kv_host = 0;
  // Weights per GPU kept in host memory and streamed in, layer by layer, every forward (SGLang and
  // vLLM --cpu-offload-gb; Grace-attached prefill): bytes, 0 = none. Prefetched while earlier
  // layers compute, so a step lasts at least their bytes ÷ the GPU's host_bw.
  double weight_offload = 0;
  Dispatch dispatch = Dispatch::RoundRobin;
  // Speculative decoding with a one-layer draft head (DeepSeek-V3's MTP module, an EAGLE head):
  // `spec_tokens` draft tokens per decode step, each proposed by one pass of the head (one more
  // layer of the model's last kind, sharing its embedding and LM head) and verified together by
  // the next step; draft i is accepted with probability spec_accept[i] once the ones before it
  // were (the last value repeats). 0 = off. docs/engines.md "Speculative decoding".
  int spec_tokens = 0;
  std::vector<double> spec_accept = {0.85};
  double launch_overhead = 4e-6; // host seconds per kernel launch without CUDA graphs
  double step_overhead = 1e-3;   // host seconds per iteration (scheduling, sampling, bookkeeping)
  double seq_overhead = 2e-6;    // host seconds per sequence in the iteration
  double runtime_reserve = 1.5 * 1024 * 1024 * 1024;  // bytes per GPU held by the CUDA context, libraries, allocator

  bool operator==(const EngineSettings&) const = default;
};

const char* to_string(KvBudget b);
const char* to_string(KvPolicy p);
const char* to_string(Preemption p);
const char* to_string(SchedulerKind k);
const char* to_string(A2aKernel k);
const char* to_string(Dispatch d);

// The named presets (docs/plan-format.md says where each figure comes from).
const std::vector<std::string>& engine_preset_names();
// Throws InputError(source, field, …) listing the names when `name` is unknown.
EngineSettings engine_preset(const std::string& name, const std::string& source, const std::string& field);

// Applies one compact-string key (max_seqs=, kv_fraction=, policy=, …) to `e`. Returns false when
// `key` is not an engine key; throws InputError(source, key, reason) for a bad value.
bool set_engine_key(EngineSettings& e, const std::string& key, const std::string& value, const std::string& source);
// Keys set_engine_key knows, for error messages.
const char* engine_key_list();
// Reads the "engine" object: {"preset": "...", overrides…}; `e` holds the starting values.
void engine_from_json(EngineSettings& e, JsonObject obj);
// The settings the user did not give follow the ones they did, as the engines' own defaults do: a
// prefill chunk left at its preset is at most the token budget (vLLM, SGLang and TensorRT-LLM cap
// a chunk by the iteration's token budget), so `max_batch_tokens=4096` alone is a plan, not a
// conflict with a preset's 8,192-token chunk. `chunk_given`: the user set prefill_chunk (a chunk
// the user set above the budget stays, and plan_check refuses it). Both readers call it last.
void follow_user_settings(EngineSettings& e, bool chunk_given);
json engine_to_json(const EngineSettings& e);
// Compact-string items: "engine=NAME" unless it is the default preset, then the fields that differ
// from the preset's (max_context aside), e.g. "engine=trtllm,max_seqs=896"; "" for the plain default.
std::string engine_to_string(const EngineSettings& e);
// With `attn_dp` attention groups (rank_limits above): the sequences one group may run and the
// tokens one group's step may hold at most — max_seqs and max_batch_tokens with rank limits,
// ⌈· / attn_dp⌉ of them without (the ranks then share the engine's budget) — and the whole
// engine's: the group's × attn_dp with rank limits, max_seqs and max_batch_tokens without.
int seqs_per_group(const EngineSettings& e, int attn_dp);
int tokens_per_group(const EngineSettings& e, int attn_dp);
long engine_seqs(const EngineSettings& e, int attn_dp);
long engine_tokens(const EngineSettings& e, int attn_dp);

}  // namespace shardsim
