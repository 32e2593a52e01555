// workloads/model.cpp — ModelSpec: parameter counting, validation, our model JSON format, the
// embedded presets and load_model (preset name | model JSON | Hugging Face config.json).
//
// The JSON format is documented in docs/model-format.md; the HF import lives in hf_config.cpp.
// Every error is an InputError naming the file and the JSON pointer of the offending field.
#include "workloads/model.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string_view>

#include "common/embedded.hpp"
#include "common/input_error.hpp"

namespace shardsim {

const char* to_string(AttentionKind k) {
  switch (k) {
    case AttentionKind::MHA: return "mha";
    case AttentionKind::GQA: return "gqa";
    case AttentionKind::MLA: return "mla";
  }
  return "gqa";
}

// --- derived quantities -----------------------------------------------------------------------

bool ModelSpec::is_moe_layer(int layer) const {
  if (!is_moe() || layer < 0 || layer >= layers) return false;
  // dense_layers is strictly increasing (validated on load), so this is a binary search.
  return !std::binary_search(dense_layers.begin(), dense_layers.end(), layer);
}

ModelSpec draft_head_model(const ModelSpec& m) {
  ModelSpec d = m;
  d.name = m.name + " draft head";
  d.layers = 1;
  d.dense_layers.clear();
  if (!m.is_moe_layer(m.layers - 1)) d.dense_layers.push_back(0);
  return d;
}

int ModelSpec::num_moe_layers() const {
  if (!is_moe()) return 0;
  int dense = 0;
  for (int l : dense_layers)
    if (l >= 0 && l < layers) ++dense;
  return layers - dense;
}

std::int64_t ModelSpec::attention_params() const {
  const std::int64_t h = hidden, a = heads;
  if (attention == AttentionKind::MLA) {
    const std::int64_t qk = qk_nope_head_dim + qk_rope_head_dim;
    const std::int64_t q = q_lora_rank > 0 ? h * q_lora_rank + std::int64_t{q_lora_rank} * a * qk  // q_a, q_b
                                           : h * a * qk;                                            // q_proj
    const std::int64_t kv_a = h * (kv_lora_rank + qk_rope_head_dim);
    const std::int64_t kv_b = std::int64_t{kv_lora_rank} * a * (qk_nope_head_dim + v_head_dim);
    const std::int64_t o = a * v_head_dim * h;
    return q + kv_a + kv_b + o;
  }
  const std::int64_t d = head_dim;
  return h * a * d + 2 * h * kv_heads * d + a * d * h;  // q, k + v, o
}

std::int64_t ModelSpec::dense_ffn_params() const { return std::int64_t{ffn_matrices} * hidden * dense_ffn; }

std::int64_t ModelSpec::expert_params() const {
  return is_moe() ? std::int64_t{ffn_matrices} * hidden * expert_ffn : 0;
}

std::int64_t ModelSpec::shared_expert_params() const {
  return is_moe() ? std::int64_t{shared_experts} * ffn_matrices * hidden * shared_expert_ffn : 0;
}

std::int64_t ModelSpec::router_params() const { return is_moe() ? std::int64_t{hidden} * experts : 0; }

std::int64_t ModelSpec::norm_params() const {
  std::int64_t n = 2 * std::int64_t{hidden};  // pre-attention and pre-FFN RMSNorm
  if (attention == AttentionKind::MLA) n += q_lora_rank + kv_lora_rank;  // q_a / kv_a layernorms
  return n;
}

std::int64_t ModelSpec::input_embedding_params() const { return std::int64_t{vocab} * hidden; }
std::int64_t ModelSpec::lm_head_params() const { return tied_embeddings ? 0 : std::int64_t{vocab} * hidden; }

std::int64_t ModelSpec::embedding_params() const {
  return input_embedding_params() + lm_head_params() + hidden;  // + final norm
}

std::int64_t ModelSpec::layer_params(int layer) const {
  std::int64_t p = attention_params() + norm_params();
  if (is_moe_layer(layer))
    p += std::int64_t{experts} * expert_params() + shared_expert_params() + router_params();
  else
    p += dense_ffn_params();
  return p;
}

std::int64_t ModelSpec::layer_active_params(int layer) const {
  std::int64_t p = attention_params() + norm_params();
  if (is_moe_layer(layer))
    p += std::int64_t{top_k} * expert_params() + shared_expert_params() + router_params();
  else
    p += dense_ffn_params();
  return p;
}

std::int64_t ModelSpec::total_params() const {
  std::int64_t p = embedding_params();
  for (int l = 0; l < layers; ++l) p += layer_params(l);
  return p;
}

std::int64_t ModelSpec::active_params() const {
  std::int64_t p = embedding_params();
  for (int l = 0; l < layers; ++l) p += layer_active_params(l);
  return p;
}

std::int64_t ModelSpec::active_params_as_card() const {
  // With tied embeddings the matrix is still used as the LM head, so nothing is left out.
  if (card_active_excludes_embedding && !tied_embeddings) return active_params() - input_embedding_params();
  return active_params();
}

std::int64_t ModelSpec::kv_elems_per_token_layer() const {
  if (attention == AttentionKind::MLA) return std::int64_t{kv_lora_rank} + qk_rope_head_dim;
  return 2 * std::int64_t{kv_heads} * head_dim;
}

double ModelSpec::kv_bytes_per_token(double bytes_per_elem) const {
  return static_cast<double>(layers) * static_cast<double>(kv_elems_per_token_layer()) * bytes_per_elem;
}

// --- validation -------------------------------------------------------------------------------

namespace {

// Sanity limits: far above any real model, low enough that parameter counts fit in int64.
constexpr std::int64_t kMaxLayers = 100'000;
constexpr std::int64_t kMaxHidden = 1'000'000;
constexpr std::int64_t kMaxHeads = 100'000;
constexpr std::int64_t kMaxHeadDim = 100'000;
constexpr std::int64_t kMaxFfn = 10'000'000;
constexpr std::int64_t kMaxExperts = 100'000;
constexpr std::int64_t kMaxShared = 1'000;
constexpr std::int64_t kMaxVocab = 100'000'000;
constexpr std::int64_t kMaxPositions = 1'000'000'000;
constexpr long double kMaxTotalParams = 1e15L;

const std::vector<std::string_view> kWeightDtypes = {"bf16", "fp16", "fp8", "mxfp4"};

class Checker {
 public:
  explicit Checker(const std::string& source) : source_(source) {}
  [[noreturn]] void fail(const std::string& field, const std::string& reason) const {
    throw InputError(source_, "/" + field, reason);
  }
  void range(const char* field, std::int64_t v, std::int64_t lo, std::int64_t hi) const {
    if (v < lo) {
      if (lo == 1) fail(field, "must be positive, got " + std::to_string(v));
      fail(field, "must be at least " + std::to_string(lo) + ", got " + std::to_string(v));
    }
    if (v > hi) fail(field, "value " + std::to_string(v) + " is implausibly large (limit " + std::to_string(hi) + ")");
  }
  void zero_unless(const char* field, std::int64_t v, bool allowed, const std::string& when) const {
    if (!allowed && v != 0) fail(field, "must be 0 (or absent) " + when + ", got " + std::to_string(v));
  }

