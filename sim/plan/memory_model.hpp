// sim/plan/memory_model.hpp — bytes per GPU that a plan needs, stage by stage.
//
// Owns: the per-GPU memory model — weights (as the plan's degrees and per-operator sharding split
// them), KV cache per token, activations of the largest layer at the batching limits,
// communication buffers — and the fit verdict. The model of each term is documented in
// docs/plan-format.md ("Memory model"). Units: bytes.
// The KV budget follows the engine (sim/plan/engine.hpp): a fraction of the memory left free after
// weights, activations, buffers and the runtime (TensorRT-LLM), or a fraction of the whole GPU
// (vLLM, SGLang). A plan fits when, on every stage, the KV budget holds one max_context sequence
// (a server that cannot hold one full sequence cannot start; beyond that, KV capacity limits
// admission, which the serving loop models).
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "sim/plan/plan.hpp"

namespace shardsim {

struct ModelSpec;
class Cluster;

struct StageMemory {
  int stage = 0;
  int layers = 0, dense_layers = 0, moe_layers = 0;
  bool embed = false, lm_head = false;
  double weights = 0;             // bytes per GPU (resident: offloaded ones out, their prefetch buffer in)
  double offloaded = 0;           // bytes per GPU of weights in host memory, streamed in every forward
  double activations = 0;         // bytes per GPU, peak of one layer at max_batch_tokens
  double comm_buffers = 0;        // bytes per GPU
  double runtime = 0;             // CUDA context, libraries, allocator slack (engine runtime_reserve)
  double kv_per_token = 0;        // bytes per GPU per token of context (this stage's layers)
  double usable = 0;              // bytes the engine lets this stage use, KV included (engine KV budget)
  double static_bytes() const { return weights + activations + comm_buffers + runtime; }
};

struct MemoryReport {
  double hbm = 0;                 // memory per GPU as the driver reports it, bytes
  double usable = 0;              // the worst stage's usable bytes (StageMemory::usable)
  std::vector<StageMemory> stages;
  int worst_stage = 0;            // the stage with the least KV room
  double kv_one_seq = 0;          // KV of one max_context sequence on the worst stage, bytes
  double kv_at_limits = 0;        // KV of one attention group's max_seqs × max_context sequences on a GPU of the worst stage
  double kv_capacity_tokens = 0;  // tokens of context one attention-DP group can hold (worst stage)
  double headroom = 0;            // usable − (static + kv_one_seq) on the worst stage; < 0 = overflow
  bool fits = false;

  const StageMemory& worst() const { return stages.at(static_cast<std::size_t>(worst_stage)); }
};

// Bytes an engine may use on a GPU of `hbm` bytes whose static footprint is `static_bytes`.
double usable_bytes(const EngineSettings& e, double hbm, double static_bytes);

// Requires: plan degrees consistent with the model (check_plan reports the reasons otherwise;
// the memory model clamps divisions so it never divides by zero).
MemoryReport plan_memory(const Plan& plan, const ModelSpec& model, const Cluster& cluster);

// Per-layer weight elements held by one GPU, by component (used here and by the lowering).
struct LayerWeights {
  double attention = 0;           // projections held by this GPU
  double norms = 0;
  double dense_ffn = 0;           // dense layers only
  double routed_experts = 0;      // MoE layers only: this GPU's share of its EP group's experts
  double shared_experts = 0;
  double router = 0;
};
LayerWeights layer_weights_per_gpu(const Plan& plan, const ModelSpec& model, bool moe_layer);
// KV-cache elements per token per layer held by one GPU.
double kv_elems_per_gpu(const Plan& plan, const ModelSpec& model);

}  // namespace shardsim
