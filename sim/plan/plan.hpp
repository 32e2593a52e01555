// sim/plan/plan.hpp — how a model is laid onto a cluster: parallelism degrees, per-operator sharding,
// rank mapping, engine settings and data types.
//
// Owns: Plan and its I/O (engine settings: sim/plan/engine.hpp) — JSON files (docs/plan-format.md), the compact degree string
// ("tp=2,dp=4,weights=fp8"), and `load_plan`, which accepts either (or "megatron", see
// sim/plan/megatron_rule.hpp). Semantic checks against a model and a cluster live in sim/plan_check.
//
// Degrees (all ≥ 1). A replica is pp × unit GPUs; the unit is one pipeline stage's GPUs.
//   unit = tp × attn_dp   (attention: tp-way head parallel, attn_dp-way data parallel inside it)
//   unit = ep × etp       (MoE: ep expert groups, each expert tensor-parallel over etp GPUs)
//   gpus = dp × pp × tp × attn_dp;  sp ∈ {1, tp} turns on sequence parallelism in the TP group.
// Defaults when a degree is not given: 1, except dp = the remaining factor of the GPU count, and
// ep / etp fill the unit (etp = unit / ep, i.e. experts tensor-parallel like Megatron's TP rule).
// Thread-safety: Plan is a value type.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "common/json_reader.hpp"
#include "sim/plan/dtype.hpp"
#include "sim/plan/engine.hpp"

namespace shardsim {

struct ModelSpec;
class Cluster;

struct Degrees {
  int dp = 1, tp = 1, pp = 1, ep = 1, etp = 1, attn_dp = 1, sp = 1;
  int unit() const { return tp * attn_dp; }
  int gpus() const { return dp * pp * tp * attn_dp; }
  bool operator==(const Degrees&) const = default;
};

// Operators whose sharding a plan chooses (one choice per operator type).
enum class Op { Qkv, AttnOut, Router, ExpertUp, ExpertDown, SharedExpert, DenseUp, DenseDown, Embed, LmHead };
inline constexpr int kNumOps = 10;
enum class Shard { Column, Row, Replicate, Vocab };

const char* to_string(Op op);
const char* to_string(Shard s);
// The choices allowed for `op`; the first is the Megatron default.
const std::vector<Shard>& allowed_shards(Op op);

// Dimensions of the rank mapping, listed fastest-varying first.
enum class MapDim { Tp, AttnDp, Pp, Dp };
const char* to_string(MapDim d);

struct Dtypes {
  Dtype weights = Dtype::BF16;
  Dtype activations = Dtype::BF16;
  Dtype kv = Dtype::BF16;
  // The type attention computes in, when the plan says so (key "attn"): fp8 — prefill and decode,
  // MLA included (TensorRT-LLM's FP8 context FMHA and FP8 generation MLA, SGLang's FP8 attention
  // on Blackwell), on an FP8 KV cache only — or bf16 (dequantising an FP8 cache). Unset: FP8 for
  // grouped-query/multi-head prefill on an FP8 cache, BF16 otherwise (attention_math()).
  std::optional<Dtype> attention;
  // The attention projections' weights (key "attn_weights"), when they differ from `weights`:
  // NVFP4 checkpoints of DeepSeek-R1 quantise the FFNs and experts and keep attention in BF16 or
  // FP8. Unset: `weights`.
  std::optional<Dtype> attention_weights;
  // The speculative draft head's weights (key "draft_weights": its projections, attention
  // included, and their GEMMs' math with the plan's activations), when they differ: TensorRT-LLM's
  // NVFP4 DeepSeek-R1 keeps its MTP layers in BF16. Unset: as the main model's layers.
  std::optional<Dtype> draft_weights;
  bool operator==(const Dtypes&) const = default;
  // The draft head's types: the plan's, or every projection in draft_weights.
  Dtypes draft() const {
    Dtypes d = *this;
    if (draft_weights) d.weights = *draft_weights, d.attention_weights = *draft_weights;
    return d;
  }
  // The attention projections' weight type, and the type their GEMMs run in (math() with it).
  Dtype attn_weights() const { return attention_weights.value_or(weights); }
  Dtype attn_projection_math() const {
    Dtypes d = *this;
    d.weights = attn_weights();
    return d.math();
  }
  // Prefill (`decode` false) or decode attention's math type under the rule above.
  Dtype attention_math(bool decode, bool mla) const {
    if (attention) return *attention;
    return !decode && kv == Dtype::FP8 && !mla ? Dtype::FP8 : Dtype::BF16;
  }
  // The type GEMMs run in: FP4 when weights and activations are both FP4 (W4A4: NVFP4 / MXFP4
  // block-scaled GEMMs; on a GPU without FP4 tensor cores they run at its FP8 rate, compute_cost);
  // FP8 when weights are 8-bit or narrower and activations FP8 or narrower (W8A8, W4A8: FP4
  // weights dequantised to FP8); otherwise BF16 (W8A16, W4A16: weights dequantised to BF16).
  Dtype math() const {
    bool narrow = weights == Dtype::FP8 || weights == Dtype::FP4;
    if (weights == Dtype::FP4 && activations == Dtype::FP4) return Dtype::FP4;
    return narrow && (activations == Dtype::FP8 || activations == Dtype::FP4) ? Dtype::FP8 : Dtype::BF16;
  }
  // "W8A8 (FP8 GEMMs)", "W8A16 (FP8 weights, BF16 GEMMs)", …
  std::string describe() const;
};

struct Plan {
  std::string name;                                   // e.g. "megatron", or the file name
  Degrees deg;
  std::array<Shard, kNumOps> sharding{};              // indexed by Op
  std::array<MapDim, 4> mapping{MapDim::Tp, MapDim::AttnDp, MapDim::Dp, MapDim::Pp};
  EngineSettings engine;                              // batch limits, KV budget, scheduler (sim/plan/engine.hpp)
  Dtypes dtypes;
  bool allow_cross_node_tp = false;                   // permit TP/ETP groups spanning NVLink domains
  // Redundant experts (EPLB, sim/step/expert_layout.hpp): extra expert slots per EP group, a
  // such that experts + N is a multiple of ep (each EP rank then holds (experts + N) / ep; 256 + 32
  // slots allow EP72); hot experts are replicated on
  // them from the routing's measured loads and their tokens split between the replicas.
  int redundant_experts = 0;
  // The cluster GPU of this plan's rank 0: 0, except for the pool of a disaggregated plan that
  // comes second (the decode pool after the prefill pool's GPUs, or the reverse: decode_first()).
  int first_gpu = 0;
  // Prefill/decode disaggregation (sim/serving/disaggregated.hpp): empty for a colocated plan;
  // otherwise this plan is the prefill pool and decode_pool[0] the decode pool, each with its own
  // degrees, engine, dtypes and experts, on GPUs [0, P) and [P, P + D) with P = deg.gpus() — or,
  // decode first, [D, D + P) and [0, D) (on a mixed cluster the order puts each pool on a GPU type).
  std::vector<Plan> decode_pool;

