// sim/plan/plan.cpp — Plan defaults, the compact string, JSON I/O and load_plan.
#include "sim/plan/plan.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "common/embedded.hpp"
#include "common/display_text.hpp"
#include "common/input_error.hpp"
#include "common/text_number.hpp"
#include "sim/plan/megatron_rule.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

namespace shardsim {

namespace {

constexpr std::array<const char*, kNumOps> kOpNames = {"qkv",          "attn_out",  "router",     "expert_up",
                                                       "expert_down",  "shared_expert", "dense_up", "dense_down",
                                                       "embed",        "lm_head"};
constexpr int kMaxDegree = 1 << 16;
constexpr int kMaxRedundantExperts = 1 << 16;  // per EP group; check_plan bounds it by the model

// Degrees as read: unset ones are resolved by resolve_degrees.
struct PartialDegrees {
  std::optional<int> dp, tp, pp, ep, etp, attn_dp, sp;
};

std::optional<int>* degree_slot(PartialDegrees& d, std::string_view key) {
  if (key == "dp") return &d.dp;
  if (key == "tp") return &d.tp;
  if (key == "pp") return &d.pp;
  if (key == "ep") return &d.ep;
  if (key == "etp") return &d.etp;
  if (key == "attn_dp") return &d.attn_dp;
  if (key == "sp") return &d.sp;
  return nullptr;
}

// Refuses degrees whose products no cluster can hold (and that would overflow int downstream):
// GPUs per replica and in all, and the expert grid. Consistency with the cluster is check_plan's.
void check_degree_products(const PartialDegrees& p, const std::string& source) {
  auto v = [](const std::optional<int>& x) { return static_cast<long long>(x.value_or(1)); };
  const long long replica = v(p.tp) * v(p.attn_dp) * v(p.pp);
  const long long limit = kMaxClusterGpus;
  auto refuse = [&](const char* field, const std::string& what, long long n) {
    throw InputError(source, field,
                     what + " = " + std::to_string(n) + " GPUs, more than the largest cluster (" + std::to_string(limit) + ")");
  };
  if (replica > limit) refuse("degrees", "tp × attn_dp × pp", replica);
  if (replica * v(p.dp) > limit) refuse("degrees", "tp × attn_dp × pp × dp", replica * v(p.dp));
  if (v(p.ep) * v(p.etp) > limit) refuse("degrees", "ep × etp", v(p.ep) * v(p.etp));
}

// Fills unset degrees (see plan.hpp). Never throws: inconsistent products are left for
// check_plan to explain.
Degrees resolve_degrees(const PartialDegrees& p, int gpus) {
  Degrees d;
  d.tp = p.tp.value_or(1);
  d.pp = p.pp.value_or(1);
  d.attn_dp = p.attn_dp.value_or(1);
  d.sp = p.sp.value_or(1);
  int per_replica = d.tp * d.pp * d.attn_dp;
  d.dp = p.dp.value_or(std::max(1, gpus / per_replica));
  int unit = d.unit();
  if (p.ep && p.etp) {
    d.ep = *p.ep;
    d.etp = *p.etp;
  } else if (p.ep) {
    d.ep = *p.ep;
    d.etp = std::max(1, unit / d.ep);
  } else if (p.etp) {
    d.etp = *p.etp;
    d.ep = std::max(1, unit / d.etp);
  } else {
    d.ep = 1;
    d.etp = unit;
  }
  return d;
}

std::optional<Shard> parse_shard(std::string_view s) {
  if (s == "column") return Shard::Column;
  if (s == "row") return Shard::Row;
  if (s == "replicate") return Shard::Replicate;
  if (s == "vocab") return Shard::Vocab;
  return std::nullopt;
}

std::optional<MapDim> parse_map_dim(std::string_view s) {
  if (s == "tp") return MapDim::Tp;
  if (s == "attn_dp") return MapDim::AttnDp;
  if (s == "pp") return MapDim::Pp;
  if (s == "dp") return MapDim::Dp;
  return std::nullopt;
}

std::string allowed_list(Op op) {
  std::string s;
  for (Shard c : allowed_shards(op)) s += std::string(s.empty() ? "" : ", ") + to_string(c);
  return s;
}

// Sets op's sharding from text, or throws naming `field`.
void set_shard(Plan& plan, Op op, std::string_view value, const std::string& source, const std::string& field) {
  auto s = parse_shard(value);
  bool ok = false;
  if (s)
    for (Shard c : allowed_shards(op)) ok |= (c == *s);
  if (!ok)
    throw InputError(source, field,
                     "\"" + std::string(value) + "\" is not a sharding of " + to_string(op) + " (expected one of: " +
                         allowed_list(op) + ")");
  plan.sharding[static_cast<int>(op)] = *s;
}

std::array<MapDim, 4> parse_mapping(const std::vector<std::string>& names, const std::string& source,
                                    const std::string& field) {
  std::array<MapDim, 4> out{};
  if (names.size() != 4)
    throw InputError(source, field, "expected the 4 dimensions tp, attn_dp, pp, dp in some order, fastest first");
  std::array<bool, 4> seen{};
  for (std::size_t i = 0; i < 4; ++i) {
    auto d = parse_map_dim(names[i]);
    if (!d) throw InputError(source, field, "unknown dimension \"" + names[i] + "\" (expected tp, attn_dp, pp, dp)");
    if (seen[static_cast<int>(*d)]) throw InputError(source, field, "dimension \"" + names[i] + "\" listed twice");
    seen[static_cast<int>(*d)] = true;
    out[i] = *d;
  }
  return out;
}

Dtype parse_dtype_or_throw(std::string_view v, const std::string& source, const std::string& field) {
  auto d = parse_dtype(v);
  if (!d) throw InputError(source, field, "unknown data type \"" + std::string(v) + "\" (expected bf16, fp16, fp8, fp4)");
  return *d;
}

// Attention computes in bf16 or fp8 (no FP4 attention kernel is published).
Dtype parse_attention_dtype(const std::string& v, const std::string& source, const std::string& field) {
  const Dtype d = parse_dtype_or_throw(v, source, field);
  if (d != Dtype::BF16 && d != Dtype::FP8)
    throw InputError(source, field, "attention computes in bf16 or fp8, not \"" + v + "\"");
  return d;
}

int parse_positive_int(const std::string& v, const std::string& source, const std::string& field, int hi) {
  return static_cast<int>(parse_int_in(v, source, field, 1, hi));
}

}  // namespace

std::string Dtypes::describe() const {
  auto up = [](Dtype d) {
    std::string n = to_string(d);
    for (auto& c : n) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return n;
  };
  int wbits = weights == Dtype::FP4 ? 4 : weights == Dtype::FP8 ? 8 : 16;
  int abits = activations == Dtype::FP8 ? 8 : activations == Dtype::FP4 ? 4 : 16;
  std::string s = "W";  // appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "W" + to_string(…)
  s += std::to_string(wbits);
  s += 'A';
  s += std::to_string(abits);
  s += " (";
  if (math() == Dtype::FP4) s += "FP4 block-scaled GEMMs";
  else if (math() == Dtype::FP8) s += wbits < 8 ? "FP4 weights dequantised, GEMMs in FP8" : "FP8 GEMMs";
  else if (wbits < 16) s += up(weights) + " weights dequantised, GEMMs in BF16";
  else s += "BF16 GEMMs";
  if (activations == Dtype::FP8 && math() == Dtype::BF16) s += "; FP8 activations buy nothing without FP8 weights";
  if (activations == Dtype::FP4 && math() != Dtype::FP4) s += "; FP4 activations buy nothing without FP4 weights";
  if (attention_weights && *attention_weights != weights)
    s += ", attention projections " + up(*attention_weights) + (attn_projection_math() == Dtype::BF16 ? " in BF16" : "");
  if (attention) s += ", " + up(*attention) + " attention";
  if (draft_weights && *draft_weights != weights) s += ", draft head " + up(*draft_weights);
  return s + ", " + up(kv) + " KV cache)";
}

const char* to_string(Op op) { return kOpNames[static_cast<int>(op)]; }

const char* to_string(Shard s) {
  switch (s) {
    case Shard::Column: return "column";
    case Shard::Row: return "row";
    case Shard::Replicate: return "replicate";
    case Shard::Vocab: return "vocab";
  }
  return "?";
}

const char* to_string(MapDim d) {
  switch (d) {
    case MapDim::Tp: return "tp";
    case MapDim::AttnDp: return "attn_dp";
    case MapDim::Pp: return "pp";
    case MapDim::Dp: return "dp";
  }
  return "?";
}

const std::vector<Shard>& allowed_shards(Op op) {
  static const std::vector<Shard> col = {Shard::Column, Shard::Row, Shard::Replicate};
  static const std::vector<Shard> row = {Shard::Row, Shard::Column, Shard::Replicate};
  static const std::vector<Shard> qkv = {Shard::Column, Shard::Replicate};
  static const std::vector<Shard> router = {Shard::Replicate, Shard::Column};
  static const std::vector<Shard> shared = {Shard::Column, Shard::Replicate};
  static const std::vector<Shard> vocab = {Shard::Vocab, Shard::Column, Shard::Replicate};
  static const std::vector<Shard> head = {Shard::Vocab, Shard::Replicate};
  switch (op) {
    case Op::Qkv: return qkv;
    case Op::AttnOut: return row;
    case Op::Router: return router;
    case Op::ExpertUp: return col;
    case Op::ExpertDown: return row;
    case Op::SharedExpert: return shared;
    case Op::DenseUp: return col;
    case Op::DenseDown: return row;
    case Op::Embed: return vocab;
    case Op::LmHead: return head;
  }
  return col;
}

Plan::Plan() {
  for (int i = 0; i < kNumOps; ++i) sharding[i] = allowed_shards(static_cast<Op>(i)).front();
}

Dtypes default_dtypes(const ModelSpec& model) {
  Dtypes d;
  if (auto w = parse_dtype(model.weight_dtype)) d.weights = *w;
  // Natively FP8 checkpoints (DeepSeek-V3, Kimi-K2) are served W8A8: activations quantised per
  // token group, GEMMs in FP8 (DeepGEMM; SGLang, vLLM and TensorRT-LLM all run them so).
  if (d.weights == Dtype::FP8) d.activations = Dtype::FP8;
  return d;
}

Plan default_plan(const ModelSpec& model) {
  Plan p;
  const PlanDefaults d = plan_defaults(model);
  p.dtypes = d.dtypes;
  p.engine.max_context = d.max_context;
  return p;
}

PlanDefaults plan_defaults(const ModelSpec& model) {
  PlanDefaults d;
  d.dtypes = default_dtypes(model);
  if (model.max_positions > 0) d.max_context = std::min(d.max_context, model.max_positions);
  return d;
}

namespace {

Plan pool_from_string(const std::string& text, int gpus, const PlanDefaults& defaults) {
  Plan plan;
  plan.name = text;
  plan.dtypes = defaults.dtypes;
  plan.engine.max_context = defaults.max_context;
  PartialDegrees partial;
  const std::string& src = text;
  // The engine preset first, so that the overrides written anywhere in the string apply to it.
  if (!text.empty() && (text.front() == ',' || text.back() == ',' || text.find(",,") != std::string::npos))
    throw InputError(src, "", "an empty item (a stray comma)");
  std::vector<std::string> items;
  {
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) items.push_back(item);
    std::stable_partition(items.begin(), items.end(), [](const std::string& i) { return i.rfind("engine=", 0) == 0; });
  }
  std::map<std::string, bool> seen;
  for (const std::string& item : items) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos) throw InputError(src, item, "expected key=value");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (seen[key]) throw InputError(src, key, "given twice");
    seen[key] = true;
    if (auto* slot = degree_slot(partial, key)) {
      *slot = parse_positive_int(value, src, key, kMaxDegree);
    } else if (key == "weights") {
      plan.dtypes.weights = parse_dtype_or_throw(value, src, key);
    } else if (key == "act" || key == "activations") {
      plan.dtypes.activations = parse_dtype_or_throw(value, src, key);
    } else if (key == "kv") {
      plan.dtypes.kv = parse_dtype_or_throw(value, src, key);
    } else if (key == "attn" || key == "attention") {
      plan.dtypes.attention = parse_attention_dtype(value, src, key);
    } else if (key == "attn_weights") {
      plan.dtypes.attention_weights = parse_dtype_or_throw(value, src, key);
    } else if (key == "draft_weights") {
      plan.dtypes.draft_weights = parse_dtype_or_throw(value, src, key);
    } else if (set_engine_key(plan.engine, key, value, src)) {
    } else if (key == "mapping") {
      std::vector<std::string> names;
      std::stringstream ms(value);
      std::string n;
      while (std::getline(ms, n, '.')) names.push_back(n);
      plan.mapping = parse_mapping(names, src, key);
    } else if (key == "allow_cross_node_tp") {
      if (value != "0" && value != "1") throw InputError(src, key, "expected 0 or 1");
      plan.allow_cross_node_tp = value == "1";
    } else if (key == "cross_node_tp") {
      throw InputError(src, key, "renamed: allow_cross_node_tp=1 (the same name as in plan JSON)");
    } else if (key == "redundant_experts") {
      plan.redundant_experts = value == "0" ? 0 : parse_positive_int(value, src, key, kMaxRedundantExperts);
    } else {
      bool found = false;
      for (int i = 0; i < kNumOps && !found; ++i)
        if (key == kOpNames[i]) {
          set_shard(plan, static_cast<Op>(i), value, src, key);
          found = true;
        }
      if (!found)
        throw InputError(src, key,
                         std::string("unknown plan key (expected a degree dp/tp/pp/ep/etp/attn_dp/sp, weights/act/kv, an "
                                     "operator such as qkv, mapping, allow_cross_node_tp, redundant_experts, or an engine setting: ") +
                             engine_key_list() + ")");
    }
  }
  follow_user_settings(plan.engine, seen.count("prefill_chunk") > 0);
  check_degree_products(partial, src);
  plan.deg = resolve_degrees(partial, gpus);
  return plan;
}

