// sim/step/lowering.cpp — the per-layer lowering rules (see lowering.hpp and docs/simulation.md).
#include "sim/step/lowering.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

#include "sim/plan/memory_model.hpp"
#include "sim/step/batch_routing.hpp"
#include "sim/step/micro_batches.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/routing_trace.hpp"

namespace shardsim {

int ReplicaBatch::tokens() const {
  int n = 0;
  for (const auto& g : groups)
    for (const auto& s : g) n += s.new_tokens;
  return n;
}

bool ReplicaBatch::has_chunks() const {
  for (const auto& g : groups)
    for (const auto& s : g)
      if (!s.decodes()) return true;
  return false;
}

Lowering::Lowering(const Plan& plan, const ModelSpec& model, const Cluster& cluster, const RoutingSource* routing,
                   int replica, LoweringOptions options)
    : plan_(plan), model_(model), cluster_(cluster), routing_(routing), options_(std::move(options)), layout_(plan) {
  const Degrees& d = plan_.deg;
  rank_gpu_ = layout_.replica(replica);
  stages_ = stage_layers(model_.layers, d.pp);
  int j = 0;
  for (int l = 0; l < model_.layers; ++l) moe_index_.push_back(model_.is_moe_layer(l) ? j++ : -1);
  for (const auto& range : stages_) lowered_.push_back(choose_layers(range, j));
  route_slot_.assign(static_cast<std::size_t>(j), -1);
  for (const auto& stage : lowered_)
    for (const auto& x : stage)
      if (moe_index_[static_cast<std::size_t>(x.layer)] >= 0) routed_.push_back(moe_index_[static_cast<std::size_t>(x.layer)]);
  std::sort(routed_.begin(), routed_.end());
  for (std::size_t i = 0; i < routed_.size(); ++i) route_slot_[static_cast<std::size_t>(routed_[i])] = static_cast<int>(i);
  experts_ = options_.experts ? options_.experts : expert_layout_for(plan_, model_, routing_);
}

std::shared_ptr<const ExpertLayout> expert_layout_for(const Plan& plan, const ModelSpec& model, const RoutingSource* routing) {
  if (plan.redundant_experts > 0 && model.is_moe() && routing != nullptr && plan.deg.ep > 1) {
    auto layout = std::make_shared<ExpertLayout>(measure_expert_loads(*routing), plan.deg.ep, plan.redundant_experts);
    layout->judge(measure_expert_loads(*routing, kHeldOutRequests));
    return layout;
  }
  return std::make_shared<const ExpertLayout>(model.experts, plan.deg.ep);
}

std::vector<LoweredLayer> Lowering::choose_layers(const LayerRange& range, int model_moe_layers) const {
  std::vector<LoweredLayer> out;
  const auto& only = options_.only_layers;
  if (!only.empty() || options_.fold_moe_layers <= 0) {
    for (int l = range.first; l < range.last; ++l)
      if (only.empty() || std::find(only.begin(), only.end(), l) != only.end()) out.push_back({l, 1.0});
    return out;
  }
  std::vector<int> dense, moe;
  for (int l = range.first; l < range.last; ++l) (moe_index_[static_cast<std::size_t>(l)] >= 0 ? moe : dense).push_back(l);
  if (!dense.empty()) out.push_back({dense.front(), static_cast<double>(dense.size())});
  // The model's representatives shared out by the stages' MoE layers, at least one per stage.
  const std::size_t n = moe.size();
  const std::size_t share = static_cast<std::size_t>(
      std::lround(static_cast<double>(options_.fold_moe_layers) * static_cast<double>(n) / std::max(1, model_moe_layers)));
  const std::size_t R = std::min(n, std::max<std::size_t>(1, share));
  for (std::size_t i = 0; i < R; ++i)  // the middle of each of R equal slices, standing for the slice
    out.push_back({moe[(2 * i + 1) * n / (2 * R)], static_cast<double>((i + 1) * n / R - i * n / R)});
  std::sort(out.begin(), out.end(), [](const LoweredLayer& a, const LoweredLayer& b) { return a.layer < b.layer; });
  return out;
}

namespace {

enum class Lay { Full, Split, Partial };

Lay need_of(Shard s) { return s == Shard::Row ? Lay::Split : Lay::Full; }
Lay out_of(Shard s) {
  switch (s) {
    case Shard::Column:
    case Shard::Vocab: return Lay::Split;
    case Shard::Row: return Lay::Partial;
    default: return Lay::Full;
  }
}
double div_of(Shard s, int ways) { return s == Shard::Replicate ? 1.0 : static_cast<double>(ways); }

// Builds one step program; holds the per-rank "current op" of the main data flow.
class Builder {
 public:
  explicit Builder(StepProgram& prog) : prog_(prog), cur_(prog.rank_gpu.size(), -1), extra_(prog.rank_gpu.size()) {}

