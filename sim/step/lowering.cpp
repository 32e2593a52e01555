// sim/step/lowering.cpp — the per-layer lowering rules (see lowering.hpp and docs/simulation.md).
#include "sim/step/lowering.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

#include "sim/plan/memory_model.hpp"
#include "sim/step/analytic_executor.hpp"
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
  // The unit's nodes and rails (stage 0's; every stage's must match), for node-level all-to-alls.
  const auto U = static_cast<std::size_t>(d.unit());
  if (model_.is_moe() && d.ep > 1 && d.etp == 1 && plan_.engine.a2a != A2aKernel::PerRank) {
    auto stage = [&](int s) {
      return unit_nodes_of(cluster_, std::vector<int>(rank_gpu_.begin() + static_cast<std::ptrdiff_t>(s * U),
                                                      rank_gpu_.begin() + static_cast<std::ptrdiff_t>((s + 1) * U)));
    };
    UnitNodes un = stage(0);
    bool alike = un.nodes > 1;
    for (int s = 1; s < d.pp && alike; ++s) {
      const UnitNodes other = stage(s);
      alike = other.node == un.node && other.rail == un.rail;
    }
    if (alike) unit_nodes_ = std::move(un);
  }
}

std::shared_ptr<const ExpertLayout> expert_layout_for(const Plan& plan, const ModelSpec& model, const RoutingSource* routing) {
  if (plan.redundant_experts > 0 && model.is_moe() && routing != nullptr && plan.deg.ep > 1) {
    auto layout = std::make_shared<ExpertLayout>(measure_expert_loads(*routing), plan.deg.ep, plan.redundant_experts);
    layout->judge(measure_expert_loads(*routing, kHeldOutRequests));
    return layout;
  }
  return std::make_shared<const ExpertLayout>(model.experts, plan.deg.ep);
}

int Lowering::num_lowered_layers() const {
  int n = 0;
  for (const auto& stage : lowered_) n += static_cast<int>(stage.size());
  return n;
}

bool two_micro_batches(const Plan& plan, const ModelSpec& model) {
  return plan.engine.two_batch_overlap && plan.deg.ep > 1 && model.is_moe();
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
  const auto share = static_cast<std::size_t>(
      std::lround(static_cast<double>(options_.fold_moe_layers) * static_cast<double>(moe.size()) /
                  std::max(1, model_moe_layers)));
  const std::size_t n = moe.size();
  const std::size_t R = std::min(n, std::max<std::size_t>(1, share));
  // The middle of each of R equal slices, standing for the slice.
  for (std::size_t i = 0; i < R; ++i)
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
  Builder(StepProgram& prog, bool group_compute)
      : prog_(prog), cur_(prog.rank_gpu.size(), -1), extra_(prog.rank_gpu.size()), group_(group_compute) {}

  int compute(int rank, OpClass cls, int layer, int stage, double flops, double bytes, Dtype math,
              ComputeKind kernel = ComputeKind::Memory, double rows = 0) {
    one_[0] = rank;
    return advance(compute_op(rank, cls, layer, stage, flops, bytes, math, kernel, rows), one_);
  }

  // The same kernel on each of `ranks`, whose collective group is `group`: one operation over the
  // group when grouping is on (LoweringOptions::group_compute), else one per rank.
  void compute_each(const std::vector<int>& ranks, int group, OpClass cls, int layer, int stage, double flops,
                    double bytes, Dtype math, ComputeKind kernel = ComputeKind::Memory, double rows = 0) {
    if (!group_ || ranks.size() < 2 || group < 0 || prog_.groups[static_cast<std::size_t>(group)] != ranks) {
      for (int r : ranks) compute(r, cls, layer, stage, flops, bytes, math, kernel, rows);
      return;
    }
    StepOp op = compute_op(ranks.front(), cls, layer, stage, flops, bytes, math, kernel, rows);
    op.group = group;
    advance(op, ranks);
  }

  // A collective over `group` (index into prog.groups); skipped (returns −1) for groups of one rank.
  int collective(CollKind kind, int group, OpClass cls, int layer, int stage, double bytes, int matrix = -1) {
    const auto& ranks = prog_.groups[static_cast<std::size_t>(group)];
    if (ranks.size() <= 1 || bytes <= 0) return -1;
    return advance({.type = OpType::Collective, .cls = cls, .layer = layer, .stage = stage, .group = group, .coll = kind,
                    .bytes = bytes, .matrix = matrix, .weight = weight_},
                   ranks);
  }

  int send(int src, int dst, int layer, int stage, double bytes) {
    return advance({.type = OpType::Send, .cls = OpClass::PipelineP2p, .layer = layer, .stage = stage, .rank = src,
                    .bytes = bytes, .peer = dst},
                   {src, dst});
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

  StepOp compute_op(int rank, OpClass cls, int layer, int stage, double flops, double bytes, Dtype math,
                    ComputeKind kernel, double rows) const {
    return {.type = OpType::Compute, .cls = cls, .layer = layer, .stage = stage, .rank = rank, .flops = flops,
            .hbm_bytes = bytes, .math = math, .kernel = kernel, .rows = rows, .weight = weight_};
  }

  StepProgram& prog_;
  std::vector<int> cur_;
  std::vector<std::vector<int>> extra_;
  std::vector<int> deps_;  // scratch
  std::vector<int> one_{0};  // scratch: a single rank
  double weight_ = 1;
  bool group_ = false;
};

}  // namespace