// The decode pool's dp default: the GPUs the prefill pool leaves (at least one replica).
int gpus_left(int gpus, const Plan& prefill) { return std::max(0, gpus - prefill.deg.gpus()); }

}  // namespace

Plan plan_from_string(const std::string& text, int gpus, const PlanDefaults& defaults) {
  static const std::string kPrefill = "prefill:", kDecode = "/decode:";
  if (static const std::string kDecodeFirst = "decode:", kThenPrefill = "/prefill:"; text.rfind(kDecodeFirst, 0) == 0) {
    // decode:<plan>/prefill:<plan>: the same two pools, the decode pool on the first GPUs.
    const std::size_t at = text.find(kThenPrefill);
    if (at == std::string::npos)
      throw InputError(text, "prefill", "a plan that starts with \"decode:<plan>\" needs \"/prefill:<plan>\" after it");
    Plan decode = pool_from_string(text.substr(kDecodeFirst.size(), at - kDecodeFirst.size()), 0, defaults);
    Plan prefill = pool_from_string(text.substr(at + kThenPrefill.size()), gpus_left(gpus, decode), defaults);
    Plan plan = disaggregated_plan(std::move(prefill), std::move(decode), true);
    plan.name = text;
    return plan;
  }
  const std::size_t cut = text.find(kDecode);
  const bool prefixed = text.rfind(kPrefill, 0) == 0;
  if (!prefixed && cut == std::string::npos) return pool_from_string(text, gpus, defaults);
  if (!prefixed) throw InputError(text, "prefill", "a disaggregated plan starts with \"prefill:<plan>\" before \"/decode:<plan>\"");
  if (cut == std::string::npos)
    throw InputError(text, "decode", "a disaggregated plan needs \"/decode:<plan>\" after its prefill pool");
  Plan prefill = pool_from_string(text.substr(kPrefill.size(), cut - kPrefill.size()), 0, defaults);
  Plan decode = pool_from_string(text.substr(cut + kDecode.size()), gpus_left(gpus, prefill), defaults);
  Plan plan = disaggregated_plan(std::move(prefill), std::move(decode));
  plan.name = text;
  return plan;
}