  int compute(int rank, OpClass cls, int layer, int stage, double flops, double bytes, Dtype math,
              ComputeKind kernel = ComputeKind::Memory, double rows = 0) {
    StepOp op;
    op.type = OpType::Compute;
    op.kernel = kernel;
    op.rows = rows;
    op.cls = cls;
    op.layer = layer;
    op.stage = stage;
    op.rank = rank;
    op.flops = flops;
    op.hbm_bytes = bytes;
    op.math = math;
    op.weight = weight_;
    one_[0] = rank;
    return advance(op, one_);
  }

  // A collective over `group` (index into prog.groups); skipped (returns −1) for groups of one rank.
  int collective(CollKind kind, int group, OpClass cls, int layer, int stage, double bytes, int matrix = -1) {
    const auto& ranks = prog_.groups[static_cast<std::size_t>(group)];
    if (ranks.size() <= 1 || bytes <= 0) return -1;
    StepOp op;
    op.type = OpType::Collective;
    op.cls = cls;
    op.layer = layer;
    op.stage = stage;
    op.group = group;
    op.coll = kind;
    op.bytes = bytes;
    op.matrix = matrix;
    op.weight = weight_;
    return advance(op, ranks);
  }

  int send(int src, int dst, int layer, int stage, double bytes) {
    StepOp op;
    op.type = OpType::Send;
    op.cls = OpClass::PipelineP2p;
    op.layer = layer;
    op.stage = stage;
    op.rank = src;
    op.peer = dst;
    op.bytes = bytes;
    return advance(op, {src, dst});
  }

  // Layout conversion inside a group; width in elements per token.
  Lay convert(Lay from, Lay to, int group, double tokens, double width, double bytes_per_elem, OpClass cls, int layer,
              int stage) {
    if (from == to || (from == Lay::Full && to == Lay::Split)) return to;
    double bytes = tokens * width * bytes_per_elem;
    if (from == Lay::Partial) {
      collective(to == Lay::Full ? CollKind::AllReduce : CollKind::ReduceScatter, group, cls, layer, stage, bytes);
    } else if (from == Lay::Split && to == Lay::Full) {
      collective(CollKind::AllGather, group, cls, layer, stage, bytes);
    }
    return to;
  }

  // Forks: the next ops of `ranks` also wait for what is current now on those ranks (a side branch).
  std::vector<int> snapshot() const { return cur_; }
  void restore(const std::vector<int>& s) { cur_ = s; }
  void join(int rank, int op) {
    if (op >= 0) extra_[static_cast<std::size_t>(rank)].push_back(op);
  }
  int current(int rank) const { return cur_[static_cast<std::size_t>(rank)]; }
  // Layers the next operations stand for (LoweredLayer::weight); sends and the ends stay at 1.
  void set_weight(double w) { weight_ = w; }