StepProgram Lowering::lower(const ReplicaBatch& batch) const {
  StepProgram p;
  lower(batch, p);
  return p;
}

void Lowering::lower(const ReplicaBatch& batch, StepProgram& prog) const {
  // Two-batch overlap: each half lowered on its own, the programs interleaved (micro_batches.hpp).
  if (two_batch_overlap()) {
    ReplicaBatch first, second;
    if (split_micro_batches(batch, first, second)) {
      StepProgram a, b;
      lower_whole(first, a);
      lower_whole(second, b);
      interleave_micro_batches(a, b, prog);
      prog.compute_share = compute_share(batch, true);
      prog.allreduce = plan_.engine.allreduce;
      return;
    }
  }
  lower_whole(batch, prog);
}

bool Lowering::node_level(const ReplicaBatch& batch) const {
  const A2aKernel k = plan_.engine.a2a;
  return !unit_nodes_.empty() && (k == A2aKernel::PerNode || (k == A2aKernel::Auto && batch.has_chunks()));
}

double Lowering::compute_share(const ReplicaBatch& batch, bool split) const {
  if (!split || !node_level(batch)) return 1;
  const int sms = cluster_.pool_gpu(plan_.first_gpu).sms;
  return std::clamp(static_cast<double>(sms - plan_.engine.comm_sms) / sms, 0.05, 1.0);
}

// Core attention over each sequence's context (causal inside the new tokens): one paged decode
// kernel for the decoding sequences, one prefill kernel for the prompt chunks, on each of `ranks`.
template <class B>
void Lowering::attention(B& b, int layer, int stage, const std::vector<int>& ranks, int group,
                         const std::vector<SeqWork>& seqs) const {
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
  // The math type (Dtypes::attention_math): unless the plan says, prompt attention runs in FP8 on
  // an FP8 KV cache (TensorRT-LLM's FP8 context FMHA; FlashAttention-3's FP8 path in vLLM and
  // SGLang), grouped-query or multi-head, and MLA's prefill and every decode kernel in BF16 (decode
  // is bound by the KV read, priced in the KV's own bytes either way); `attn=fp8` makes all of them
  // FP8 (MLA decode on its own FP8 curve).
  for (int k : {1, 0}) {
    if (flops[k] <= 0) continue;
    const ComputeKind kind = !k ? ComputeKind::PrefillAttention : mla ? ComputeKind::MlaDecodeAttention : ComputeKind::DecodeAttention;
    b.compute_each(ranks, group, OpClass::Attention, layer, stage, flops[k], bytes[k], plan_.dtypes.attention_math(k == 1, mla),
                   kind, kv_len[k] / flops[k]);
  }
}

void Lowering::lower_attention(const ReplicaBatch& batch, StepProgram& prog) const {
  prog.clear();
  prog.rank_gpu = rank_gpu_;
  prog.allreduce = plan_.engine.allreduce;
  prog.compute_share = attention_share(batch);
  Builder b(prog, options_.group_compute);
  attention_walk(batch, b, &prog);
}

template <class B>
void Lowering::attention_walk(const ReplicaBatch& batch, B& b, StepProgram* prog) const {
  const Degrees& d = plan_.deg;
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
      const int group = !(options_.group_compute && d.tp > 1) ? -1 : prog != nullptr ? prog->add_group(ranks) : 0;
      attention(b, layers.front().layer, s, ranks, group, batch.groups[static_cast<std::size_t>(a)]);
    }
  }
}