 private:
  const std::string& source_;
};

}  // namespace

void validate_model(const ModelSpec& m, const std::string& source) {
  const Checker c(source);
  c.range("layers", m.layers, 1, kMaxLayers);
  c.range("hidden", m.hidden, 1, kMaxHidden);
  c.range("heads", m.heads, 1, kMaxHeads);
  const bool mla = m.attention == AttentionKind::MLA;
  switch (m.attention) {
    case AttentionKind::GQA:
      c.range("kv_heads", m.kv_heads, 1, m.heads);
      if (m.heads % m.kv_heads != 0)
        c.fail("kv_heads", "heads (" + std::to_string(m.heads) + ") must be a multiple of kv_heads (" +
                               std::to_string(m.kv_heads) + ")");
      break;
    case AttentionKind::MHA:
    case AttentionKind::MLA:
      if (m.kv_heads != m.heads)
        c.fail("kv_heads", std::string("must equal heads (") + std::to_string(m.heads) + ") for " +
                               to_string(m.attention) + " attention, got " + std::to_string(m.kv_heads));
      break;
  }
  if (mla) {
    c.range("q_lora_rank", m.q_lora_rank, 0, kMaxHidden);
    c.range("kv_lora_rank", m.kv_lora_rank, 1, kMaxHidden);
    c.range("qk_nope_head_dim", m.qk_nope_head_dim, 0, kMaxHeadDim);
    c.range("qk_rope_head_dim", m.qk_rope_head_dim, 0, kMaxHeadDim);
    if (m.qk_nope_head_dim + m.qk_rope_head_dim < 1)
      c.fail("qk_nope_head_dim", "qk_nope_head_dim + qk_rope_head_dim must be positive");
    c.range("v_head_dim", m.v_head_dim, 1, kMaxHeadDim);
    if (m.head_dim != m.v_head_dim)
      c.fail("head_dim", "must equal v_head_dim (" + std::to_string(m.v_head_dim) + ") for mla attention, got " +
                             std::to_string(m.head_dim));
  } else {
    c.range("head_dim", m.head_dim, 1, kMaxHeadDim);
    const std::string when = "unless attention is mla";
    c.zero_unless("q_lora_rank", m.q_lora_rank, false, when);
    c.zero_unless("kv_lora_rank", m.kv_lora_rank, false, when);
    c.zero_unless("qk_nope_head_dim", m.qk_nope_head_dim, false, when);
    c.zero_unless("qk_rope_head_dim", m.qk_rope_head_dim, false, when);
    c.zero_unless("v_head_dim", m.v_head_dim, false, when);
  }
  if (m.ffn_matrices != 2 && m.ffn_matrices != 3)
    c.fail("ffn_matrices", "must be 3 (gated: SwiGLU/GeGLU) or 2 (plain MLP), got " + std::to_string(m.ffn_matrices));
  c.range("dense_ffn", m.dense_ffn, 0, kMaxFfn);
  c.range("experts", m.experts, 0, kMaxExperts);

  for (std::size_t i = 0; i < m.dense_layers.size(); ++i) {
    const int l = m.dense_layers[i];
    const std::string field = "dense_layers/" + std::to_string(i);
    if (l < 0 || l >= m.layers)
      c.fail(field, "layer " + std::to_string(l) + " out of range [0, " + std::to_string(m.layers) + ")");
    if (i > 0 && l <= m.dense_layers[i - 1])
      c.fail(field, "layer " + std::to_string(l) + " is repeated or out of increasing order");
  }

  if (m.is_moe()) {
    if (m.top_k > m.experts)
      c.fail("top_k", "top_k (" + std::to_string(m.top_k) + ") exceeds experts (" + std::to_string(m.experts) + ")");
    c.range("top_k", m.top_k, 1, m.experts);
    c.range("expert_ffn", m.expert_ffn, 1, kMaxFfn);
    c.range("shared_experts", m.shared_experts, 0, kMaxShared);
    if (m.shared_experts > 0)
      c.range("shared_expert_ffn", m.shared_expert_ffn, 1, kMaxFfn);
    else
      c.zero_unless("shared_expert_ffn", m.shared_expert_ffn, false, "when shared_experts is 0");
    c.range("n_group", m.n_group, 1, m.experts);
    if (m.experts % m.n_group != 0)
      c.fail("n_group", "experts (" + std::to_string(m.experts) + ") must be a multiple of n_group (" +
                            std::to_string(m.n_group) + ")");
    c.range("topk_group", m.topk_group, 1, m.n_group);
    const std::int64_t reachable = std::int64_t{m.topk_group} * (m.experts / m.n_group);
    if (m.top_k > reachable)
      c.fail("top_k", "top_k (" + std::to_string(m.top_k) + ") exceeds the " + std::to_string(reachable) +
                          " experts reachable in topk_group (" + std::to_string(m.topk_group) + ") of n_group (" +
                          std::to_string(m.n_group) + ") groups");
    if (m.num_moe_layers() < 1) c.fail("dense_layers", "every layer is dense; a MoE model needs a MoE layer");
  } else {
    const std::string when = "for a dense model (experts = 0)";
    c.zero_unless("top_k", m.top_k, false, when);
    c.zero_unless("shared_experts", m.shared_experts, false, when);
    c.zero_unless("expert_ffn", m.expert_ffn, false, when);
    c.zero_unless("shared_expert_ffn", m.shared_expert_ffn, false, when);
    if (m.n_group != 1) c.fail("n_group", "must be 1 " + when);
    if (m.topk_group != 1) c.fail("topk_group", "must be 1 " + when);
    if (!m.dense_layers.empty() && static_cast<int>(m.dense_layers.size()) != m.layers)
      c.fail("dense_layers", "a dense model (experts = 0) has every layer dense; list all or none");
  }
  if (m.num_dense_layers() > 0 && m.dense_ffn < 1)
    c.fail("dense_ffn", "must be positive: the model has " + std::to_string(m.num_dense_layers()) + " dense layers");

  c.range("vocab", m.vocab, 1, kMaxVocab);
  c.range("max_positions", m.max_positions, 0, kMaxPositions);
  if (std::find(kWeightDtypes.begin(), kWeightDtypes.end(), m.weight_dtype) == kWeightDtypes.end())
    c.fail("weight_dtype", "unknown dtype \"" + m.weight_dtype + "\", expected one of: bf16, fp16, fp8, mxfp4");
  if (!std::isfinite(m.card_total_params) || m.card_total_params < 0)
    c.fail("card_total_params", "must be a non-negative number");
  if (!std::isfinite(m.card_active_params) || m.card_active_params < 0)
    c.fail("card_active_params", "must be a non-negative number");

  // Overflow guard: an upper estimate in long double before anyone sums in int64.
  const long double h = m.hidden, a = m.heads, f = m.ffn_matrices;
  const long double d = std::max({m.head_dim, m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim});
  const long double lora = static_cast<long double>(m.q_lora_rank) + m.kv_lora_rank + m.qk_rope_head_dim;
  const long double per_layer = 4.0L * h * a * d + lora * (h + 2.0L * a * d) + f * h * m.dense_ffn +
                                f * h * (static_cast<long double>(m.experts) * m.expert_ffn +
                                         static_cast<long double>(m.shared_experts) * m.shared_expert_ffn);
  const long double estimate = per_layer * m.layers + 2.0L * h * m.vocab;
  if (estimate > kMaxTotalParams)
    throw InputError(source, "", "about " + format_number(static_cast<double>(estimate)) +
                                     " parameters, more than the 1e15 limit; check the sizes");
}

// --- our JSON format --------------------------------------------------------------------------

namespace {

const std::set<std::string, std::less<>> kModelKeys = {
    "name", "comment", "layers", "hidden", "attention", "heads", "kv_heads", "head_dim", "q_lora_rank",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "ffn_matrices", "dense_ffn",
    "dense_layers", "first_dense_layers", "moe_layer_step", "experts", "top_k", "shared_experts", "expert_ffn",
    "shared_expert_ffn", "n_group", "topk_group", "vocab", "tied_embeddings", "max_positions", "weight_dtype",
    "card_total_params", "card_active_params", "card_active_excludes_embedding"};

const char* const kMlaKeys[] = {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"};
const char* const kMoeKeys[] = {"top_k", "shared_experts", "expert_ffn", "shared_expert_ffn", "n_group",
                                "topk_group", "dense_layers", "first_dense_layers", "moe_layer_step"};

// Wide read ranges: validate_model gives the precise message; these only keep values in int.
constexpr std::int64_t kIntLo = -1'000'000'000, kIntHi = 1'000'000'000;
constexpr std::int64_t kWideLo = -1'000'000'000'000, kWideHi = 1'000'000'000'000;

// "dir/deepseek-v3.json" → "deepseek-v3"; "embedded:workloads/models/x.json" → "x".
std::string stem_of(const std::string& source) {
  std::string s = source;
  if (auto slash = s.find_last_of("/:"); slash != std::string::npos) s = s.substr(slash + 1);
  if (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0) s.resize(s.size() - 5);
  return s;
}

// MoE iff layer ≥ first_dense and (layer + 1) % step == 0 (HF Qwen/Llama-4 convention).
std::vector<int> dense_layers_from(int layers, int first_dense, int step) {
  std::vector<int> out;
  for (int l = 0; l < layers; ++l)
    if (l < first_dense || (l + 1) % step != 0) out.push_back(l);
  return out;
}

}  // namespace

ModelSpec model_from_json(const json& j, const std::string& source) {
  JsonObject o(j, source);
  // Unknown keys first, so a typo ("hiden") is reported as such rather than as a missing key.
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kModelKeys.count(it.key())) o.fail(it.key(), "unknown key");

