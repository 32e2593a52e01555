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

Plan megatron_plan(const ModelSpec& m, const Cluster& cluster) {
  const int n = cluster.num_gpus();
  Plan plan;
  plan.name = "megatron";
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

}  // namespace shardsim