namespace {

// Prices compute kernels as AnalyticExecutor::run() prices lower_attention()'s program, where
// nothing depends on anything: each rank's kernels back to back from 0 on its compute stream, a
// stage's time its slowest rank's end, busy time and work per GPU summed operation by operation
// in program order (schedule_summary.cpp) — so the figures are the executor's to the bit, on
// replicas whose ranks share a GPU type (a replica's always do).
class AttentionPricer {
 public:
  AttentionPricer(const AnalyticExecutor& ex, const std::vector<int>& rank_gpu, double share, bool group)
      : ex_(ex), rank_gpu_(rank_gpu), share_(share), group_(group), end_(rank_gpu.size(), 0.0),
        ranks_(std::max(static_cast<int>(rank_gpu.size()), 1)) {}
  void set_weight(double w) { weight_ = w; }
  void compute_each(const std::vector<int>& ranks, int group, OpClass cls, int layer, int stage, double flops,
                    double bytes, Dtype math, ComputeKind kernel, double rows) {
    const StepOp op{.type = OpType::Compute, .cls = cls, .layer = layer, .stage = stage, .rank = ranks.front(),
                    .flops = flops, .hbm_bytes = bytes, .math = math, .kernel = kernel, .rows = rows, .weight = weight_};
    const double seconds = ex_.compute_seconds(rank_gpu_[static_cast<std::size_t>(op.rank)], op, share_);
    if (static_cast<std::size_t>(stage) >= stage_last_.size()) stage_last_.resize(static_cast<std::size_t>(stage) + 1, 0.0);
    if (group_ && group >= 0 && ranks.size() >= 2) {  // one operation over the group
      double start = 0;
      for (int r : ranks) start = std::max(start, end_[static_cast<std::size_t>(r)]);
      run(op, ranks, start, seconds);
    } else {
      for (int r : ranks) {
        one_[0] = r;
        run(op, one_, end_[static_cast<std::size_t>(r)], seconds);
      }
    }
  }
  AttentionCost cost() const {
    AttentionCost a = cost_;
    for (double st : stage_last_) a.critical += st;
    return a;
  }

 private:
  void run(const StepOp& op, const std::vector<int>& involved, double start, double seconds) {
    const double end = start + seconds * op.weight;
    for (int r : involved) end_[static_cast<std::size_t>(r)] = end;
    double& last = stage_last_[static_cast<std::size_t>(op.stage)];
    last = std::max(last, end);
    cost_.busy += (end - start) * static_cast<double>(involved.size()) / ranks_;
    for (int r : involved) {
      const ComputeWork w = compute_work(ex_.cluster().gpu_of(rank_gpu_[static_cast<std::size_t>(r)]), op);
      cost_.tensor_work += w.tensor / ranks_;
      cost_.hbm_work += w.hbm / ranks_;
    }
  }

  const AnalyticExecutor& ex_;
  const std::vector<int>& rank_gpu_;
  double share_;
  bool group_;
  std::vector<double> end_;         // per rank: its last kernel's end
  std::vector<double> stage_last_;  // per stage: its last end
  int ranks_;
  double weight_ = 1;
  std::vector<int> one_{0};
  AttentionCost cost_;
};

}  // namespace

AttentionCost Lowering::price_attention(const ReplicaBatch& batch, const AnalyticExecutor& ex) const {
  AttentionPricer pricer(ex, rank_gpu_, attention_share(batch), options_.group_compute);
  attention_walk(batch, pricer, nullptr);
  return pricer.cost();
}

// The compute share the attention kernels run at: inside a two-batch-overlap step whose
// all-to-alls run node-level, what the normal kernels' SMs leave (priced as inside the step).
double Lowering::attention_share(const ReplicaBatch& batch) const {
  if (!(two_batch_overlap() && node_level(batch))) return 1;
  ReplicaBatch first, second;
  return compute_share(batch, split_micro_batches(batch, first, second));
}