namespace {

Plan pool_from_json(JsonObject& root, const std::string& source, int gpus, const PlanDefaults& defaults) {
  Plan plan;
  plan.name = root.name_or("name", std::filesystem::path(source).filename().string());
  plan.dtypes = defaults.dtypes;
  plan.engine.max_context = defaults.max_context;
  PartialDegrees partial;
  if (root.has("degrees")) {
    JsonObject d = root.object("degrees");
    for (const char* key : {"dp", "tp", "pp", "ep", "etp", "attn_dp", "sp"})
      if (d.has(key)) *degree_slot(partial, key) = static_cast<int>(d.integer(key, 1, kMaxDegree));
    d.finish();
  } else {
    root.fail("degrees", "missing, expected an object such as {\"tp\": 8, \"dp\": 2}");
  }
  if (root.has("sharding")) {
    JsonObject s = root.object("sharding");
    for (int i = 0; i < kNumOps; ++i)
      if (s.has(kOpNames[i])) set_shard(plan, static_cast<Op>(i), s.string(kOpNames[i]), source, s.pointer(kOpNames[i]));
    s.finish();
  }
  if (root.has("mapping")) {
    const json& m = root.raw("mapping");
    std::vector<std::string> names;
    if (!m.is_array()) root.fail("mapping", "expected an array such as [\"tp\", \"attn_dp\", \"dp\", \"pp\"]");
    for (const auto& e : m) {
      if (!e.is_string()) root.fail("mapping", "expected an array of strings");
      names.push_back(e.get<std::string>());
    }
    plan.mapping = parse_mapping(names, source, root.pointer("mapping"));
  }
  if (root.has("engine")) engine_from_json(plan.engine, root.object("engine"));
  if (root.has("dtypes")) {
    JsonObject d = root.object("dtypes");
    for (auto [key, slot] : {std::pair{"weights", &plan.dtypes.weights}, std::pair{"activations", &plan.dtypes.activations},
                             std::pair{"kv", &plan.dtypes.kv}})
      if (d.has(key)) *slot = parse_dtype_or_throw(d.string(key), source, d.pointer(key));
    if (d.has("attention")) plan.dtypes.attention = parse_attention_dtype(d.string("attention"), source, d.pointer("attention"));
    if (d.has("attention_weights"))
      plan.dtypes.attention_weights = parse_dtype_or_throw(d.string("attention_weights"), source, d.pointer("attention_weights"));
    if (d.has("draft_weights"))
      plan.dtypes.draft_weights = parse_dtype_or_throw(d.string("draft_weights"), source, d.pointer("draft_weights"));
    d.finish();
  }
  plan.allow_cross_node_tp = root.boolean_or("allow_cross_node_tp", false);
  plan.redundant_experts = static_cast<int>(root.integer_or("redundant_experts", 0, 0, kMaxRedundantExperts));
  root.finish();
  check_degree_products(partial, source);
  plan.deg = resolve_degrees(partial, gpus);
  return plan;
}

}  // namespace

