// sim/plan/plan_check.cpp — the feasibility rules (docs/references.md §A.3) with explanations.
#include "sim/plan/plan_check.hpp"

#include <set>
#include <sstream>

#include "sim/plan/plan_layout.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

namespace shardsim {

namespace {

std::string gb(double bytes) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << bytes / 1e9 << " GB";
  return s.str();
}

// Adds a violation when `group` spans more than one NVLink domain.
void check_domain(const std::vector<std::vector<int>>& groups, const Cluster& c, const char* what, const char* field,
                  std::vector<Violation>& out) {
  for (const auto& g : groups) {
    std::set<int> nodes;
    for (int gpu : g) nodes.insert(c.node_of(gpu));
    if (nodes.size() > 1) {
      out.push_back({field, std::string(what) + " group of GPUs " + std::to_string(g.front()) + ".." +
                                std::to_string(g.back()) + " spans " + std::to_string(nodes.size()) +
                                " NVLink domains of " + std::to_string(c.gpus_per_node()) +
                                " GPUs (reduce it, change the mapping, or allow it: allow_cross_node_tp=1 in the compact string, "
                                "\"allow_cross_node_tp\": true in JSON)"});
      return;
    }
  }
}

// What the engine's KV budget leaves for the cache, and how sequences get it.
std::string kv_pool_note(const Plan& plan, const MemoryReport& mem) {
  const EngineSettings& e = plan.engine;
  const StageMemory& w = mem.worst();
  std::ostringstream o;
  o << "KV pool: " << gb(mem.usable - w.static_bytes()) << " per GPU = ";
  if (e.kv_budget == KvBudget::FreeFraction)
    o << e.kv_fraction << " × the " << gb(mem.hbm - w.static_bytes()) << " free after weights, activations, buffers and runtime";
  else
    o << e.kv_fraction << " × " << gb(mem.hbm) << " minus " << gb(w.static_bytes()) << " of weights, activations, buffers, runtime";
  o << " → " << static_cast<long long>(mem.kv_capacity_tokens) << " tokens per attention group at "
    << to_string(plan.dtypes.kv) << " (" << w.kv_per_token / 1024 << " KiB per token); policy " << to_string(e.policy);
  if (e.policy == KvPolicy::OnDemand) o << " (blocks of " << e.kv_block << " tokens, preemption by " << to_string(e.preemption) << ")";
  if (e.policy == KvPolicy::Reserve) o << " (prompt + " << (e.max_output > 0 ? std::to_string(e.max_output) : "max_context − prompt") << " output tokens reserved at admission)";
  if (e.policy == KvPolicy::ReserveExact) o << " (knows each request's true output length: an oracle, for studies only)";
  return o.str();
}

// Redundant experts: MoE with ep > 1, experts + N a multiple of ep (every EP rank holds the same
// number of slots; 256 + 32 = 288 slots make EP72 possible), at most one extra copy of every expert.
void check_redundant_experts(const Plan& plan, const ModelSpec& m, std::vector<Violation>& v) {
  const int n = plan.redundant_experts, ep = plan.deg.ep;
  if (n == 0) return;
  const std::string field = "/redundant_experts";
  if (!m.is_moe()) v.push_back({field, std::to_string(n) + " redundant experts but " + m.name + " has no experts"});
  else if (ep == 1) v.push_back({field, "redundant experts need expert parallelism (ep > 1); ep = 1 holds every expert on every GPU"});
  else if ((m.experts + n) % ep != 0)
    v.push_back({field, std::to_string(m.experts) + " experts + " + std::to_string(n) + " redundant slots = " +
                            std::to_string(m.experts + n) + " slots, not a multiple of ep=" + std::to_string(ep) +
                            " (every EP rank holds the same number of slots)"});
  else if (n > m.experts)
    v.push_back({field, std::to_string(n) + " redundant slots exceed the " + std::to_string(m.experts) +
                            " routed experts (at most one extra copy of each)"});
}

}  // namespace