// One micro-batch lowered whole: the replica's groups, the batch's routing, then stage by stage
// the entry (embedding or pipeline receive), each lowered layer's attention block and its dense
// FFN or MoE block, and on the last stage the LM head. Program order is what list scheduling
// follows, so the order of the calls below is part of the model.
class Lowering::WholeStep {
 public:
  WholeStep(const Lowering& lo, const ReplicaBatch& batch, StepProgram& prog)
      : lo_(lo), m_(lo.model_), d_(lo.plan_.deg), plan_(lo.plan_), batch_(batch), prog_(cleared(prog, lo.rank_gpu_, lo.plan_.engine.allreduce)),
        b_(prog, lo.options_.group_compute && !lo.two_batch_overlap()), U_(d_.unit()), tp_(d_.tp), A_(d_.attn_dp),
        h_(m_.hidden), ab_(bytes_of(plan_.dtypes.activations)),
        wb_(bytes_of(plan_.dtypes.weights)), wa_(bytes_of(plan_.dtypes.attn_weights())), math_(plan_.dtypes.math()),
        attn_math_(plan_.dtypes.attn_projection_math()), R_(d_.sp > 1 ? Lay::Split : Lay::Full),
        dense_w_(layer_weights_per_gpu(plan_, m_, false)), moe_w_(layer_weights_per_gpu(plan_, m_, true)),
        v_dim_(m_.attention == AttentionKind::MLA ? m_.v_head_dim : m_.head_dim),
        o_local_(static_cast<double>(m_.heads) * v_dim_ * h_ / div_of(plan_.shard(Op::AttnOut), tp_)),
        attn_layout_(plan_.shard(Op::Qkv) == Shard::Replicate ? Lay::Full : Lay::Split), mm_(m_.ffn_matrices) {
    add_groups();
    count_tokens();
    route();
  }

  void lower() {
    for (int s = 0; s < d_.pp; ++s) {
      enter_stage(s);
      for (const LoweredLayer& lowered : lo_.lowered_[static_cast<std::size_t>(s)]) {
        const int l = lowered.layer;
        b_.set_weight(lowered.weight);
        const bool moe = lo_.moe_index_[static_cast<std::size_t>(l)] >= 0;
        attention_block(s, l, moe ? moe_w_ : dense_w_);
        if (moe) moe_block(s, l, moe_w_);
        else dense_block(s, l);
      }
      b_.set_weight(1);
      if (s == d_.pp - 1) lm_head(s);
    }
  }

 private:
  static StepProgram& cleared(StepProgram& p, const std::vector<int>& rank_gpu, AllReduceKernels allreduce) {
    p.clear();
    p.rank_gpu = rank_gpu;
    p.allreduce = allreduce;
    return p;
  }
  int rank(int s, int u) const { return s * U_ + u; }
  const std::vector<int>& tp_ranks(int s, int a) const { return tp_rank_lists_[static_cast<std::size_t>(s)][static_cast<std::size_t>(a)]; }
  int tp_group(int s, int a) const { return tp_group_[static_cast<std::size_t>(s)][static_cast<std::size_t>(a)]; }

  // Groups, per stage: TP groups of each attention group, expert-TP groups, the unit (all-to-all).
  void add_groups() {
    tp_group_.assign(static_cast<std::size_t>(d_.pp), std::vector<int>(static_cast<std::size_t>(A_)));
    etp_group_.assign(static_cast<std::size_t>(d_.pp), std::vector<int>(static_cast<std::size_t>(d_.ep)));
    unit_group_.assign(static_cast<std::size_t>(d_.pp), 0);
    tp_rank_lists_.assign(static_cast<std::size_t>(d_.pp), std::vector<std::vector<int>>(static_cast<std::size_t>(A_)));
    for (int s = 0; s < d_.pp; ++s) {
      for (int a = 0; a < A_; ++a) {
        std::vector<int> g;
        for (int t = 0; t < tp_; ++t) g.push_back(rank(s, a * tp_ + t));
        tp_group_[s][a] = prog_.add_group(g);
      }
      for (int e = 0; e < d_.ep; ++e) {
        std::vector<int> g;
        for (int k = 0; k < d_.etp; ++k) g.push_back(rank(s, e * d_.etp + k));
        etp_group_[s][e] = prog_.add_group(g);
      }
      std::vector<int> all;
      for (int u = 0; u < U_; ++u) all.push_back(rank(s, u));
      unit_group_[s] = prog_.add_group(all);
    }
    for (int s = 0; s < d_.pp; ++s)
      for (int a = 0; a < A_; ++a)
        for (int t = 0; t < tp_; ++t) tp_rank_lists_[s][a].push_back(rank(s, a * tp_ + t));
  }