Plan plan_from_json(const json& j, const std::string& source, int gpus, const PlanDefaults& defaults) {
  JsonObject root(j, source);
  if (!root.has("prefill") && !root.has("decode")) return pool_from_json(root, source, gpus, defaults);
  if (!root.has("prefill")) root.fail("prefill", "missing: a plan with a \"decode\" pool needs a \"prefill\" pool too");
  if (!root.has("decode")) root.fail("decode", "missing: a plan with a \"prefill\" pool needs a \"decode\" pool too");
  const std::string name = root.name_or("name", std::filesystem::path(source).filename().string());
  // "first_pool": which pool takes the first GPUs (default "prefill"); the other pool's dp
  // defaults to the GPUs left.
  const bool decode_first = root.choice_or("first_pool", "prefill", {"prefill", "decode"}) == "decode";
  JsonObject p = root.object("prefill");
  JsonObject d = root.object("decode");
  Plan first = pool_from_json(decode_first ? d : p, source, 0, defaults);
  Plan second = pool_from_json(decode_first ? p : d, source, gpus_left(gpus, first), defaults);
  root.finish();
  Plan plan = decode_first ? disaggregated_plan(std::move(second), std::move(first), true)
                           : disaggregated_plan(std::move(first), std::move(second));
  plan.name = name;
  return plan;
}

