// workloads/model.hpp — what runs: a decoder-only (MoE or dense) transformer's dimensions.
//
// Owns: ModelSpec and its derived quantities (parameter counts per component, KV-cache bytes per
// token), the preset table (embedded workloads/models/*.json), JSON I/O and import of a Hugging
// Face config.json (Mixtral / Qwen2-3-MoE / DeepSeek-V2-V3-Kimi-K2 / Llama-4 / gpt-oss / DBRX /
// dense Llama styles).
// Units: counts of parameters and elements; bytes only where the name says so.
// Invariants (validate_model): sizes positive and below sanity limits; GQA heads % kv_heads == 0;
// MHA/MLA kv_heads == heads; MLA head_dim == v_head_dim; dense_layers sorted, unique, in
// [0, layers) (a dense model lists all layers, or none); top_k ≤ experts; total params ≤ 1e15.
// Counting: SwiGLU FFN = 3 matrices (ffn_matrices = 2 for a plain MLP), no biases, RMSNorm
// weights (2 per layer, + q/kv LoRA norms for MLA, + final norm), router = hidden × experts,
// input embedding + LM head unless tied. docs/model-format.md describes the JSON format.
// Thread-safety: ModelSpec is a value; presets are immutable after first load (thread-safe).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json_reader.hpp"
#include "workloads/routing_trace.hpp"

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
  std::string weight_dtype = "bf16";   // native checkpoint dtype: bf16 | fp16 | fp8 | mxfp4
  // Published ("card") figures, 0 = unknown. Not used by the simulator; checked by the tests.
  double card_total_params = 0;
  double card_active_params = 0;
  bool card_active_excludes_embedding = false;  // the card's active count leaves out the input embedding

  bool operator==(const ModelSpec&) const = default;

  bool is_moe() const { return experts > 0; }
  bool is_moe_layer(int layer) const;
  int num_moe_layers() const;
  int num_dense_layers() const { return layers - num_moe_layers(); }
  // The routing-relevant dimensions (MoE layers, experts, top-k, group limits) for make_routing.
  RoutingShape routing_shape() const { return {num_moe_layers(), experts, top_k, n_group, topk_group}; }

  // Parameter counts (elements).
  std::int64_t attention_params() const;      // per layer: projections (MLA's LoRA norms: norm_params)
  std::int64_t dense_ffn_params() const;      // per dense layer
  std::int64_t expert_params() const;         // one routed expert
  std::int64_t shared_expert_params() const;  // all shared experts of one layer
  std::int64_t router_params() const;         // per MoE layer
  std::int64_t norm_params() const;           // per layer
  std::int64_t embedding_params() const;      // input embedding + LM head (+ final norm)
  std::int64_t input_embedding_params() const;  // vocab × hidden
  std::int64_t lm_head_params() const;          // vocab × hidden, 0 when tied
  std::int64_t layer_params(int layer) const;   // attention + norms + (experts + shared + router | dense FFN)
  std::int64_t layer_active_params(int layer) const;  // same with top_k routed experts
  std::int64_t total_params() const;
  std::int64_t active_params() const;         // per token: top_k routed + shared + everything dense
  // Active parameters counted the way the card counts them (without the input embedding when
  // card_active_excludes_embedding), for comparison with card_active_params.
  std::int64_t active_params_as_card() const;

  // KV-cache elements per token per layer (GQA: 2·kv_heads·head_dim; MLA: kv_lora + rope).
  std::int64_t kv_elems_per_token_layer() const;
  // KV-cache bytes per token over all layers at `bytes_per_elem` (2 for bf16).
  double kv_bytes_per_token(double bytes_per_elem) const;
};

// All presets, sorted by name.
const std::vector<ModelSpec>& model_presets();
// The preset called `name`, or nullptr.
const ModelSpec* find_model_preset(const std::string& name);
// True for a Hugging Face config.json (has "model_type" or "architectures").
bool is_hf_config(const json& j);
// Loads a model from a spec: a preset name, a path to one of our model JSON files, or a path to
// a Hugging Face config.json (recognised by its "model_type"/"architectures" keys).
ModelSpec load_model(const std::string& spec);
ModelSpec model_from_json(const json& j, const std::string& source);
// The one-layer model a speculative-decoding draft head runs as (DeepSeek-V3's MTP module, an
// EAGLE head): one layer of `m`'s last kind (MoE or dense) between `m`'s embedding and LM head.
ModelSpec draft_head_model(const ModelSpec& m);
json model_to_json(const ModelSpec& m);
// Imports a Hugging Face config.json: model_type (or architectures[0]) mixtral, qwen2_moe,
// qwen3_moe, deepseek_v2, deepseek_v3, kimi_k2, llama4 / llama4_text (text_config), gpt_oss, dbrx,
// and the dense llama, mistral, qwen2, qwen3. Unknown HF keys are ignored; a missing required
// key, or an inconsistent value, throws InputError naming the HF key ("/num_local_experts").
ModelSpec model_from_hf_config(const json& j, const std::string& source);
// Checks internal consistency (positive sizes, heads divisible by kv heads, top_k ≤ experts, …);
// throws InputError(source, "/field", reason).
void validate_model(const ModelSpec& m, const std::string& source);

}  // namespace shardsim
