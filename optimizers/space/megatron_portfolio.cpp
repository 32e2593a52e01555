// optimizers/space/megatron_portfolio.cpp — H1–H6 as plans.
#include "optimizers/space/megatron_portfolio.hpp"

#include "optimizers/space/disaggregated_space.hpp"

#include <numeric>

#include "sim/plan/megatron_rule.hpp"
#include "sim/plan/memory_model.hpp"
#include "sim/plan/plan_check.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

namespace shardsim {

namespace {

struct Builder {
  const ModelSpec& m;
  const Cluster& c;
  const Plan& base;
  PoolGpus pool;
  std::vector<RulePlan> out;

  bool fits(const Plan& p) const { return check_pool(p, m, c, pool.gpus).feasible(); }

  // Adds the rule with unit = tp × attn_dp, experts split ep × etp; raises pp until it fits.
  void add(const std::string& rule, int tp, int attn_dp, int ep, int etp) {
    const int n = pool.gpus, unit = tp * attn_dp;
    if (unit < 1 || n % unit != 0 || ep * etp != unit) return;
    if (m.is_moe() && (m.experts % ep != 0)) return;
    for (int pp = 1; pp <= m.layers && pp <= n / unit; ++pp) {
      if ((n / unit) % pp != 0) continue;
      Plan p = base;
      p.decode_pool.clear();
      p.first_gpu = pool.first;
      p.name = "megatron";
      p.sharding = Plan().sharding;
      p.mapping = Plan().mapping;
      p.deg = Degrees{};
      p.deg.tp = tp, p.deg.attn_dp = attn_dp, p.deg.pp = pp, p.deg.dp = n / (unit * pp);
      p.deg.ep = m.is_moe() ? ep : 1;
      p.deg.etp = m.is_moe() ? etp : unit;
      if (!fits(p)) continue;
      push(rule, p);
      if (tp > 1) {
        p.deg.sp = tp;
        if (fits(p)) push(rule + " +SP", p);
      }
      return;
    }
  }
  void push(const std::string& rule, const Plan& p) {
    for (const auto& r : out)
      if (r.plan == p) return;
    out.push_back({rule, p});
  }
};

}  // namespace

std::vector<RulePlan> megatron_portfolio(const ModelSpec& m, const Cluster& c, const Plan& base, PoolGpus pool) {
  if (pool.gpus <= 0) pool = PoolGpus{c.num_gpus(), 0};
  Builder b{m, c, base, pool, {}};
  const int g = c.gpus_per_node(), n = pool.gpus;
  const Dtype w = base.dtypes.weights;
  std::vector<int> valid;
  for (int t = 1; t <= g; t *= 2)
    if (n % t == 0 && megatron_valid_tp(m, t, g, w)) valid.push_back(t);
  if (valid.empty()) valid.push_back(1);
  const int tp_max = valid.back();
  // M_min: the smallest power-of-two GPU count whose share of the weights fits (KV reserve 30%).
  const double weights = [&] {
    Plan p = base;
    p.deg = Degrees{};
    p.deg.dp = n;
    double bytes = 0;
    for (const auto& s : plan_memory(p, m, c).stages) bytes += s.weights;
    return bytes;
  }();
  int m_min = 1;
  while (m_min < n && weights / m_min > 0.7 * usable_bytes(base.engine, c.pool_gpu(pool.first).hbm_bytes, 0)) m_min *= 2;
  int tp_min = valid.back();
  for (int t : valid)
    if (t >= std::min(m_min, g)) {
      tp_min = t;
      break;
    }
  const bool moe = m.is_moe();
  auto experts_tp = [&](const std::string& rule, int tp) { b.add(rule, tp, 1, 1, tp); };
  experts_tp("H1 TP-max", tp_max);
  experts_tp("H2 min-MP+DP", tp_min);
  if (megatron_valid_tp(m, g, g, w)) experts_tp("H3 TP=node×PP", g);
  if (moe) {
    for (int tp : {tp_max, tp_min}) {
      int ep = std::gcd(tp, m.experts);
      b.add("H4 TP+EP", tp, 1, ep, tp / ep);
      for (int e : {2, 4})
        if (e < tp && tp % e == 0) b.add("H4' TP·EP folding", tp, 1, e, tp / e);
    }
    // H5: attention-DP + EP over a node-sized unit (or the smallest multiple that fits).
    const bool mla = m.attention == AttentionKind::MLA;
    for (int unit = g; unit <= n; unit *= 2) {
      std::size_t before = b.out.size();
      for (int tp : {1, 2, 4}) {
        if (mla && tp > 1) continue;
        if (tp > g || m.heads % tp != 0) continue;
        int ep = std::gcd(unit, m.experts);
        b.add("H5 attn-DP+EP", tp, unit / tp, ep, unit / ep);
      }
      if (b.out.size() > before) break;
    }
    // H6: DeepSeek-style wide EP units.
    for (int unit : {32, 64, 128, 256})
      if (unit <= n && unit > g)
        for (int tp : {1, 4})
          if (m.heads % tp == 0 && m.experts % unit == 0) b.add("H6 wide-EP", tp, unit / tp, unit, 1);
  }
  if (b.out.empty() && pool.gpus == c.num_gpus()) b.out.push_back({"H1 TP-max (does not fit)", megatron_plan(m, c)});
  return b.out;
}

namespace {

// A disaggregated space's rule plans: at every split, each rule applied to both pools.
std::vector<RulePlan> pool_portfolio(const DisaggregatedSpace& space) {
  std::vector<RulePlan> out;
  for (int s = 0; s < space.splits(); ++s) {
    auto rules = [&](int k) {
      const PoolSpace& pool = space.pool(s, k);
      return megatron_portfolio(space.model(), space.cluster(), pool.base(), pool.pool());
    };
    const std::string& split = space.decisions().front().labels[static_cast<std::size_t>(s)];  // "8P8D"
    const auto pre = rules(0), dec = rules(1);
    for (const auto& a : pre)
      for (const auto& d : dec)
        if (a.rule == d.rule)
          out.push_back({a.rule + " " + split, disaggregated_plan(a.plan, d.plan, space.pool(s, 1).pool().first == 0)});
  }
  return out;
}

}  // namespace

std::vector<RuleGenes> portfolio_genes(const SearchSpace& space) {
  std::vector<RuleGenes> out;
  const auto* pools = dynamic_cast<const DisaggregatedSpace*>(&space);
  for (const auto& r : pools ? pool_portfolio(*pools) : megatron_portfolio(space.model(), space.cluster(), space.base())) {
    Genes g;
    if (!space.encode(r.plan, g)) continue;
    bool dup = false;
    for (const auto& o : out) dup |= space.key(o.genes) == space.key(g);
    if (!dup) out.push_back({r.rule, g});
  }
  return out;
}

}  // namespace shardsim