PlanCheck check_pool(const Plan& plan, const ModelSpec& m, const Cluster& cluster, int gpus) {
  PlanCheck r;
  auto& v = r.violations;
  const Degrees& d = plan.deg;
  auto s = [](auto x) { return std::to_string(x); };

  bool degrees_ok = true;
  if (d.gpus() != gpus) {
    v.push_back({"/degrees", "dp×pp×tp×attn_dp = " + s(d.dp) + "×" + s(d.pp) + "×" + s(d.tp) + "×" + s(d.attn_dp) +
                                 " = " + s(d.gpus()) + " GPUs, but the cluster has " + s(gpus)});
    degrees_ok = false;
  } else if (plan.first_gpu + d.gpus() > cluster.num_gpus()) {
    v.push_back({"/degrees", "GPUs " + s(plan.first_gpu) + ".." + s(plan.first_gpu + d.gpus() - 1) +
                                 " (after the other pool's " + s(plan.first_gpu) + ") exceed the cluster's " +
                                 s(cluster.num_gpus())});
    degrees_ok = false;
  }
  if (degrees_ok && !cluster.one_gpu_type(plan.first_gpu, d.gpus())) {  // a pool on one GPU type (Cluster: mixed clusters)
    int other = plan.first_gpu + 1;
    while (cluster.gpu_type_of(other) == cluster.gpu_type_of(plan.first_gpu)) ++other;
    v.push_back({"/degrees", "GPUs " + s(plan.first_gpu) + ".." + s(plan.first_gpu + d.gpus() - 1) + " hold " +
                                 cluster.gpu_of(plan.first_gpu).name + " and " + cluster.gpu_of(other).name +
                                 " GPUs: a pool lies on one GPU type (on a mixed cluster, disaggregate: one pool per type)"});
    degrees_ok = false;
  }
  if (d.ep * d.etp != d.unit()) {
    v.push_back({"/degrees/ep", "ep×etp = " + s(d.ep) + "×" + s(d.etp) + " = " + s(d.ep * d.etp) +
                                    " must equal tp×attn_dp = " + s(d.unit()) + " (the GPUs of one stage)"});
    degrees_ok = false;
  }
  if (m.heads % d.tp != 0)
    v.push_back({"/degrees/tp", "tp=" + s(d.tp) + " does not divide the " + s(m.heads) + " attention heads"});
  if (m.attention == AttentionKind::GQA && d.tp > 1 && m.kv_heads % d.tp != 0 && d.tp % m.kv_heads != 0)
    v.push_back({"/degrees/tp", "tp=" + s(d.tp) + " neither divides nor is a multiple of the " + s(m.kv_heads) +
                                    " KV heads"});
  if (m.attention == AttentionKind::GQA && d.tp > m.kv_heads)
    r.notes.push_back("tp=" + s(d.tp) + " > " + s(m.kv_heads) + " KV heads: KV heads are replicated, KV cache duplicated");
  if (m.attention == AttentionKind::MLA && d.tp > 1)
    r.notes.push_back("MLA latent KV cache is not split by attention TP (each of the " + s(d.tp) +
                      " TP ranks holds it whole); attention-DP avoids the duplication");
  if (d.sp != 1 && d.sp != d.tp)
    v.push_back({"/degrees/sp", "sp=" + s(d.sp) + " must be 1 or equal tp=" + s(d.tp) +
                                    " (sequence parallelism runs in the TP group)"});
  r.notes.push_back("data types " + plan.dtypes.describe());
  if (plan.dtypes.attention == Dtype::FP8 && plan.dtypes.kv != Dtype::FP8)
    v.push_back({"/dtypes/attention", "FP8 attention reads an FP8 KV cache (TensorRT-LLM's FP8 FMHA and FP8 MLA); set kv=fp8 too"});
  if (d.pp > m.layers)
    v.push_back({"/degrees/pp", "pp=" + s(d.pp) + " exceeds the " + s(m.layers) + " layers"});

  bool fp8 = plan.dtypes.weights == Dtype::FP8;
  if (m.is_moe()) {
    if (m.experts % d.ep != 0 && plan.redundant_experts == 0)  // with redundant slots: check_redundant_experts
      v.push_back({"/degrees/ep", "ep=" + s(d.ep) + " does not divide the " + s(m.experts) +
                                      " routed experts (redundant_experts can round the slots up to a multiple)"});
    if (plan.shard(Op::ExpertUp) != Shard::Replicate || plan.shard(Op::ExpertDown) != Shard::Replicate) {
      if (m.expert_ffn % d.etp != 0)
        v.push_back({"/degrees/etp", "etp=" + s(d.etp) + " does not divide the expert FFN width " + s(m.expert_ffn)});
      else if (fp8 && (m.expert_ffn / d.etp) % 128 != 0)
        v.push_back({"/degrees/etp", "expert FFN width " + s(m.expert_ffn) + "/etp=" + s(m.expert_ffn / d.etp) +
                                         " is not a multiple of the 128-wide FP8 blocks"});
    }
  } else if (d.ep != 1) {
    v.push_back({"/degrees/ep", "ep=" + s(d.ep) + " but " + m.name + " has no experts"});
  }
  check_redundant_experts(plan, m, v);
  if (m.num_dense_layers() > 0 && m.dense_ffn > 0 &&
      (plan.shard(Op::DenseUp) != Shard::Replicate || plan.shard(Op::DenseDown) != Shard::Replicate)) {
    if (m.dense_ffn % d.tp != 0)
      v.push_back({"/degrees/tp", "tp=" + s(d.tp) + " does not divide the dense FFN width " + s(m.dense_ffn)});
    else if (fp8 && (m.dense_ffn / d.tp) % 128 != 0)
      v.push_back({"/degrees/tp", "dense FFN width " + s(m.dense_ffn) + "/tp=" + s(m.dense_ffn / d.tp) +
                                      " is not a multiple of the 128-wide FP8 blocks"});
  }
  if (m.vocab % d.tp != 0 && plan.shard(Op::LmHead) == Shard::Vocab)
    r.notes.push_back("vocabulary " + s(m.vocab) + " is not divisible by tp=" + s(d.tp) + ": shards are padded");

  const EngineSettings& b = plan.engine;
  if (b.prefill_chunk > b.max_batch_tokens)
    v.push_back({"/engine/prefill_chunk", "prefill_chunk=" + s(b.prefill_chunk) + " exceeds max_batch_tokens=" +
                                                s(b.max_batch_tokens)});
  if (b.spec_tokens > 0 && d.pp > 1)  // the draft head runs beside the LM head; SGLang and TensorRT-LLM's MTP run without PP
    v.push_back({"/engine/spec_tokens", "spec_tokens=" + s(b.spec_tokens) + " with pp=" + s(d.pp) +
                                            ": speculative decoding is modelled without pipeline parallelism"});
  if (b.spec_tokens > 0 && b.max_batch_tokens < 1 + b.spec_tokens)
    v.push_back({"/engine/spec_tokens", "spec_tokens=" + s(b.spec_tokens) + ": a decode step of one sequence needs " +
                                            s(1 + b.spec_tokens) + " tokens, above max_batch_tokens=" + s(b.max_batch_tokens)});
  const GpuSpec& gpu = cluster.pool_gpu(plan.first_gpu);
  if (const double host = gpu.host_bytes; host > 0 && b.kv_host + b.weight_offload > host)
    v.push_back({b.kv_host > 0 ? "/engine/kv_host_gb" : "/engine/weight_offload_gb",
                 "kv_host_gb + weight_offload_gb = " + gb(b.kv_host + b.weight_offload) + " per GPU, above the " +
                     gb(host) + " of host memory each " + gpu.name + " has (GPU field host_bytes)"});
  if (m.max_positions > 0 && b.max_context > m.max_positions)
    v.push_back({"/engine/max_context", "max_context=" + s(b.max_context) + " exceeds the model's " +
                                              s(m.max_positions) + " positions"});

  if (degrees_ok) {
    PlanLayout layout(plan);
    if (!plan.allow_cross_node_tp) {
      check_domain(layout.groups(GroupKind::Tp), cluster, "a TP", "/degrees/tp", v);
      if (m.is_moe() && d.etp > 1) check_domain(layout.groups(GroupKind::Etp), cluster, "an expert-TP", "/degrees/etp", v);
    }
    if (m.is_moe() && d.ep > cluster.gpus_per_node())
      r.notes.push_back("ep=" + s(d.ep) + " spans NVLink domains: the all-to-all crosses the network (wide EP)");
    r.memory = plan_memory(plan, m, cluster);
    r.memory_valid = true;
    const MemoryReport& mem = r.memory;
    if (!mem.fits)
      v.push_back({"/memory", "stage " + s(mem.worst_stage) + " needs " +
                                  gb(mem.worst().static_bytes() + mem.kv_one_seq) +
                                  " per GPU (weights, activations, buffers, KV of one " + s(b.max_context) +
                                  "-token sequence) but " + gb(mem.usable) + " is usable: over by " + gb(-mem.headroom)});
    else if (mem.kv_at_limits > mem.usable - mem.worst().static_bytes())
      r.notes.push_back("KV cache for max_seqs=" + s(b.max_seqs) + (plan.deg.attn_dp > 1 && b.rank_limits ? " per rank" : "") + " full-length sequences needs " +
                        gb(mem.kv_at_limits) + " per GPU; " + gb(mem.usable - mem.worst().static_bytes()) +
                        " is left, so admission is limited by KV capacity (" +
                        s(static_cast<long long>(mem.kv_capacity_tokens)) + " tokens per attention group)");
    r.notes.push_back(kv_pool_note(plan, mem));
  }
  return r;
}