  // Tokens per attention group, and the tokens each emits.
  void count_tokens() {
    T_.assign(static_cast<std::size_t>(A_), 0);
    emit_.assign(static_cast<std::size_t>(A_), 0);
    for (int a = 0; a < A_ && a < static_cast<int>(batch_.groups.size()); ++a)
      for (const auto& sq : batch_.groups[static_cast<std::size_t>(a)]) {
        T_[a] += sq.new_tokens;
        emit_[a] += sq.emits ? 1 + sq.draft : 0;  // a verify step takes logits at every draft too
      }
  }

  // Routing of every lowered MoE layer (sim/step/batch_routing.hpp). Per-thread scratch: nr dense
  // U×U accumulators (2 MB at U = 128) are zeroed where the last step touched them instead of
  // being allocated per step. `routing_` stays empty without routing.
  void route() {
    thread_local std::vector<LayerRouting> scratch;
    const int nr = static_cast<int>(lo_.routed_.size());
    if (!m_.is_moe() || lo_.routing_ == nullptr || nr == 0) return;
    if (scratch.size() < static_cast<std::size_t>(nr)) scratch.resize(static_cast<std::size_t>(nr));
    routing_ = std::span<LayerRouting>(scratch.data(), static_cast<std::size_t>(nr));
    node_level_ = lo_.node_level(batch_);  // node-level all-to-alls (EngineSettings::a2a)
    const std::size_t nodes = node_level_ ? static_cast<std::size_t>(lo_.unit_nodes_.nodes) : 0;
    for (LayerRouting& L : routing_) L.reset(static_cast<std::size_t>(U_), static_cast<std::size_t>(lo_.experts_->slots()), nodes);
    // (every layer of the source: a draft head's model has fewer MoE layers than the source routes)
    BatchRoutingContext ctx{lo_.routing_, lo_.experts_.get(), lo_.routed_, nr == lo_.routing_->shape().moe_layers, tp_, d_.etp, U_,
                            node_level_ ? &lo_.unit_nodes_ : nullptr};
    route_batch(ctx, batch_, lo_.options_.max_routed_tokens_per_seq, routing_);
  }

  // A two-matrix FFN (up: (mm−1)·F outputs, down: F → h) on `group` for `tokens`; returns the output layout.
  Lay ffn(int s, int layer, int group, const std::vector<int>& ranks, double tokens, double F, Shard up, Shard down,
          int ways, double active_weights_bytes, OpClass cls, OpClass comm_cls, Lay in, ComputeKind kernel = ComputeKind::Gemm,
          double rows = -1) {
    if (rows < 0) rows = tokens;
    if (tokens <= 0) return in;
    const double mm = mm_, h = h_, ab = ab_;
    Lay x = b_.convert(in, need_of(up), group, tokens, h, ab, comm_cls, layer, s);
    b_.compute_each(ranks, group, cls, layer, s, 2 * tokens * h * F * (mm - 1) / div_of(up, ways),
                    active_weights_bytes * (mm - 1) / mm / div_of(up, ways) + tokens * (h + F * (mm - 1) / div_of(up, ways)) * ab,
                    math_, kernel, rows);
    x = out_of(up);
    const double width = x == Lay::Partial ? F * (mm - 1) : F;
    b_.convert(x, need_of(down), group, tokens, width, ab, comm_cls, layer, s);
    b_.compute_each(ranks, group, cls, layer, s, 2 * tokens * F * h / div_of(down, ways),
                    active_weights_bytes / mm / div_of(down, ways) + tokens * (F / div_of(down, ways) + h) * ab, math_, kernel,
                    rows);
    return out_of(down);
  }

  void norm(int s, int layer, int a, double tokens) {
    const double share = R_ == Lay::Split ? tokens / tp_ : tokens;
    b_.compute_each(tp_ranks(s, a), tp_group(s, a), OpClass::Norm, layer, s, 4 * share * h_, 2 * share * h_ * ab_ + h_ * 2,
                    Dtype::BF16, ComputeKind::Memory, share);
  }