Plan Plan::prefill() const {
  Plan p = *this;
  p.decode_pool.clear();
  return p;
}

Plan disaggregated_plan(Plan prefill, Plan decode, bool decode_first) {
  prefill.decode_pool.clear();
  prefill.first_gpu = decode_first ? decode.deg.gpus() : 0;
  decode.decode_pool.clear();
  decode.first_gpu = decode_first ? 0 : prefill.deg.gpus();
  decode.name.clear();  // the plan's name is the prefill pool's (the whole plan's)
  prefill.decode_pool.push_back(std::move(decode));
  return prefill;
}

json plan_to_json(const Plan& p) {
  // A name the loader would refuse (empty: a plan from an empty string) is left out: the file's
  // name stands in when it is read back.
  const bool named = name_problem(p.name).empty();
  if (p.disaggregated()) {
    json j;
    if (named) j["name"] = p.name;
    if (p.decode_first()) j["first_pool"] = "decode";
    j["prefill"] = plan_to_json(p.prefill());
    j["decode"] = plan_to_json(p.decode());
    j["prefill"].erase("name");
    j["decode"].erase("name");
    return j;
  }
  json j;
  if (named) j["name"] = p.name;
  j["degrees"] = {{"dp", p.deg.dp}, {"tp", p.deg.tp},   {"pp", p.deg.pp}, {"ep", p.deg.ep},
                  {"etp", p.deg.etp}, {"attn_dp", p.deg.attn_dp}, {"sp", p.deg.sp}};
  json s = json::object();
  for (int i = 0; i < kNumOps; ++i) s[kOpNames[i]] = to_string(p.sharding[i]);
  j["sharding"] = s;
  json m = json::array();
  for (MapDim d : p.mapping) m.push_back(to_string(d));
  j["mapping"] = m;
  j["engine"] = engine_to_json(p.engine);
  j["dtypes"] = {{"weights", to_string(p.dtypes.weights)},
                 {"activations", to_string(p.dtypes.activations)},
                 {"kv", to_string(p.dtypes.kv)}};
  if (p.dtypes.attention) j["dtypes"]["attention"] = to_string(*p.dtypes.attention);
  if (p.dtypes.attention_weights) j["dtypes"]["attention_weights"] = to_string(*p.dtypes.attention_weights);
  if (p.dtypes.draft_weights) j["dtypes"]["draft_weights"] = to_string(*p.dtypes.draft_weights);
  j["allow_cross_node_tp"] = p.allow_cross_node_tp;
  if (p.redundant_experts > 0) j["redundant_experts"] = p.redundant_experts;
  return j;
}