  auto int_of = [&](const char* key) { return static_cast<int>(o.integer(key, kIntLo, kIntHi)); };
  auto int_or = [&](const char* key, int fallback) {
    return static_cast<int>(o.integer_or(key, fallback, kIntLo, kIntHi));
  };

  ModelSpec m;
  m.name = o.name_or("name", stem_of(source));
  m.comment = o.string_or("comment", "");
  m.layers = int_of("layers");
  m.hidden = int_of("hidden");
  const std::string attn = o.choice("attention", {"mha", "gqa", "mla"});
  m.attention = attn == "mha" ? AttentionKind::MHA : attn == "mla" ? AttentionKind::MLA : AttentionKind::GQA;
  m.heads = int_of("heads");

  if (m.attention == AttentionKind::MLA) {
    m.kv_heads = int_or("kv_heads", m.heads);
    m.q_lora_rank = int_or("q_lora_rank", 0);
    m.kv_lora_rank = int_of("kv_lora_rank");
    m.qk_nope_head_dim = int_of("qk_nope_head_dim");
    m.qk_rope_head_dim = int_of("qk_rope_head_dim");
    m.v_head_dim = int_of("v_head_dim");
    m.head_dim = int_or("head_dim", m.v_head_dim);
  } else {
    for (const char* k : kMlaKeys)
      if (o.has(k)) o.fail(k, "only allowed with \"attention\": \"mla\"");
    m.kv_heads = m.attention == AttentionKind::GQA ? int_of("kv_heads") : int_or("kv_heads", m.heads);
    if (o.has("head_dim")) {
      m.head_dim = int_of("head_dim");
    } else if (m.heads > 0 && m.hidden % m.heads == 0) {
      m.head_dim = m.hidden / m.heads;
    } else {
      o.fail("head_dim", "missing, and hidden (" + std::to_string(m.hidden) + ") is not a multiple of heads (" +
                             std::to_string(m.heads) + ")");
    }
  }