  // Pipeline receive, or the embedding on the first stage.
  void enter_stage(int s) {
    for (int a = 0; a < A_; ++a) {
      if (T_[a] <= 0) continue;
      if (s == 0) {
        const Shard e = plan_.shard(Op::Embed);
        b_.compute_each(tp_ranks(s, a), tp_group(s, a), OpClass::Embedding, -1, s, 0,
                        T_[a] * h_ * (wb_ / div_of(e, tp_) + ab_), Dtype::BF16, ComputeKind::Memory, T_[a]);
        b_.convert(out_of(e) == Lay::Split && e == Shard::Vocab ? Lay::Partial : out_of(e), R_, tp_group(s, a), T_[a], h_, ab_,
                   OpClass::TpComm, -1, s);
      } else {
        for (int t = 0; t < tp_; ++t) b_.send(rank(s - 1, a * tp_ + t), rank(s, a * tp_ + t), -1, s, T_[a] * h_ * ab_ / tp_);
        b_.convert(Lay::Split, R_, tp_group(s, a), T_[a], h_, ab_, OpClass::TpComm, -1, s);
      }
    }
  }

  // Norm, QKV, core attention, output projection, per attention group.
  void attention_block(int s, int l, const LayerWeights& lw) {
    for (int a = 0; a < A_; ++a) {
      if (T_[a] <= 0) continue;
      const auto& ranks = tp_ranks(s, a);
      norm(s, l, a, T_[a]);
      b_.convert(R_, Lay::Full, tp_group(s, a), T_[a], h_, ab_, OpClass::TpComm, l, s);
      const double qkv_local = lw.attention - o_local_;
      b_.compute_each(ranks, tp_group(s, a), OpClass::QkvProj, l, s, 2 * T_[a] * qkv_local,
                      qkv_local * wa_ + T_[a] * h_ * ab_ * 2, attn_math_, ComputeKind::Gemm, T_[a]);
      lo_.attention(b_, l, s, ranks, tp_group(s, a), batch_.groups[static_cast<std::size_t>(a)]);
      const Shard os = plan_.shard(Op::AttnOut);
      b_.convert(attn_layout_, need_of(os), tp_group(s, a), T_[a], m_.heads * v_dim_, ab_, OpClass::TpComm, l, s);
      b_.compute_each(ranks, tp_group(s, a), OpClass::AttnOutProj, l, s, 2 * T_[a] * o_local_,
                      o_local_ * wa_ + T_[a] * (m_.heads * v_dim_ / tp_ + h_) * ab_, attn_math_, ComputeKind::Gemm, T_[a]);
      b_.convert(out_of(os), R_, tp_group(s, a), T_[a], h_, ab_, OpClass::TpComm, l, s);
    }
  }

  void dense_block(int s, int l) {
    for (int a = 0; a < A_; ++a) {
      if (T_[a] <= 0) continue;
      norm(s, l, a, T_[a]);
      const double w_bytes = static_cast<double>(m_.dense_ffn_params()) * wb_;
      const Lay out = ffn(s, l, tp_group(s, a), tp_ranks(s, a), T_[a], static_cast<double>(m_.dense_ffn),
                          plan_.shard(Op::DenseUp), plan_.shard(Op::DenseDown), tp_, w_bytes, OpClass::DenseFfn, OpClass::TpComm, R_);
      b_.convert(out, R_, tp_group(s, a), T_[a], h_, ab_, OpClass::TpComm, l, s);
    }
  }

  // MoE: norm and router per attention group; dispatch / experts / combine per unit. The shared
  // experts fork from the normed input but are issued after the dispatch, so that in program
  // order (what list scheduling follows) they run while the dispatch all-to-all is in flight, as
  // serving engines overlap them.
  void moe_block(int s, int l, const LayerWeights& lw) {
    shared_end_.assign(static_cast<std::size_t>(prog_.num_ranks()), -1);
    shared_out_.assign(static_cast<std::size_t>(A_), Lay::Full);
    shared_fork_.resize(static_cast<std::size_t>(A_));  // Builder state after each group's normed input
    router(s, l, lw);
    const int j = lo_.route_slot_[static_cast<std::size_t>(lo_.moe_index_[static_cast<std::size_t>(l)])];
    const bool no_ep = d_.ep == 1;
    int disp = -1, comb = -1;
    double total_bytes = 0, comb_bytes = 0;
    if (!routing_.empty()) dispatch_matrices(j, disp, comb, total_bytes, comb_bytes);
    b_.collective(CollKind::AllToAll, unit_group_[s], no_ep ? OpClass::EtpComm : OpClass::EpDispatch, l, s,
                  total_bytes / std::max(U_, 1), disp);
    shared_experts(s, l);
    routed_experts(s, l, j);
    b_.collective(CollKind::AllToAll, unit_group_[s], no_ep ? OpClass::EtpComm : OpClass::EpCombine, l, s,
                  comb_bytes / std::max(U_, 1), comb);
    // Merge the shared experts' output, then restore the residual layout.
    for (int a = 0; a < A_; ++a) {
      if (T_[a] <= 0) continue;
      for (int r : tp_ranks(s, a)) b_.join(r, shared_end_[static_cast<std::size_t>(r)]);
      if (m_.shared_experts > 0) b_.convert(shared_out_[a], Lay::Split, tp_group(s, a), T_[a], h_, ab_, OpClass::TpComm, l, s);
      b_.convert(Lay::Split, R_, tp_group(s, a), T_[a], h_, ab_, OpClass::TpComm, l, s);
    }
  }

