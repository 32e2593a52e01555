// workloads/model.hpp — what runs: a decoder-only (MoE or dense) transformer's dimensions.
//
// Owns: ModelSpec and its derived quantities (parameter counts per component, KV-cache bytes per
// token), the preset table (embedded workloads/models/*.json), JSON I/O and import of a Hugging
// Face config.json (Mixtral / Qwen2-3-MoE / DeepSeek-V2-V3 / Llama styles).
// Units: counts of parameters and elements; bytes only where the name says so.
// Thread-safety: ModelSpec is a value; presets are immutable after first load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json_reader.hpp"

namespace shardsim {

enum class AttentionKind { MHA, GQA, MLA };
const char* to_string(AttentionKind k);

struct ModelSpec {
  std::string name;
  std::string comment;             // source of the figures
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;                // = heads for MHA and MLA
  int head_dim = 0;                // q/k/v head dim for MHA/GQA; v head dim for MLA
  AttentionKind attention = AttentionKind::GQA;
  // MLA only (DeepSeek-V2/V3, Kimi-K2)
  int q_lora_rank = 0;             // 0 = no q compression
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  // FFN
  int ffn_matrices = 3;            // 3 = SwiGLU (gate, up, down), 2 = plain MLP
  std::int64_t dense_ffn = 0;      // width of dense-layer FFN (0 if the model has no dense layers)
  std::vector<int> dense_layers;   // indices of dense (non-MoE) layers; all layers when experts == 0
  int experts = 0;                 // routed experts (0 = dense model)
  int top_k = 0;
  int shared_experts = 0;
  std::int64_t expert_ffn = 0;     // width of one routed expert
  std::int64_t shared_expert_ffn = 0;  // width of one shared expert
  int n_group = 1;                 // group-limited routing (DeepSeek): groups of experts
  int topk_group = 1;              // groups each token may use
  int vocab = 0;
  bool tied_embeddings = false;
  int max_positions = 0;
  std::string weight_dtype = "bf16";   // native checkpoint dtype: bf16 | fp8 | mxfp4

  bool is_moe() const { return experts > 0; }
  bool is_moe_layer(int layer) const;
  int num_moe_layers() const;
  int num_dense_layers() const { return layers - num_moe_layers(); }

  // Parameter counts (elements).
  std::int64_t attention_params() const;      // per layer: projections (+ MLA norms' weights ignored)
  std::int64_t dense_ffn_params() const;      // per dense layer
  std::int64_t expert_params() const;         // one routed expert
  std::int64_t shared_expert_params() const;  // all shared experts of one layer
  std::int64_t router_params() const;         // per MoE layer
  std::int64_t norm_params() const;           // per layer
  std::int64_t embedding_params() const;      // input embedding + LM head (+ final norm)
  std::int64_t total_params() const;
  std::int64_t active_params() const;         // per token: top_k routed + shared + everything dense

  // KV-cache elements per token per layer (GQA: 2·kv_heads·head_dim; MLA: kv_lora + rope).
  std::int64_t kv_elems_per_token_layer() const;
};

// All presets, sorted by name.
const std::vector<ModelSpec>& model_presets();
// Loads a model from a spec: a preset name, a path to one of our model JSON files, or a path to
// a Hugging Face config.json (recognised by its "model_type"/"architectures" keys).
ModelSpec load_model(const std::string& spec);
ModelSpec model_from_json(const json& j, const std::string& source);
json model_to_json(const ModelSpec& m);
ModelSpec model_from_hf_config(const json& j, const std::string& source);
// Checks internal consistency (positive sizes, heads divisible by kv heads, top_k ≤ experts, …);
// throws InputError(source, "/field", reason).
void validate_model(const ModelSpec& m, const std::string& source);

}  // namespace shardsim