  m.ffn_matrices = int_or("ffn_matrices", 3);
  m.dense_ffn = o.integer_or("dense_ffn", 0, kWideLo, kWideHi);
  m.experts = int_or("experts", 0);
  const bool sane_layers = m.layers > 0 && m.layers <= kMaxLayers;
  if (m.experts != 0) {
    m.top_k = int_of("top_k");
    m.expert_ffn = o.integer("expert_ffn", kWideLo, kWideHi);
    m.shared_experts = int_or("shared_experts", 0);
    if (m.shared_experts != 0)
      m.shared_expert_ffn = o.integer("shared_expert_ffn", kWideLo, kWideHi);
    else
      m.shared_expert_ffn = o.integer_or("shared_expert_ffn", 0, kWideLo, kWideHi);
    m.n_group = int_or("n_group", 1);
    m.topk_group = int_or("topk_group", 1);
    if (o.has("dense_layers")) {
      if (o.has("first_dense_layers") || o.has("moe_layer_step"))
        o.fail("dense_layers", "give either dense_layers or first_dense_layers / moe_layer_step, not both");
      for (std::int64_t l : o.integer_array("dense_layers", kIntLo, kIntHi)) m.dense_layers.push_back(static_cast<int>(l));
    } else {
      const int first = int_or("first_dense_layers", 0);
      const int step = int_or("moe_layer_step", 1);
      if (first < 0 || (sane_layers && first > m.layers))
        o.fail("first_dense_layers", "must be in [0, layers = " + std::to_string(m.layers) + "], got " + std::to_string(first));
      if (step < 1 || (sane_layers && step > m.layers))
        o.fail("moe_layer_step", "must be in [1, layers = " + std::to_string(m.layers) + "], got " + std::to_string(step));
      if (sane_layers) m.dense_layers = dense_layers_from(m.layers, first, step);
    }
  } else {
    for (const char* k : kMoeKeys)
      if (o.has(k)) o.fail(k, "only allowed for a MoE model (\"experts\" > 0)");
    if (sane_layers) m.dense_layers = dense_layers_from(m.layers, m.layers, 1);
  }