 private:
  int advance(StepOp op, const std::vector<int>& ranks) {
    std::vector<int>& deps = deps_;
    deps.clear();
    for (int r : ranks) {
      deps.push_back(cur_[static_cast<std::size_t>(r)]);
      auto& e = extra_[static_cast<std::size_t>(r)];
      deps.insert(deps.end(), e.begin(), e.end());
      e.clear();
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    int id = prog_.add(op, deps);
    for (int r : ranks) cur_[static_cast<std::size_t>(r)] = id;
    return id;
  }

  StepProgram& prog_;
  std::vector<int> cur_;
  std::vector<std::vector<int>> extra_;
  std::vector<int> deps_;  // scratch
  std::vector<int> one_{0};  // scratch: a single rank
  double weight_ = 1;
};

}  // namespace

StepProgram Lowering::lower(const ReplicaBatch& batch) const {
  StepProgram p;
  lower(batch, p);
  return p;
}

void Lowering::lower(const ReplicaBatch& batch, StepProgram& prog) const {
  // Two-batch overlap: each half lowered on its own, the programs interleaved (micro_batches.hpp).
  if (plan_.engine.two_batch_overlap && plan_.deg.ep > 1 && model_.is_moe()) {
    ReplicaBatch first, second;
    if (split_micro_batches(batch, first, second)) {
      StepProgram a, b;
      lower_whole(first, a);
      lower_whole(second, b);
      interleave_micro_batches(a, b, prog);
      return;
    }
  }
  lower_whole(batch, prog);
}

// Core attention over each sequence's context (causal inside the new tokens): one paged decode
// kernel for the decoding sequences, one prefill kernel for the prompt chunks, on each of `ranks`.
template <class B>
void Lowering::attention(B& b, int layer, int stage, const std::vector<int>& ranks, const std::vector<SeqWork>& seqs) const {
  const ModelSpec& m = model_;
  const bool mla = m.attention == AttentionKind::MLA;
  const double heads_local = m.heads / div_of(plan_.shard(Op::Qkv), plan_.deg.tp);
  const double kv_elems = kv_elems_per_gpu(plan_, m);
  const double ab = bytes_of(plan_.dtypes.activations), kvb = bytes_of(plan_.dtypes.kv);
  double flops[2] = {0, 0}, bytes[2] = {0, 0}, kv_len[2] = {0, 0};
  for (const auto& sq : seqs) {
    double n = sq.new_tokens, c = sq.context;
    int decode = sq.decodes() ? 1 : 0;
    bool absorbed = mla && decode;
    double dqk = mla ? (absorbed ? m.kv_lora_rank + m.qk_rope_head_dim : m.qk_nope_head_dim + m.qk_rope_head_dim)
                     : m.head_dim;
    double dv = mla ? (absorbed ? m.kv_lora_rank : m.v_head_dim) : m.head_dim;
    double f = 2 * n * (c + (n + 1) / 2) * heads_local * (dqk + dv);
    flops[decode] += f;
    bytes[decode] += (c + 2 * n) * kv_elems * kvb + n * heads_local * (dqk + dv) * ab;
    kv_len[decode] += f * (c + n);
  }
  for (int k : {1, 0}) {
    if (flops[k] <= 0) continue;
    ComputeKind kind = k ? ComputeKind::DecodeAttention : ComputeKind::PrefillAttention;
    for (int r : ranks) b.compute(r, OpClass::Attention, layer, stage, flops[k], bytes[k], Dtype::BF16, kind, kv_len[k] / flops[k]);
  }
}

void Lowering::lower_attention(const ReplicaBatch& batch, StepProgram& prog) const {
  const Degrees& d = plan_.deg;
  prog.clear();
  prog.rank_gpu = rank_gpu_;
  Builder b(prog);
  std::vector<int> ranks;
  for (int s = 0; s < d.pp; ++s) {
    const auto& layers = lowered_[static_cast<std::size_t>(s)];
    if (layers.empty()) continue;
    double weight = 0;
    for (const LoweredLayer& x : layers) weight += x.weight;
    b.set_weight(weight);
    for (int a = 0; a < d.attn_dp && a < static_cast<int>(batch.groups.size()); ++a) {
      ranks.clear();
      for (int t = 0; t < d.tp; ++t) ranks.push_back(s * d.unit() + a * d.tp + t);
      attention(b, layers.front().layer, s, ranks, batch.groups[static_cast<std::size_t>(a)]);
    }
  }
}

void Lowering::lower_whole(const ReplicaBatch& batch, StepProgram& prog) const {
  const ModelSpec& m = model_;
  const Degrees& d = plan_.deg;
  const int U = d.unit(), tp = d.tp, A = d.attn_dp;
  const double h = m.hidden;
  const double ab = bytes_of(plan_.dtypes.activations), wb = bytes_of(plan_.dtypes.weights);
  const Dtype math = plan_.dtypes.math();
  const Lay R = d.sp > 1 ? Lay::Split : Lay::Full;  // residual-stream layout

  prog.clear();
  prog.rank_gpu = rank_gpu_;
  Builder b(prog);
  auto rank = [&](int s, int u) { return s * U + u; };

  // Groups, per stage: TP groups of each attention group, expert-TP groups, the unit (all-to-all).
  std::vector<std::vector<int>> tp_group(d.pp, std::vector<int>(A)), etp_group(d.pp, std::vector<int>(d.ep));
  std::vector<int> unit_group(d.pp);
  for (int s = 0; s < d.pp; ++s) {
    for (int a = 0; a < A; ++a) {
      std::vector<int> g;
      for (int t = 0; t < tp; ++t) g.push_back(rank(s, a * tp + t));
      tp_group[s][a] = prog.add_group(g);
    }
    for (int e = 0; e < d.ep; ++e) {
      std::vector<int> g;
      for (int k = 0; k < d.etp; ++k) g.push_back(rank(s, e * d.etp + k));
      etp_group[s][e] = prog.add_group(g);
    }
    std::vector<int> all;
    for (int u = 0; u < U; ++u) all.push_back(rank(s, u));
    unit_group[s] = prog.add_group(all);
  }

  // Tokens per attention group.
  std::vector<double> T(A, 0), emit(A, 0);
  for (int a = 0; a < A && a < static_cast<int>(batch.groups.size()); ++a)
    for (const auto& sq : batch.groups[static_cast<std::size_t>(a)]) {
      T[a] += sq.new_tokens;
      emit[a] += sq.emits ? 1 : 0;
    }

  // Routing of every lowered MoE layer (sim/step/batch_routing.hpp). Per-thread scratch: nr dense
  // U×U accumulators (2 MB at U = 128) are zeroed where the last step touched them instead of
  // being allocated per step. `routing` is empty without routing.
  thread_local std::vector<LayerRouting> scratch;
  std::span<LayerRouting> routing;
  const int nr = static_cast<int>(routed_.size());
  if (m.is_moe() && routing_ != nullptr && nr > 0) {
    if (scratch.size() < static_cast<std::size_t>(nr)) scratch.resize(static_cast<std::size_t>(nr));
    routing = std::span<LayerRouting>(scratch.data(), static_cast<std::size_t>(nr));
    for (LayerRouting& L : routing) L.reset(static_cast<std::size_t>(U), static_cast<std::size_t>(experts_->slots()));
    BatchRoutingContext ctx{routing_, experts_.get(), routed_, nr == m.num_moe_layers(), tp, d.etp, U};
    route_batch(ctx, batch, options_.max_routed_tokens_per_seq, routing);
  }

  const LayerWeights dense_w = layer_weights_per_gpu(plan_, m, false);
  const LayerWeights moe_w = layer_weights_per_gpu(plan_, m, true);
  const bool mla = m.attention == AttentionKind::MLA;
  const double v_dim = mla ? m.v_head_dim : m.head_dim;
  const double o_local = static_cast<double>(m.heads) * v_dim * h / div_of(plan_.shard(Op::AttnOut), tp);
  const Lay attn_layout = plan_.shard(Op::Qkv) == Shard::Replicate ? Lay::Full : Lay::Split;
  const double mm = m.ffn_matrices;

  // A two-matrix FFN (up: (mm−1)·F outputs, down: F → h) on `group` for `tokens`; returns the output layout.
  auto ffn = [&](int s, int layer, int group, const std::vector<int>& ranks, double tokens, double F, Shard up,
                 Shard down, int ways, double active_weights_bytes, OpClass cls, OpClass comm_cls, Lay in,
                 ComputeKind kernel = ComputeKind::Gemm, double rows = -1) -> Lay {
    if (rows < 0) rows = tokens;
    if (tokens <= 0) return in;
    Lay x = b.convert(in, need_of(up), group, tokens, h, ab, comm_cls, layer, s);
    for (int r : ranks)
      b.compute(r, cls, layer, s, 2 * tokens * h * F * (mm - 1) / div_of(up, ways),
                active_weights_bytes * (mm - 1) / mm / div_of(up, ways) + tokens * (h + F * (mm - 1) / div_of(up, ways)) * ab, math,
                kernel, rows);
    x = out_of(up);
    double width = x == Lay::Partial ? F * (mm - 1) : F;
    x = b.convert(x, need_of(down), group, tokens, width, ab, comm_cls, layer, s);
    for (int r : ranks)
      b.compute(r, cls, layer, s, 2 * tokens * F * h / div_of(down, ways),
                active_weights_bytes / mm / div_of(down, ways) + tokens * (F / div_of(down, ways) + h) * ab, math,
                kernel, rows);
    (void)x;
    return out_of(down);
  };

  auto norm = [&](int s, int layer, int a, double tokens) {
    double share = R == Lay::Split ? tokens / tp : tokens;
    for (int t = 0; t < tp; ++t)
      b.compute(rank(s, a * tp + t), OpClass::Norm, layer, s, 4 * share * h, 2 * share * h * ab + h * 2, Dtype::BF16,
                ComputeKind::Memory, share);
  };

  std::vector<std::vector<std::vector<int>>> tp_rank_lists(d.pp, std::vector<std::vector<int>>(A));
  for (int s = 0; s < d.pp; ++s)
    for (int a = 0; a < A; ++a)
      for (int t = 0; t < tp; ++t) tp_rank_lists[s][a].push_back(rank(s, a * tp + t));
  auto tp_ranks = [&](int s, int a) -> const std::vector<int>& { return tp_rank_lists[s][a]; };

  // Scratch of the MoE layers below, kept across them.
  std::vector<int> shared_end, expert_ranks;
  std::vector<Lay> shared_out;
  std::vector<std::vector<int>> shared_fork;
  for (int s = 0; s < d.pp; ++s) {
    // Pipeline receive (or embedding on the first stage).
    if (s == 0) {
      for (int a = 0; a < A; ++a) {
        if (T[a] <= 0) continue;
        Shard e = plan_.shard(Op::Embed);
        for (int r : tp_ranks(s, a))
          b.compute(r, OpClass::Embedding, -1, s, 0, T[a] * h * (wb / div_of(e, tp) + ab), Dtype::BF16, ComputeKind::Memory,
                    T[a]);
        b.convert(out_of(e) == Lay::Split && e == Shard::Vocab ? Lay::Partial : out_of(e), R, tp_group[s][a], T[a], h, ab,
                  OpClass::TpComm, -1, s);
      }
    } else {
      for (int a = 0; a < A; ++a) {
        if (T[a] <= 0) continue;
        for (int t = 0; t < tp; ++t)
          b.send(rank(s - 1, a * tp + t), rank(s, a * tp + t), -1, s, T[a] * h * ab / tp);
        b.convert(Lay::Split, R, tp_group[s][a], T[a], h, ab, OpClass::TpComm, -1, s);
      }
    }

    for (const LoweredLayer& lowered : lowered_[static_cast<std::size_t>(s)]) {
      const int l = lowered.layer;
      b.set_weight(lowered.weight);
      const bool moe = moe_index_[l] >= 0;
      const LayerWeights& lw = moe ? moe_w : dense_w;
      // ---- attention block, per attention group ----
      for (int a = 0; a < A; ++a) {
        if (T[a] <= 0) continue;
        const auto& ranks = tp_ranks(s, a);
        norm(s, l, a, T[a]);
        b.convert(R, Lay::Full, tp_group[s][a], T[a], h, ab, OpClass::TpComm, l, s);
        double qkv_local = lw.attention - o_local;
        for (int r : ranks)
          b.compute(r, OpClass::QkvProj, l, s, 2 * T[a] * qkv_local, qkv_local * wb + T[a] * h * ab * 2, math,
                    ComputeKind::Gemm, T[a]);
        attention(b, l, s, ranks, batch.groups[static_cast<std::size_t>(a)]);
        Shard os = plan_.shard(Op::AttnOut);
        b.convert(attn_layout, need_of(os), tp_group[s][a], T[a], m.heads * v_dim, ab, OpClass::TpComm, l, s);
        for (int r : ranks)
          b.compute(r, OpClass::AttnOutProj, l, s, 2 * T[a] * o_local, o_local * wb + T[a] * (m.heads * v_dim / tp + h) * ab,
                    math, ComputeKind::Gemm, T[a]);
        b.convert(out_of(os), R, tp_group[s][a], T[a], h, ab, OpClass::TpComm, l, s);
      }
      // ---- FFN block ----
      if (!moe) {
        for (int a = 0; a < A; ++a) {
          if (T[a] <= 0) continue;
          norm(s, l, a, T[a]);
          double w_bytes = static_cast<double>(m.dense_ffn_params()) * wb;
          Lay out = ffn(s, l, tp_group[s][a], tp_ranks(s, a), T[a], static_cast<double>(m.dense_ffn),
                        plan_.shard(Op::DenseUp), plan_.shard(Op::DenseDown), tp, w_bytes, OpClass::DenseFfn,
                        OpClass::TpComm, R);
          b.convert(out, R, tp_group[s][a], T[a], h, ab, OpClass::TpComm, l, s);
        }
        continue;
      }
      // MoE: norm and router per attention group; dispatch / experts / combine per unit. The shared
      // experts fork from the normed input but are issued after the dispatch, so that in program
      // order (what list scheduling follows) they run while the dispatch all-to-all is in flight,
      // as serving engines overlap them.
      shared_end.assign(static_cast<std::size_t>(prog.num_ranks()), -1);
      shared_out.assign(static_cast<std::size_t>(A), Lay::Full);
      shared_fork.resize(static_cast<std::size_t>(A));  // Builder state after each group's normed input
      for (int a = 0; a < A; ++a) {
        if (T[a] <= 0) continue;
        const auto& ranks = tp_ranks(s, a);
        norm(s, l, a, T[a]);
        b.convert(R, Lay::Full, tp_group[s][a], T[a], h, ab, OpClass::TpComm, l, s);
        if (m.shared_experts > 0) shared_fork[a] = b.snapshot();
        Shard rs = plan_.shard(Op::Router);
        for (int r : ranks)
          b.compute(r, OpClass::Router, l, s, 2 * T[a] * h * m.experts / div_of(rs, tp),
                    lw.router * wb + T[a] * h * ab, Dtype::BF16, ComputeKind::Gemm, T[a]);
        if (rs == Shard::Column)
          b.convert(Lay::Split, Lay::Full, tp_group[s][a], T[a], m.experts, 4, OpClass::TpComm, l, s);
      }
      // Dispatch: token copies to the EP ranks of their experts (each expert-TP member gets a copy).
      // With ep = 1 there is no expert parallelism: every rank of the unit is an expert-TP member
      // of the one EP group, and those in the token's own attention group already hold it (Full
      // after the router). Only copies to other attention groups move data — expert-TP traffic.
      const int j = route_slot_[static_cast<std::size_t>(moe_index_[l])];
      const bool no_ep = d.ep == 1;
      int disp = -1, comb = -1;
      double total_bytes = 0, comb_bytes = 0;
      if (!routing.empty()) {
        // Without EP, copies inside the token's own attention group move nothing.
        auto inside = [no_ep, tp](std::uint32_t src, std::uint32_t dst) { return no_ep && src / tp == dst / tp; };
        disp = static_cast<int>(prog.a2a.size());
        comb = disp + 1;
        prog.a2a.resize(prog.a2a.size() + 2);
        auto there = [&](double copies) { return copies * h * ab; };
        auto back = [&](double copies) { return copies * h * 2.0 / d.etp; };
        routing[static_cast<std::size_t>(j)].matrices(static_cast<std::size_t>(U), there, back, inside,
                                                      prog.a2a[static_cast<std::size_t>(disp)],
                                                      prog.a2a[static_cast<std::size_t>(comb)], total_bytes, comb_bytes);
      }
      b.collective(CollKind::AllToAll, unit_group[s], no_ep ? OpClass::EtpComm : OpClass::EpDispatch, l, s,
                   total_bytes / std::max(U, 1), disp);
      for (int a = 0; a < A && m.shared_experts > 0; ++a) {  // shared experts, beside the dispatch
        if (T[a] <= 0) continue;
        const auto& ranks = tp_ranks(s, a);
        auto after = b.snapshot();
        b.restore(shared_fork[a]);
        double F = static_cast<double>(m.shared_expert_ffn) * m.shared_experts;
        Shard ss = plan_.shard(Op::SharedExpert);
        shared_out[a] = ffn(s, l, tp_group[s][a], ranks, T[a], F, ss == Shard::Replicate ? Shard::Replicate : Shard::Column,
                            ss == Shard::Replicate ? Shard::Replicate : Shard::Row, tp, mm * h * F * wb,
                            OpClass::SharedExperts, OpClass::TpComm, Lay::Full);
        for (int r : ranks) shared_end[static_cast<std::size_t>(r)] = b.current(r);
        b.restore(after);
      }
      // Experts: each EP rank computes its local slots' real loads.
      const int per_rank = experts_->slots_per_rank();
      const double expert_bytes = static_cast<double>(m.expert_params()) * wb;
      for (int e = 0; e < d.ep; ++e) {
        double tokens = 0, active = 0;
        if (!routing.empty()) {
          const auto& L = routing[static_cast<std::size_t>(j)];
          for (int x = e * per_rank; x < (e + 1) * per_rank && x < experts_->slots(); ++x) {
            tokens += L.slot_tokens[static_cast<std::size_t>(x)];
            active += L.active(static_cast<std::size_t>(x));
          }
        }
        if (tokens <= 0) continue;
        std::vector<int>& ranks = expert_ranks;
        ranks.clear();
        for (int k = 0; k < d.etp; ++k) ranks.push_back(rank(s, e * d.etp + k));
        Lay out = ffn(s, l, etp_group[s][e], ranks, tokens, static_cast<double>(m.expert_ffn), plan_.shard(Op::ExpertUp),
                      plan_.shard(Op::ExpertDown), d.etp, active * expert_bytes, OpClass::Experts, OpClass::EtpComm,
                      Lay::Full, ComputeKind::GroupedGemm, tokens / std::max(active, 1.0));
        b.convert(out, Lay::Split, etp_group[s][e], tokens, h, ab, OpClass::EtpComm, l, s);
      }
      b.collective(CollKind::AllToAll, unit_group[s], no_ep ? OpClass::EtpComm : OpClass::EpCombine, l, s,
                   comb_bytes / std::max(U, 1), comb);
      // Merge the shared experts' output, then restore the residual layout.
      for (int a = 0; a < A; ++a) {
        if (T[a] <= 0) continue;
        for (int r : tp_ranks(s, a)) b.join(r, shared_end[static_cast<std::size_t>(r)]);
        if (m.shared_experts > 0)
          b.convert(shared_out[a], Lay::Split, tp_group[s][a], T[a], h, ab, OpClass::TpComm, l, s);
        b.convert(Lay::Split, R, tp_group[s][a], T[a], h, ab, OpClass::TpComm, l, s);
      }
    }

    b.set_weight(1);
    if (s == d.pp - 1) {
      for (int a = 0; a < A; ++a) {
        if (emit[a] <= 0) continue;
        norm(s, -1, a, emit[a]);
        b.convert(R, Lay::Full, tp_group[s][a], emit[a], h, ab, OpClass::TpComm, -1, s);
        Shard hs = plan_.shard(Op::LmHead);
        for (int r : tp_ranks(s, a))
          b.compute(r, OpClass::LmHead, -1, s, 2 * emit[a] * h * m.vocab / div_of(hs, tp),
                    m.vocab * h * wb / div_of(hs, tp) + emit[a] * (h + m.vocab / div_of(hs, tp)) * ab, math,
                    ComputeKind::Gemm, emit[a]);
        b.convert(out_of(hs), Lay::Full, tp_group[s][a], emit[a], m.vocab, ab, OpClass::TpComm, -1, s);
      }
    }
  }
}

}  // namespace shardsim