namespace {

// Adds a pool's violations (fields under /prefill or /decode) and notes ("prefill pool: …").
void merge_pool(PlanCheck& into, const PlanCheck& pool, const std::string& name) {
  for (const auto& x : pool.violations) into.violations.push_back({"/" + name + x.field, x.reason});
  for (const auto& n : pool.notes) into.notes.push_back(name + " pool: " + n);
}

}  // namespace

PlanCheck check_plan(const Plan& plan, const ModelSpec& m, const Cluster& cluster) {
  if (!plan.disaggregated()) return check_pool(plan, m, cluster, cluster.num_gpus());
  const Plan prefill = plan.prefill();
  const Plan& decode = plan.decode();
  PlanCheck r;
  const int total = plan.total_gpus(), n = cluster.num_gpus();
  if (total != n)
    r.violations.push_back({"/decode/degrees", "the prefill pool's " + std::to_string(prefill.deg.gpus()) + " GPUs and the decode pool's " +
                                                   std::to_string(decode.deg.gpus()) + " make " + std::to_string(total) +
                                                   ", but the cluster has " + std::to_string(n)});
  PlanCheck p = check_pool(prefill, m, cluster, prefill.deg.gpus());
  PlanCheck d = check_pool(decode, m, cluster, decode.deg.gpus());
  merge_pool(r, p, "prefill");
  merge_pool(r, d, "decode");
  r.memory = d.memory;  // the pool whose KV capacity limits the batch
  r.memory_valid = d.memory_valid;
  r.pool_memory = {p.memory, d.memory};
  return r;
}

}  // namespace shardsim