  void router(int s, int l, const LayerWeights& lw) {
    for (int a = 0; a < A_; ++a) {
      if (T_[a] <= 0) continue;
      norm(s, l, a, T_[a]);
      b_.convert(R_, Lay::Full, tp_group(s, a), T_[a], h_, ab_, OpClass::TpComm, l, s);
      if (m_.shared_experts > 0) shared_fork_[a] = b_.snapshot();
      const Shard rs = plan_.shard(Op::Router);
      b_.compute_each(tp_ranks(s, a), tp_group(s, a), OpClass::Router, l, s, 2 * T_[a] * h_ * m_.experts / div_of(rs, tp_),
                      lw.router * wb_ + T_[a] * h_ * ab_, Dtype::BF16, ComputeKind::Gemm, T_[a]);
      if (rs == Shard::Column) b_.convert(Lay::Split, Lay::Full, tp_group(s, a), T_[a], m_.experts, 4, OpClass::TpComm, l, s);
    }
  }

  // Dispatch and combine matrices of routed layer j: token copies to the EP ranks of their
  // experts (each expert-TP member gets a copy). With ep = 1 there is no expert parallelism: every
  // rank of the unit is an expert-TP member of the one EP group, and those in the token's own
  // attention group already hold it (Full after the router). Only copies to other attention
  // groups move data — expert-TP traffic.
  void dispatch_matrices(int j, int& disp, int& comb, double& total_bytes, double& comb_bytes) {
    const bool no_ep = d_.ep == 1;
    const int tp = tp_;
    auto inside = [no_ep, tp](std::uint32_t src, std::uint32_t dst) { return no_ep && src / tp == dst / tp; };
    disp = static_cast<int>(prog_.a2a.size());
    comb = disp + 1;
    prog_.a2a.resize(prog_.a2a.size() + 2);
    const double h = h_, ab = ab_, etp = d_.etp;
    auto there = [h, ab](double copies) { return copies * h * ab; };
    auto back = [h, etp](double copies) { return copies * h * 2.0 / etp; };
    if (node_level_) {  // the node-level kernels' flows (batch_routing.hpp), backwards for the combine
      const LayerRouting& L = routing_[static_cast<std::size_t>(j)];
      const auto U = static_cast<std::size_t>(U_);
      thread_local std::vector<double> flow;
      node_level_flows(U, lo_.unit_nodes_, L.dispatch, L.node_copies, flow);
      total_bytes = flow_matrix(U, flow, there, false, prog_.a2a[static_cast<std::size_t>(disp)]);
      comb_bytes = flow_matrix(U, flow, back, true, prog_.a2a[static_cast<std::size_t>(comb)]);
      return;
    }
    routing_[static_cast<std::size_t>(j)].matrices(static_cast<std::size_t>(U_), there, back, inside,
                                                    prog_.a2a[static_cast<std::size_t>(disp)],
                                                    prog_.a2a[static_cast<std::size_t>(comb)], total_bytes, comb_bytes);
  }

  // The shared experts, beside the dispatch: from each group's fork, their end kept to join later.
  void shared_experts(int s, int l) {
    for (int a = 0; a < A_ && m_.shared_experts > 0; ++a) {
      if (T_[a] <= 0) continue;
      const auto& ranks = tp_ranks(s, a);
      const auto after = b_.snapshot();
      b_.restore(shared_fork_[a]);
      const double F = static_cast<double>(m_.shared_expert_ffn) * m_.shared_experts;
      const Shard ss = plan_.shard(Op::SharedExpert);
      shared_out_[a] = ffn(s, l, tp_group(s, a), ranks, T_[a], F, ss == Shard::Replicate ? Shard::Replicate : Shard::Column,
                           ss == Shard::Replicate ? Shard::Replicate : Shard::Row, tp_, mm_ * h_ * F * wb_,
                           OpClass::SharedExperts, OpClass::TpComm, Lay::Full);
      for (int r : ranks) shared_end_[static_cast<std::size_t>(r)] = b_.current(r);
      b_.restore(after);
    }
  }

