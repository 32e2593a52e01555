// workloads/hf_config.cpp — import of a Hugging Face config.json into a ModelSpec.
//
// Owns: model_from_hf_config. Reads only the keys that determine parameter counts and KV size
// (HF configs carry dozens more — rope scaling, dropout, token ids — which are ignored); a missing
// required key or a wrong type throws InputError(source, "/hf_key", reason). After import the
// spec goes through validate_model, and its errors are re-pointed at the HF key that supplied the
// bad value, so the user sees "/num_experts_per_tok", not shardsim's "/top_k".
// Layer layouts follow the HF modelling code: Qwen-MoE and Llama-4 make layer l MoE iff
// (l + 1) % step == 0 (and, for Qwen, l ∉ mlp_only_layers); DeepSeek iff l ≥ first_k_dense_replace
// and l % moe_layer_freq == 0.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string_view>

#include "common/display_text.hpp"
#include "common/input_error.hpp"
#include "workloads/model.hpp"

namespace shardsim {
namespace {

const char* hf_type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// A read-only view of one object of the config; `has` treats null ("q_lora_rank": null) as absent.
class HfReader {
 public:
  HfReader(const json& j, const std::string& source, std::string pointer, std::string type)
      : j_(&j), source_(&source), pointer_(std::move(pointer)), type_(std::move(type)) {}

  std::string pointer(std::string_view key) const { return pointer_ + "/" + std::string(key); }
  bool has(std::string_view key) const {
    auto it = j_->find(key);
    return it != j_->end() && !it->is_null();
  }
  [[noreturn]] void fail(std::string_view key, const std::string& reason) const {
    throw InputError(*source_, pointer(key), reason);
  }

  std::int64_t integer(std::string_view key) const {
    const json& v = required(key);
    std::int64_t out = 0;
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kLimit))
        fail(key, "value " + v.dump() + " out of range");
      out = v.get<std::int64_t>();
    } else if (v.is_number_float()) {  // 8.0 is accepted, 8.5 is not
      const double d = v.get<double>();
      if (!std::isfinite(d) || std::abs(d) > static_cast<double>(kLimit)) fail(key, "value " + v.dump() + " out of range");
      if (d != std::floor(d)) fail(key, "expected an integer, got " + v.dump());
      out = static_cast<std::int64_t>(d);
    } else {
      fail(key, std::string("expected an integer, got ") + (v.is_number() ? v.dump() : hf_type_name(v)));
    }
    if (out < -kLimit || out > kLimit) fail(key, "value " + std::to_string(out) + " out of range");
    return out;
  }
  std::int64_t integer_or(std::string_view key, std::int64_t fallback) const {
    return has(key) ? integer(key) : fallback;
  }
  bool boolean_or(std::string_view key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_->at(std::string(key));
    if (!v.is_boolean()) fail(key, std::string("expected true or false, got ") + hf_type_name(v));
    return v.get<bool>();
  }
  std::string string_or(std::string_view key, std::string fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_->at(std::string(key));
    if (!v.is_string()) fail(key, std::string("expected a string, got ") + hf_type_name(v));
    return v.get<std::string>();
  }
  std::vector<std::int64_t> integer_array_or(std::string_view key) const {
    std::vector<std::int64_t> out;
    if (!has(key)) return out;
    const json& v = j_->at(std::string(key));
    if (!v.is_array()) fail(key, std::string("expected an array of integers, got ") + hf_type_name(v));
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number_integer())
        throw InputError(*source_, pointer(key) + "/" + std::to_string(i),
                         std::string("expected an integer, got ") + hf_type_name(v[i]));
      out.push_back(v[i].get<std::int64_t>());
    }
    return out;
  }
  HfReader sub(std::string_view key) const {
    const json& v = required(key);
    if (!v.is_object()) fail(key, std::string("expected an object, got ") + hf_type_name(v));
    return HfReader(v, *source_, pointer(key), type_);
  }

 private:
  static constexpr std::int64_t kLimit = 1'000'000'000'000;
  const json& required(std::string_view key) const {
    if (!has(key)) fail(key, "missing, required for a Hugging Face \"" + type_ + "\" config");
    return j_->at(std::string(key));
  }
  const json* j_;
  const std::string* source_;
  std::string pointer_;
  std::string type_;
};