  Plan();                                             // Megatron default sharding
  Shard shard(Op op) const { return sharding[static_cast<int>(op)]; }
  bool disaggregated() const { return !decode_pool.empty(); }
  bool decode_first() const { return disaggregated() && first_gpu > 0; }
  const Plan& decode() const { return decode_pool.front(); }
  // The prefill pool alone (this plan without its decode pool).
  Plan prefill() const;
  // GPUs of the whole plan: both pools when disaggregated.
  int total_gpus() const { return deg.gpus() + (disaggregated() ? decode().deg.gpus() : 0); }
  bool operator==(const Plan&) const = default;
};

// A disaggregated plan of two pools; places the decode pool after the prefill pool's GPUs, or
// with `decode_first` before them.
Plan disaggregated_plan(Plan prefill, Plan decode, bool decode_first = false);

// What a plan takes from the model when the user does not say.
struct PlanDefaults {
  Dtypes dtypes;                 // weights in the model's native format (fp8 for DeepSeek-V3, …)
  int max_context = 8192;        // min(8192, the model's max positions)
};
PlanDefaults plan_defaults(const ModelSpec& model);
// A plan with everything at its default for `model` (Megatron sharding, default batching, the
// model's dtypes and max_context); degrees all 1. The search's base plan.
Plan default_plan(const ModelSpec& model);
// Default dtypes for a model: weights in the model's native format when it is fp8 / mxfp4, and
// FP8 activations (W8A8) with native FP8 weights.
Dtypes default_dtypes(const ModelSpec& model);

// Parses the compact string. A disaggregated plan is written "prefill:<plan>/decode:<plan>": the
// prefill pool's dp defaults to 1, the decode pool's to the GPUs left over. `gpus` resolves dp (and ep/etp); `defaults` fills unset dtypes and
// max_context. Throws InputError(source = the string, field = the key, reason).
Plan plan_from_string(const std::string& text, int gpus, const PlanDefaults& defaults);
// Reads a plan JSON object (docs/plan-format.md); same defaulting rules. A disaggregated plan is
// {"name": …, "prefill": {plan}, "decode": {plan}}.
Plan plan_from_json(const json& j, const std::string& source, int gpus, const PlanDefaults& defaults);
json plan_to_json(const Plan& p);
// The compact string of a plan (degrees ≠ 1 and non-default choices), e.g. "dp=2,tp=4,ep=4".
std::string plan_to_string(const Plan& p);
// The same, as a reader of `model` needs it: for a dense model without what only experts use
// (ep, etp, the router's and experts' sharding, redundant experts). Read back, the string gives
// a plan that serves the dense model alike.
std::string plan_to_string(const Plan& p, const ModelSpec& model);

// `spec` is a path to a plan JSON file, a compact string, or "megatron". The result is not yet
// checked against the model/cluster beyond the GPU count — see check_plan().
Plan load_plan(const std::string& spec, const ModelSpec& model, const Cluster& cluster);

}  // namespace shardsim
