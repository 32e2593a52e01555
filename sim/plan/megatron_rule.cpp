// sim/plan/megatron_rule.cpp — TP-max inside the node, PP for memory, DP for the rest.
#include "sim/plan/megatron_rule.hpp"

#include <numeric>

#include "sim/plan/memory_model.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

namespace shardsim {

bool megatron_valid_tp(const ModelSpec& m, int tp, int gpus_per_node, Dtype weights) {
  if (tp > gpus_per_node || m.heads % tp != 0) return false;
  if (m.attention == AttentionKind::GQA && m.kv_heads % tp != 0 && tp % m.kv_heads != 0) return false;
  if (m.num_dense_layers() > 0 && m.dense_ffn > 0) {
    if (m.dense_ffn % tp != 0) return false;
    if (weights == Dtype::FP8 && (m.dense_ffn / tp) % 128 != 0) return false;
  }
  return true;
}

namespace {

// The rule on `n` GPUs from `first` on.
Plan pool_rule(const ModelSpec& m, const Cluster& cluster, int first, int n) {
  Plan plan;
  plan.name = "megatron";
  plan.first_gpu = first;
  PlanDefaults defaults = plan_defaults(m);
  plan.dtypes = defaults.dtypes;
  plan.engine.max_context = defaults.max_context;
  int tp = 1;
  for (int t = 1; t <= cluster.gpus_per_node(); t *= 2)
    if (n % t == 0 && megatron_valid_tp(m, t, cluster.gpus_per_node(), plan.dtypes.weights)) tp = t;
  plan.deg.tp = tp;
  if (m.is_moe()) {
    plan.deg.ep = std::gcd(tp, m.experts);
    plan.deg.etp = tp / plan.deg.ep;
  } else {
    plan.deg.ep = 1;
    plan.deg.etp = tp;
  }
  // Smallest pipeline depth (a divisor of the remaining GPUs, ≤ layers) that fits.
  Plan last = plan;
  for (int pp = 1; pp <= n / tp && pp <= m.layers; ++pp) {
    if ((n / tp) % pp != 0) continue;
    Plan p = plan;
    p.deg.pp = pp;
    p.deg.dp = n / (tp * pp);
    last = p;
    if (plan_memory(p, m, cluster).fits) return p;
  }
  return last;
}

}  // namespace

Plan megatron_plan(const ModelSpec& m, const Cluster& cluster) {
  const int n = cluster.num_gpus();
  // A mixed cluster of two types, each on consecutive nodes: one pool per type, decode on the one
  // with the faster HBM (decode steps read weights and KV; prefill is compute-bound), as Splitwise
  // argues. Otherwise the rule on all GPUs (which check_plan refuses on a mixed cluster, saying why).
  if (cluster.gpu_types().size() == 2) {
    int cut = 0;
    while (cut < n && cluster.gpu_type_of(cut) == 0) ++cut;
    if (cluster.one_gpu_type(cut, n - cut)) {  // the second type on the nodes after the first's
      const GpuSpec &a = cluster.gpu_types()[0], &b = cluster.gpu_types()[1];
      const bool decode_first = a.hbm_bw > b.hbm_bw || (a.hbm_bw == b.hbm_bw && a.hbm_bytes > b.hbm_bytes);
      const int dec_gpus = decode_first ? cut : n - cut;
      Plan p = disaggregated_plan(pool_rule(m, cluster, decode_first ? cut : 0, n - dec_gpus),
                                  pool_rule(m, cluster, decode_first ? 0 : cut, dec_gpus), decode_first);
      p.name = "megatron";
      return p;
    }
  }
  return pool_rule(m, cluster, 0, n);
}

}  // namespace shardsim