  m.vocab = int_of("vocab");
  m.tied_embeddings = o.boolean_or("tied_embeddings", false);
  m.max_positions = int_or("max_positions", 0);
  m.weight_dtype = o.string_or("weight_dtype", "bf16");
  m.card_total_params = o.number_or("card_total_params", 0, 0, 1e16);
  m.card_active_params = o.number_or("card_active_params", 0, 0, 1e16);
  m.card_active_excludes_embedding = o.boolean_or("card_active_excludes_embedding", false);
  o.finish();
  validate_model(m, source);
  return m;
}

json model_to_json(const ModelSpec& m) {
  json j;
  j["name"] = m.name;
  if (!m.comment.empty()) j["comment"] = m.comment;
  j["layers"] = m.layers;
  j["hidden"] = m.hidden;
  j["attention"] = to_string(m.attention);
  j["heads"] = m.heads;
  j["kv_heads"] = m.kv_heads;
  if (m.attention == AttentionKind::MLA) {
    j["q_lora_rank"] = m.q_lora_rank;
    j["kv_lora_rank"] = m.kv_lora_rank;
    j["qk_nope_head_dim"] = m.qk_nope_head_dim;
    j["qk_rope_head_dim"] = m.qk_rope_head_dim;
    j["v_head_dim"] = m.v_head_dim;
  } else {
    j["head_dim"] = m.head_dim;
  }
  j["ffn_matrices"] = m.ffn_matrices;
  if (m.dense_ffn > 0) j["dense_ffn"] = m.dense_ffn;
  if (m.is_moe()) {
    j["experts"] = m.experts;
    j["top_k"] = m.top_k;
    j["expert_ffn"] = m.expert_ffn;
    if (m.shared_experts > 0) {
      j["shared_experts"] = m.shared_experts;
      j["shared_expert_ffn"] = m.shared_expert_ffn;
    }
    j["n_group"] = m.n_group;
    j["topk_group"] = m.topk_group;
    // The compact layout when one describes the dense layers exactly, else the explicit list.
    int leading = 0;
    while (leading < m.layers && !m.is_moe_layer(leading)) ++leading;
    bool compact = false;
    for (int first : {0, leading}) {
      for (int step = 1; step <= std::min(m.layers, 16) && !compact; ++step) {
        if (dense_layers_from(m.layers, first, step) != m.dense_layers) continue;
        if (first > 0) j["first_dense_layers"] = first;
        if (step > 1) j["moe_layer_step"] = step;
        compact = true;
      }
      if (compact) break;
    }
    if (!compact) j["dense_layers"] = m.dense_layers;
  }
  j["vocab"] = m.vocab;
  j["tied_embeddings"] = m.tied_embeddings;
  if (m.max_positions > 0) j["max_positions"] = m.max_positions;
  j["weight_dtype"] = m.weight_dtype;
  if (m.card_total_params > 0) j["card_total_params"] = m.card_total_params;
  if (m.card_active_params > 0) j["card_active_params"] = m.card_active_params;
  if (m.card_active_excludes_embedding) j["card_active_excludes_embedding"] = true;
  return j;
}

// --- presets and load_model -------------------------------------------------------------------

const std::vector<ModelSpec>& model_presets() {
  static const std::vector<ModelSpec> presets = [] {
    std::vector<ModelSpec> out;
    for (const EmbeddedFile& f : embedded_files_under("workloads/models/")) {
      if (f.name.size() < 5 || f.name.substr(f.name.size() - 5) != ".json") continue;
      const std::string source = "embedded:" + std::string(f.name);
      out.push_back(model_from_json(parse_json(f.content, source), source));
    }
    std::sort(out.begin(), out.end(), [](const ModelSpec& a, const ModelSpec& b) { return a.name < b.name; });
    return out;
  }();
  return presets;
}

const ModelSpec* find_model_preset(const std::string& name) {
  for (const ModelSpec& m : model_presets())
    if (m.name == name) return &m;
  return nullptr;
}

bool is_hf_config(const json& j) { return j.is_object() && (j.contains("model_type") || j.contains("architectures")); }

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t k = 0; k <= b.size(); ++k) row[k] = k;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t k = 1; k <= b.size(); ++k) {
      const std::size_t up = row[k];
      row[k] = std::min({row[k] + 1, row[k - 1] + 1, diag + (a[i - 1] == b[k - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

[[noreturn]] void unknown_preset(const std::string& spec) {
  std::string known, closest;
  std::size_t best = 4;  // suggest only close matches
  for (const ModelSpec& m : model_presets()) {
    known += (known.empty() ? "" : ", ") + m.name;
    if (std::size_t d = edit_distance(spec, m.name); d < best) {
      best = d;
      closest = m.name;
    }
  }
  std::string reason = "unknown model preset";
  if (!closest.empty()) reason += " (did you mean " + closest + "?)";
  reason += "; known presets: " + known + "; or give the path of a model JSON file or a Hugging Face config.json";
  throw InputError(spec, "", reason);
}

}  // namespace

ModelSpec load_model(const std::string& spec) {
  if (spec.empty()) throw InputError("--model", "", "empty model spec; give a preset name or a file path");
  if (const ModelSpec* preset = find_model_preset(spec)) return *preset;
  std::error_code ec;
  const bool path_like = spec.find('/') != std::string::npos || spec.ends_with(".json") ||
                         std::filesystem::exists(spec, ec);
  if (!path_like) unknown_preset(spec);
  const std::string text = read_text_file(spec);
  const json j = parse_json(text, spec);
  if (is_hf_config(j)) return model_from_hf_config(j, spec);
  // What `models --show X --json FILE` writes: {"schema": "shardsim.model/1", "spec": {…}, "computed":
  // {…}}. Its spec is the model (the computed figures are derived again); it loads back as written.
  if (j.is_object() && j.contains("schema") && j["schema"] == "shardsim.model/1") {
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "schema" && it.key() != "spec" && it.key() != "computed")
        throw InputError(spec, "/" + it.key(), "unknown key (a shardsim.model/1 file holds schema, spec and computed)");
    if (!j.contains("spec")) throw InputError(spec, "/spec", "missing: the model itself");
    return model_from_json(j["spec"], spec);  // fields are named inside the spec
  }
  return model_from_json(j, spec);
}

}  // namespace shardsim
