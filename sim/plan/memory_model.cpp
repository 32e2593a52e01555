// sim/plan/memory_model.cpp — weights, KV, activations and buffers per GPU; the fit verdict.
#include "sim/plan/memory_model.hpp"

#include <algorithm>
#include <cmath>

#include "sim/plan/plan_layout.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

namespace shardsim {

namespace {

double split(double elems, Shard s, int ways) { return s == Shard::Replicate ? elems : elems / std::max(ways, 1); }

constexpr double kNcclBuffers = 0.5 * 1024 * 1024 * 1024;  // per-GPU communicator buffers when any group > 1

// A layer's parameters other than its attention projections (held in the plan's weight type).
double non_attention(const LayerWeights& lw) { return lw.norms + lw.dense_ffn + lw.routed_experts + lw.shared_experts + lw.router; }

}  // namespace

double usable_bytes(const EngineSettings& e, double hbm, double static_bytes) {
  if (e.kv_budget == KvBudget::FreeFraction) return static_bytes + e.kv_fraction * std::max(0.0, hbm - static_bytes);
  return e.kv_fraction * hbm;
}

LayerWeights layer_weights_per_gpu(const Plan& plan, const ModelSpec& m, bool moe_layer) {
  const Degrees& d = plan.deg;
  const double h = m.hidden;
  LayerWeights w;
  Shard qkv = plan.shard(Op::Qkv), out = plan.shard(Op::AttnOut);
  if (m.attention == AttentionKind::MLA) {
    const double qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    double q_rep = 0, q_shard = 0;
    if (m.q_lora_rank > 0) {
      q_rep = h * m.q_lora_rank + m.q_lora_rank;  // q_a + its norm: replicated (not sharded in practice)
      q_shard = static_cast<double>(m.q_lora_rank) * m.heads * qk;
    } else {
      q_shard = h * m.heads * qk;
    }
    double kv_rep = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank;
    double kv_shard = static_cast<double>(m.kv_lora_rank) * m.heads * (m.qk_nope_head_dim + m.v_head_dim);
    double o = static_cast<double>(m.heads) * m.v_head_dim * h;
    w.attention = q_rep + kv_rep + split(q_shard + kv_shard, qkv, d.tp) + split(o, out, d.tp);
  } else {
    double q = h * m.heads * m.head_dim;
    double kv = 2.0 * h * m.kv_heads * m.head_dim;
    double o = static_cast<double>(m.heads) * m.head_dim * h;
    int kv_ways = std::min(d.tp, std::max(m.kv_heads, 1));  // tp > kv_heads replicates kv heads
    w.attention = split(q, qkv, d.tp) + split(kv, qkv, kv_ways) + split(o, out, d.tp);
  }
  w.norms = 2.0 * h;
  const double up_frac = (m.ffn_matrices - 1.0) / m.ffn_matrices, down_frac = 1.0 / m.ffn_matrices;
  if (!moe_layer) {
    double ffn = static_cast<double>(m.ffn_matrices) * h * static_cast<double>(m.dense_ffn);
    w.dense_ffn = split(ffn * up_frac, plan.shard(Op::DenseUp), d.tp) + split(ffn * down_frac, plan.shard(Op::DenseDown), d.tp);
    return w;
  }
  double one = static_cast<double>(m.ffn_matrices) * h * static_cast<double>(m.expert_ffn);
  // Expert slots per EP rank: the routed experts plus the plan's redundant copies (EPLB).
  double local_experts = std::ceil(static_cast<double>(m.experts + plan.redundant_experts) / std::max(d.ep, 1));
  w.routed_experts = local_experts * (split(one * up_frac, plan.shard(Op::ExpertUp), d.etp) +
                                      split(one * down_frac, plan.shard(Op::ExpertDown), d.etp));
  double shared = static_cast<double>(m.shared_experts) * m.ffn_matrices * h * static_cast<double>(m.shared_expert_ffn);
  w.shared_experts = split(shared, plan.shard(Op::SharedExpert), d.tp);
  w.router = split(h * m.experts, plan.shard(Op::Router), d.tp);
  return w;
}

double kv_elems_per_gpu(const Plan& plan, const ModelSpec& m) {
  double per_layer = static_cast<double>(m.kv_elems_per_token_layer());
  if (m.attention == AttentionKind::MLA || plan.shard(Op::Qkv) == Shard::Replicate) return per_layer;
  int ways = std::min(plan.deg.tp, std::max(m.kv_heads, 1));
  return per_layer / ways;
}

MemoryReport plan_memory(const Plan& plan, const ModelSpec& m, const Cluster& cluster) {
  const Degrees& d = plan.deg;
  MemoryReport r;
  r.hbm = cluster.pool_gpu(plan.first_gpu).hbm_bytes;  // the pool's GPU type
  const double wb = bytes_of(plan.dtypes.weights), ab = bytes_of(plan.dtypes.activations),
               kb = bytes_of(plan.dtypes.kv);
  const double h = m.hidden;
  // A step's tokens in the whole engine and in one attention-DP rank (engine.hpp, rank_limits).
  const double tokens = static_cast<double>(engine_tokens(plan.engine, d.attn_dp));
  const double t_attn = tokens_per_group(plan.engine, d.attn_dp);
  const double kv_layer = kv_elems_per_gpu(plan, m) * kb;

  // Activations of one layer: residual + normed input, q/k/v/out, and the FFN or expert
  // intermediates of the tokens this GPU processes (experts: top_k copies spread over ep ranks).
  double q_width = m.attention == AttentionKind::MLA
                       ? static_cast<double>(m.heads) * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
                       : static_cast<double>(m.heads + 2 * m.kv_heads) * m.head_dim;
  double attn_act = t_attn * (2 * h + q_width / std::max(d.tp, 1) + h);
  double dense_act = t_attn * (2 * h + 2.0 * static_cast<double>(m.dense_ffn) / std::max(d.tp, 1));
  double moe_tokens = m.is_moe() ? tokens * m.top_k / std::max(d.ep, 1) : 0;
  double moe_act = m.is_moe() ? moe_tokens * (2 * h + 2.0 * static_cast<double>(m.expert_ffn) / std::max(d.etp, 1)) +
                                    t_attn * 2.0 * static_cast<double>(m.shared_experts) * m.shared_expert_ffn /
                                        std::max(d.tp, 1)
                              : 0;
  double layer_act = std::max({attn_act, dense_act, moe_act}) * ab;
  // FP32 logits of the sequences one GPU samples for: an attention-DP rank samples only its own
  // (its share of the tokens and of the sequences), as SGLang's and TensorRT-LLM's DP attention do.
  double logits = std::min<double>(t_attn, static_cast<double>(seqs_per_group(plan.engine, d.attn_dp))) * m.vocab /
                  (plan.shard(Op::LmHead) == Shard::Replicate ? 1 : std::max(d.tp, 1)) * 4.0;
  bool any_group = d.tp > 1 || d.pp > 1 || d.ep > 1 || d.attn_dp > 1;
  double ep_buffers = (m.is_moe() && d.ep > 1) ? 2.0 * 2.0 * tokens * m.top_k / d.ep * h * ab : 0;

  auto ranges = stage_layers(m.layers, d.pp);
  double best_room = 1e300;
  for (int s = 0; s < static_cast<int>(ranges.size()); ++s) {
    StageMemory st;
    st.stage = s;
    st.layers = ranges[s].size();
    double w = 0, w_attn = 0;  // parameters: in the plan's weight type, and the attention projections (attn_weights)
    auto add_layer = [&](const LayerWeights& lw) {
      w_attn += lw.attention;
      w += non_attention(lw);
    };
    for (int l = ranges[s].first; l < ranges[s].last; ++l) {
      bool moe = m.is_moe_layer(l);
      (moe ? st.moe_layers : st.dense_layers)++;
      add_layer(layer_weights_per_gpu(plan, m, moe));
    }
    st.embed = s == 0;
    st.lm_head = s == d.pp - 1;
    // Speculative decoding's draft head (EngineSettings::spec_tokens): one more layer of the
    // model's last kind beside the LM head, with its own KV, and its 2h → h input projection
    // (DeepSeek-V3's MTP module; an EAGLE head).
    const bool head = st.lm_head && plan.engine.spec_tokens > 0;
    double head_bytes = 0;  // in the draft head's own types (Dtypes::draft)
    if (head) {
      const Dtypes dt = plan.dtypes.draft();
      const LayerWeights lw = layer_weights_per_gpu(plan, m, m.is_moe_layer(m.layers - 1));
      head_bytes = (non_attention(lw) + 2.0 * h * h / std::max(d.tp, 1)) * bytes_of(dt.weights) +
                   lw.attention * bytes_of(dt.attn_weights());
    }
    double vh = static_cast<double>(m.vocab) * h;
    if (st.embed) w += split(vh, plan.shard(Op::Embed), d.tp);
    if (st.lm_head && !(m.tied_embeddings && st.embed)) w += split(vh, plan.shard(Op::LmHead), d.tp) + h;
    st.weights = w * wb + w_attn * bytes_of(plan.dtypes.attn_weights()) + head_bytes;
    // Weights offloaded to host memory (EngineSettings::weight_offload): what stays, plus a
    // prefetch buffer of two layers' share of the offloaded bytes.
    if (plan.engine.weight_offload > 0 && st.layers > 0) {
      const double off = std::min(plan.engine.weight_offload, st.weights);
      st.weights -= off - 2 * off / static_cast<double>(st.layers);
      st.offloaded = off;
    }
    st.activations = layer_act + (st.lm_head ? logits : 0);
    st.comm_buffers = (any_group ? kNcclBuffers : 0) + ep_buffers;
    st.runtime = plan.engine.runtime_reserve;
    st.kv_per_token = kv_layer * (st.layers + (head ? 1 : 0));
    st.usable = usable_bytes(plan.engine, r.hbm, st.static_bytes());
    double room = st.usable - st.static_bytes() - st.kv_per_token * plan.engine.max_context;
    if (room < best_room) {
      best_room = room;
      r.worst_stage = s;
    }
    r.stages.push_back(st);
  }
  const StageMemory& w = r.worst();
  r.usable = w.usable;
  r.kv_one_seq = w.kv_per_token * plan.engine.max_context;
  r.kv_at_limits = r.kv_one_seq * seqs_per_group(plan.engine, d.attn_dp);  // (a GPU holds its attention group's)
  r.headroom = best_room;
  r.kv_capacity_tokens = w.kv_per_token > 0 ? std::max(0.0, (r.usable - w.static_bytes()) / w.kv_per_token) : 0;
  r.fits = r.headroom >= 0;
  return r;
}

}  // namespace shardsim