// One import in progress: the spec being filled and, for each of its fields, the HF key it came from.
struct Import {
  ModelSpec m;
  std::map<std::string, std::string> origin;  // "/hidden" → "/hidden_size"

  std::int64_t take64(const HfReader& r, const char* ours, std::string_view key) {
    origin[std::string("/") + ours] = r.pointer(key);
    return r.integer(key);
  }
  int take(const HfReader& r, const char* ours, std::string_view key) {
    const std::int64_t v = take64(r, ours, key);
    if (v < -1'000'000'000 || v > 1'000'000'000) r.fail(key, "value " + std::to_string(v) + " out of range");
    return static_cast<int>(v);
  }
  int take_or(const HfReader& r, const char* ours, std::string_view key, int fallback) {
    return r.has(key) ? take(r, ours, key) : fallback;
  }
  // Marks the layers for which `is_dense` holds as dense; `key_pointer` names the HF key that decided.
  template <class Pred>
  void layout(Pred is_dense, const std::string& key_pointer) {
    m.dense_layers.clear();
    for (int l = 0; l < m.layers && l <= 100'000; ++l)
      if (!m.is_moe() || is_dense(l)) m.dense_layers.push_back(l);
    origin["/dense_layers"] = key_pointer;
  }
};

// Layers, hidden, heads, head dim, vocab, positions, tying for the Llama-like families.
void read_common_gqa(const HfReader& r, Import& in) {
  ModelSpec& m = in.m;
  m.layers = in.take(r, "layers", "num_hidden_layers");
  m.hidden = in.take(r, "hidden", "hidden_size");
  m.heads = in.take(r, "heads", "num_attention_heads");
  m.kv_heads = in.take_or(r, "kv_heads", "num_key_value_heads", m.heads);
  if (r.has("head_dim")) {
    m.head_dim = in.take(r, "head_dim", "head_dim");
  } else if (m.heads > 0 && m.hidden % m.heads == 0) {
    m.head_dim = m.hidden / m.heads;
    in.origin["/head_dim"] = r.pointer("hidden_size");
  } else {
    r.fail("head_dim", "missing, and hidden_size is not a multiple of num_attention_heads");
  }
  m.attention = m.kv_heads == m.heads ? AttentionKind::MHA : AttentionKind::GQA;
}

void read_vocab_positions(const HfReader& r, Import& in) {
  in.m.vocab = in.take(r, "vocab", "vocab_size");
  in.m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  in.m.max_positions = in.take_or(r, "max_positions", "max_position_embeddings", 0);
}

void import_dense(const HfReader& r, Import& in) {
  read_common_gqa(r, in);
  in.m.dense_ffn = in.take64(r, "dense_ffn", "intermediate_size");
  in.layout([](int) { return true; }, r.pointer("intermediate_size"));
  read_vocab_positions(r, in);
}

void import_mixtral(const HfReader& r, Import& in) {
  read_common_gqa(r, in);
  in.m.experts = in.take(r, "experts", "num_local_experts");
  in.m.top_k = in.take(r, "top_k", "num_experts_per_tok");
  in.m.expert_ffn = in.take64(r, "expert_ffn", "intermediate_size");
  in.layout([](int) { return false; }, r.pointer("num_local_experts"));
  read_vocab_positions(r, in);
}

void import_gpt_oss(const HfReader& r, Import& in) {
  read_common_gqa(r, in);
  in.m.experts = in.take(r, "experts", "num_local_experts");
  in.m.top_k = r.has("num_experts_per_tok") ? in.take(r, "top_k", "num_experts_per_tok")
                                            : in.take(r, "top_k", "experts_per_token");
  in.m.expert_ffn = in.take64(r, "expert_ffn", "intermediate_size");
  in.layout([](int) { return false; }, r.pointer("num_local_experts"));
  read_vocab_positions(r, in);
}

void import_qwen_moe(const HfReader& r, Import& in) {
  ModelSpec& m = in.m;
  read_common_gqa(r, in);
  m.experts = in.take(r, "experts", "num_experts");
  if (m.is_moe()) {
    m.top_k = in.take(r, "top_k", "num_experts_per_tok");
    m.expert_ffn = in.take64(r, "expert_ffn", "moe_intermediate_size");
    if (r.integer_or("shared_expert_intermediate_size", 0) > 0) {
      m.shared_experts = 1;
      m.shared_expert_ffn = in.take64(r, "shared_expert_ffn", "shared_expert_intermediate_size");
    }
  }
  const std::int64_t step = r.integer_or("decoder_sparse_step", 1);
  if (step < 1) r.fail("decoder_sparse_step", "must be positive, got " + std::to_string(step));
  const std::vector<std::int64_t> mlp_only = r.integer_array_or("mlp_only_layers");
  for (std::size_t i = 0; i < mlp_only.size(); ++i)
    if (mlp_only[i] < 0 || mlp_only[i] >= m.layers)
      r.fail("mlp_only_layers", "layer " + std::to_string(mlp_only[i]) + " out of range [0, " +
                                    std::to_string(m.layers) + ")");
  auto dense = [&](int l) {
    return (l + 1) % step != 0 || std::find(mlp_only.begin(), mlp_only.end(), l) != mlp_only.end();
  };
  in.layout(dense, r.pointer(mlp_only.empty() ? "decoder_sparse_step" : "mlp_only_layers"));
  if (m.num_dense_layers() > 0) m.dense_ffn = in.take64(r, "dense_ffn", "intermediate_size");
  read_vocab_positions(r, in);
}

void import_deepseek(const HfReader& r, Import& in) {
  ModelSpec& m = in.m;
  m.attention = AttentionKind::MLA;
  m.layers = in.take(r, "layers", "num_hidden_layers");
  m.hidden = in.take(r, "hidden", "hidden_size");
  m.heads = in.take(r, "heads", "num_attention_heads");
  m.kv_heads = m.heads;  // MLA: num_key_value_heads is not used by the latent cache
  m.q_lora_rank = in.take_or(r, "q_lora_rank", "q_lora_rank", 0);
  m.kv_lora_rank = in.take(r, "kv_lora_rank", "kv_lora_rank");
  m.qk_nope_head_dim = in.take(r, "qk_nope_head_dim", "qk_nope_head_dim");
  m.qk_rope_head_dim = in.take(r, "qk_rope_head_dim", "qk_rope_head_dim");
  m.v_head_dim = in.take(r, "v_head_dim", "v_head_dim");
  m.head_dim = m.v_head_dim;
  in.origin["/head_dim"] = r.pointer("v_head_dim");
  m.experts = in.take_or(r, "experts", "n_routed_experts", 0);
  int first_dense = 0, freq = 1;
  if (m.is_moe()) {
    m.top_k = in.take(r, "top_k", "num_experts_per_tok");
    m.expert_ffn = in.take64(r, "expert_ffn", "moe_intermediate_size");
    m.shared_experts = in.take_or(r, "shared_experts", "n_shared_experts", 0);
    if (m.shared_experts > 0) m.shared_expert_ffn = in.take64(r, "shared_expert_ffn", "moe_intermediate_size");
    m.n_group = in.take_or(r, "n_group", "n_group", 1);
    m.topk_group = in.take_or(r, "topk_group", "topk_group", 1);
    const std::int64_t first = r.integer_or("first_k_dense_replace", 0);
    const std::int64_t every = r.integer_or("moe_layer_freq", 1);
    if (first < 0 || first > m.layers)
      r.fail("first_k_dense_replace", "must be in [0, num_hidden_layers], got " + std::to_string(first));
    if (every < 1 || every > m.layers)
      r.fail("moe_layer_freq", "must be in [1, num_hidden_layers], got " + std::to_string(every));
    first_dense = static_cast<int>(first);
    freq = static_cast<int>(every);
  }
  in.layout([&](int l) { return l < first_dense || l % freq != 0; }, r.pointer("first_k_dense_replace"));
  if (m.num_dense_layers() > 0) m.dense_ffn = in.take64(r, "dense_ffn", "intermediate_size");
  read_vocab_positions(r, in);
}

void import_llama4(const HfReader& r, Import& in) {
  ModelSpec& m = in.m;
  read_common_gqa(r, in);
  m.experts = in.take(r, "experts", "num_local_experts");
  if (m.is_moe()) {
    m.top_k = in.take(r, "top_k", "num_experts_per_tok");
    m.expert_ffn = in.take64(r, "expert_ffn", "intermediate_size");
    m.shared_experts = 1;  // Llama-4 MoE layers always add one shared expert of the same width
    m.shared_expert_ffn = m.expert_ffn;
    in.origin["/shared_expert_ffn"] = r.pointer("intermediate_size");
  }
  if (r.has("moe_layers")) {
    const std::vector<std::int64_t> moe = r.integer_array_or("moe_layers");
    in.layout([&](int l) { return std::find(moe.begin(), moe.end(), l) == moe.end(); }, r.pointer("moe_layers"));
  } else {
    const std::int64_t step = r.integer_or("interleave_moe_layer_step", 1);
    if (step < 1) r.fail("interleave_moe_layer_step", "must be positive, got " + std::to_string(step));
    in.layout([&](int l) { return (l + 1) % step != 0; }, r.pointer("interleave_moe_layer_step"));
  }
  if (m.num_dense_layers() > 0) m.dense_ffn = in.take64(r, "dense_ffn", "intermediate_size_mlp");
  read_vocab_positions(r, in);
}

void import_dbrx(const HfReader& r, Import& in) {
  ModelSpec& m = in.m;
  m.layers = in.take(r, "layers", "n_layers");
  m.hidden = in.take(r, "hidden", "d_model");
  m.heads = in.take(r, "heads", "n_heads");
  const HfReader attn = r.sub("attn_config");
  m.kv_heads = in.take_or(attn, "kv_heads", "kv_n_heads", m.heads);
  m.attention = m.kv_heads == m.heads ? AttentionKind::MHA : AttentionKind::GQA;
  if (m.heads <= 0 || m.hidden % m.heads != 0) r.fail("n_heads", "d_model must be a multiple of n_heads");
  m.head_dim = m.hidden / m.heads;
  in.origin["/head_dim"] = r.pointer("d_model");
  const HfReader ffn = r.sub("ffn_config");
  m.experts = in.take(ffn, "experts", "moe_num_experts");
  m.top_k = in.take(ffn, "top_k", "moe_top_k");
  m.expert_ffn = in.take64(ffn, "expert_ffn", "ffn_hidden_size");
  in.layout([](int) { return false; }, ffn.pointer("moe_num_experts"));
  m.vocab = in.take(r, "vocab", "vocab_size");
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  m.max_positions = in.take_or(r, "max_positions", "max_seq_len", 0);
}

using Importer = void (*)(const HfReader&, Import&);

struct Family {
  const char* model_type;
  const char* architecture;
  Importer import;
};

const Family kFamilies[] = {
    {"mixtral", "MixtralForCausalLM", import_mixtral},
    {"qwen2_moe", "Qwen2MoeForCausalLM", import_qwen_moe},
    {"qwen3_moe", "Qwen3MoeForCausalLM", import_qwen_moe},
    {"deepseek_v2", "DeepseekV2ForCausalLM", import_deepseek},
    {"deepseek_v3", "DeepseekV3ForCausalLM", import_deepseek},
    {"kimi_k2", "", import_deepseek},
    {"llama4", "Llama4ForConditionalGeneration", import_llama4},
    {"llama4_text", "Llama4ForCausalLM", import_llama4},
    {"gpt_oss", "GptOssForCausalLM", import_gpt_oss},
    {"dbrx", "DbrxForCausalLM", import_dbrx},
    {"llama", "LlamaForCausalLM", import_dense},
    {"mistral", "MistralForCausalLM", import_dense},
    {"qwen2", "Qwen2ForCausalLM", import_dense},
    {"qwen3", "Qwen3ForCausalLM", import_dense},
};

std::string supported_types() {
  std::string s;
  for (const Family& f : kFamilies) s += (s.empty() ? "" : ", ") + std::string(f.model_type);
  return s;
}

// The family of `j` from "model_type", falling back to "architectures"[0].
const Family& family_of(const json& j, const std::string& source, std::string* type_out) {
  const HfReader root(j, source, "", "?");
  const std::string type = root.string_or("model_type", "");
  for (const Family& f : kFamilies) {
    if (type == f.model_type) {
      *type_out = type;
      return f;
    }
  }
  std::string arch;
  if (auto it = j.find("architectures"); it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    arch = (*it)[0].get<std::string>();
  for (const Family& f : kFamilies) {
    if (!arch.empty() && arch == f.architecture) {
      *type_out = f.model_type;
      return f;
    }
  }
  if (!type.empty())
    throw InputError(source, "/model_type", "unsupported Hugging Face model_type \"" + type + "\"; supported: " +
                                                supported_types());
  throw InputError(source, "/architectures",
                   "unsupported Hugging Face architecture \"" + arch + "\"; supported model_type: " + supported_types());
}

// "…/Mixtral-8x7B-v0.1/config.json" → "Mixtral-8x7B-v0.1"; "hf-mixtral.json" → "hf-mixtral".
std::string name_from_source(const std::string& source) {
  const std::filesystem::path p(source);
  std::string stem = p.stem().string();
  if (stem == "config") {
    const std::string parent = p.parent_path().filename().string();
    if (!parent.empty() && parent != "." && parent != "..") return parent;
  }
  return stem.empty() ? "hf-model" : stem;
}

// bf16 unless the config says otherwise: quantization_config.quant_method fp8 / mxfp4 wins over
// torch_dtype ("float16" → fp16). Other quantizations (awq, gptq, …) keep the torch dtype.
std::string weight_dtype_of(const HfReader& root) {
  if (root.has("quantization_config")) {
    const HfReader q = root.sub("quantization_config");
    const std::string method = q.string_or("quant_method", "");
    if (method == "fp8") return "fp8";
    if (method == "mxfp4") return "mxfp4";
  }
  const std::string dtype = root.has("torch_dtype") ? root.string_or("torch_dtype", "") : root.string_or("dtype", "");
  return dtype == "float16" ? "fp16" : "bf16";
}

}  // namespace

ModelSpec model_from_hf_config(const json& j, const std::string& source) {
  if (!j.is_object()) throw InputError(source, "/", std::string("expected an object, got ") + hf_type_name(j));
  std::string type;
  const Family& family = family_of(j, source, &type);
  const HfReader root(j, source, "", type);
  // Multimodal wrappers (Llama-4, Kimi-K2.5) keep the language model under "text_config".
  const bool nested = !root.has("num_hidden_layers") && !root.has("n_layers") && root.has("text_config");
  const HfReader r = nested ? root.sub("text_config") : root;

  Import in;
  family.import(r, in);
  in.m.name = terminal_safe(name_from_source(source));  // a file name may hold any bytes
  in.m.comment = "imported from Hugging Face config " + source + " (model_type " + type + ")";
  in.m.weight_dtype = weight_dtype_of(root);
  try {
    validate_model(in.m, source);
  } catch (const InputError& e) {
    const std::string& field = e.field();
    const std::string head = field.substr(0, field.find('/', 1));
    if (auto it = in.origin.find(head); it != in.origin.end())
      throw InputError(source, it->second, e.reason() + " (shardsim field " + head.substr(1) + ")");
    throw;
  }
  return in.m;
}

}  // namespace shardsim