namespace {

// plan_to_string's text; `experts` = false leaves out what only a MoE model uses.
std::string plan_text(const Plan& p, bool experts) {
  if (p.decode_first()) return "decode:" + plan_text(p.decode(), experts) + "/prefill:" + plan_text(p.prefill(), experts);
  if (p.disaggregated()) return "prefill:" + plan_text(p.prefill(), experts) + "/decode:" + plan_text(p.decode(), experts);
  std::string s;
  auto add = [&](const std::string& k, const std::string& v) { s += (s.empty() ? "" : ",") + k + "=" + v; };
  add("dp", std::to_string(p.deg.dp));
  for (auto [k, v] : {std::pair{"tp", p.deg.tp}, {"pp", p.deg.pp}, {"attn_dp", p.deg.attn_dp}, {"ep", p.deg.ep},
                      {"etp", p.deg.etp}, {"sp", p.deg.sp}}) {
    const bool expert_only = std::string_view(k) == "ep" || std::string_view(k) == "etp";
    if (v != 1 && (experts || !expert_only)) add(k, std::to_string(v));
  }
  Plan def;
  for (int i = 0; i < kNumOps; ++i) {
    const bool expert_only = i == static_cast<int>(Op::Router) || i == static_cast<int>(Op::ExpertUp) ||
                             i == static_cast<int>(Op::ExpertDown) || i == static_cast<int>(Op::SharedExpert);
    if (p.sharding[i] != def.sharding[i] && (experts || !expert_only)) add(kOpNames[i], to_string(p.sharding[i]));
  }
  add("weights", to_string(p.dtypes.weights));
  if (p.dtypes.activations != Dtype::BF16) add("act", to_string(p.dtypes.activations));
  if (p.dtypes.kv != Dtype::BF16) add("kv", to_string(p.dtypes.kv));
  if (p.dtypes.attention) add("attn", to_string(*p.dtypes.attention));
  if (p.dtypes.attention_weights) add("attn_weights", to_string(*p.dtypes.attention_weights));
  if (p.dtypes.draft_weights) add("draft_weights", to_string(*p.dtypes.draft_weights));
  if (p.mapping != def.mapping) {
    std::string m;
    for (MapDim d : p.mapping) {
      if (!m.empty()) m += '.';
      m += to_string(d);
    }
    add("mapping", m);
  }
  if (p.allow_cross_node_tp) add("allow_cross_node_tp", "1");
  if (p.redundant_experts > 0 && experts) add("redundant_experts", std::to_string(p.redundant_experts));
  std::string e = engine_to_string(p.engine);
  if (!e.empty()) s += "," + e;
  return s;
}

}  // namespace

std::string plan_to_string(const Plan& p) { return plan_text(p, true); }

std::string plan_to_string(const Plan& p, const ModelSpec& model) { return plan_text(p, model.is_moe()); }

Plan load_plan(const std::string& spec, const ModelSpec& model, const Cluster& cluster) {
  if (spec == "megatron") return megatron_plan(model, cluster);
  bool looks_like_file = spec.find('=') == std::string::npos;
  if (looks_like_file) {
    std::string text = read_text_file(spec);
    return plan_from_json(parse_json(text, spec), spec, cluster.num_gpus(), plan_defaults(model));
  }
  return plan_from_string(spec, cluster.num_gpus(), plan_defaults(model));
}

}  // namespace shardsim