  // Each EP rank computes its local slots' real loads (routed layer j).
  void routed_experts(int s, int l, int j) {
    const int per_rank = lo_.experts_->slots_per_rank();
    const double expert_bytes = static_cast<double>(m_.expert_params()) * wb_;
    for (int e = 0; e < d_.ep; ++e) {
      double tokens = 0, active = 0;
      if (!routing_.empty()) {
        const auto& L = routing_[static_cast<std::size_t>(j)];
        for (int x = e * per_rank; x < (e + 1) * per_rank && x < lo_.experts_->slots(); ++x) {
          tokens += L.slot_tokens[static_cast<std::size_t>(x)];
          active += L.active(static_cast<std::size_t>(x));
        }
      }
      if (tokens <= 0) continue;
      expert_ranks_.clear();
      for (int k = 0; k < d_.etp; ++k) expert_ranks_.push_back(rank(s, e * d_.etp + k));
      const Lay out = ffn(s, l, etp_group_[s][e], expert_ranks_, tokens, static_cast<double>(m_.expert_ffn),
                          plan_.shard(Op::ExpertUp), plan_.shard(Op::ExpertDown), d_.etp, active * expert_bytes, OpClass::Experts,
                          OpClass::EtpComm, Lay::Full, ComputeKind::GroupedGemm, tokens / std::max(active, 1.0));
      b_.convert(out, Lay::Split, etp_group_[s][e], tokens, h_, ab_, OpClass::EtpComm, l, s);
    }
  }

  void lm_head(int s) {
    for (int a = 0; a < A_; ++a) {
      if (emit_[a] <= 0) continue;
      norm(s, -1, a, emit_[a]);
      b_.convert(R_, Lay::Full, tp_group(s, a), emit_[a], h_, ab_, OpClass::TpComm, -1, s);
      const Shard hs = plan_.shard(Op::LmHead);
      b_.compute_each(tp_ranks(s, a), tp_group(s, a), OpClass::LmHead, -1, s, 2 * emit_[a] * h_ * m_.vocab / div_of(hs, tp_),
                      m_.vocab * h_ * wb_ / div_of(hs, tp_) + emit_[a] * (h_ + m_.vocab / div_of(hs, tp_)) * ab_, math_,
                      ComputeKind::Gemm, emit_[a]);
      b_.convert(out_of(hs), Lay::Full, tp_group(s, a), emit_[a], m_.vocab, ab_, OpClass::TpComm, -1, s);
    }
  }

  const Lowering& lo_;
  const ModelSpec& m_;
  const Degrees& d_;
  const Plan& plan_;
  const ReplicaBatch& batch_;
  StepProgram& prog_;
  Builder b_;
  const int U_, tp_, A_;
  const double h_, ab_, wb_, wa_;  // activation, weight and attention-projection weight bytes per element
  const Dtype math_, attn_math_;  // GEMMs: the plan's, and the attention projections'
  const Lay R_;  // residual-stream layout
  const LayerWeights dense_w_, moe_w_;
  const double v_dim_, o_local_;
  const Lay attn_layout_;
  const double mm_;
  std::vector<std::vector<int>> tp_group_, etp_group_;
  std::vector<int> unit_group_;
  bool node_level_ = false;  // this step's all-to-alls run node-level (route())
  std::vector<std::vector<std::vector<int>>> tp_rank_lists_;
  std::vector<double> T_, emit_;  // per attention group: new tokens, emitted tokens
  std::span<LayerRouting> routing_;
  // Scratch of the MoE layers, kept across them.
  std::vector<int> shared_end_, expert_ranks_;
  std::vector<Lay> shared_out_;
  std::vector<std::vector<int>> shared_fork_;
};

void Lowering::lower_whole(const ReplicaBatch& batch, StepProgram& prog) const { WholeStep(*this, batch, prog).lower(); }

}  // namespace shardsim
