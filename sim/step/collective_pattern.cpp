// sim/step/collective_pattern.cpp — which GPU sends what to which for each collective algorithm (see the header).
#include "sim/step/collective_pattern.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "topologies/cluster.hpp"

namespace shardsim {

double CollectivePattern::own_time(const Cluster& c, const CollectiveModel& m) const {
  double t = 0;
  for (const Ring& r : rings)
    if (r.gpus.size() > 1 && r.steps > 0) t = std::max(t, r.steps * r.chunk / ring_hop(c, r.gpus, m).bw);
  // A stage takes as long as its busiest GPU port, each way: a GPU's flows of one stage share it.
  double staged = 0;
  std::map<int, double> out, in;
  for (const auto& stage : stages) {
    out.clear();
    in.clear();
    double slowest = 0;
    for (const Flow& f : stage) {
      if (f.src == f.dst) continue;
      const double s = f.bytes / hop(c, f.src, f.dst, m).bw;
      slowest = std::max({slowest, out[f.src] += s, in[f.dst] += s});
    }
    staged += slowest;
  }
  return std::max(t, staged);
}

CollectivePattern collective_pattern(const Cluster& c, CollKind kind, const std::vector<int>& gpus, double bytes,
                                     const CollectiveTime& t, const CollectiveModel& /*m*/) {
  CollectivePattern out;
  const int p = static_cast<int>(gpus.size());
  if (p < 2 || !(bytes > 0) || kind == CollKind::AllToAll) return out;
  const bool all_reduce = kind == CollKind::AllReduce;
  if (t.algo == CollAlgo::Nvls) {
    std::vector<CollectivePattern::Flow> in, back;
    for (int i = 0; i < p; ++i) {
      const int a = gpus[static_cast<std::size_t>(i)], b = gpus[static_cast<std::size_t>((i + 1) % p)];
      in.push_back({a, b, bytes});
      back.push_back({a, b, bytes / p});
    }
    out.stages = {std::move(in), std::move(back)};
    return out;
  }
  if (t.algo == CollAlgo::OneShot || t.algo == CollAlgo::TwoShot) {
    // One-shot: every member reads each peer's whole buffer. Two-shot: each reads its 1/p shard
    // from every peer (reduce-scatter), then every peer reads its reduced shard (all-gather).
    const bool one = t.algo == CollAlgo::OneShot;
    std::vector<CollectivePattern::Flow> stage;
    for (int a : gpus)
      for (int b : gpus)
        if (a != b) stage.push_back({a, b, one ? bytes : bytes / p});
    out.stages.push_back(stage);
    if (!one) out.stages.push_back(std::move(stage));
    return out;
  }
  const auto domains = by_domain(c, gpus);
  const std::size_t k = domains.front().size();
  bool even = domains.size() > 1;
  for (const auto& d : domains) even = even && d.size() == k;
  if (even) {
    // NCCL's ring over all p members, one channel per local index: each member sends
    // 2(p−1)/p·S in all (all-reduce; (p−1)/p·S otherwise), (k−1)/k of it over NVLink to the next GPU
    // of its node and 1/k over its NIC to the same local index of the next node — as a ring inside
    // each node and one per local index across the nodes.
    const double total = (all_reduce ? 2.0 : 1.0) * (p - 1) / p * bytes;
    const int n = static_cast<int>(domains.size()), kk = static_cast<int>(k);
    const int per = all_reduce ? 2 : 1;
    if (kk > 1)
      for (const auto& d : domains) out.rings.push_back({d, per * (kk - 1), total / kk / per});
    for (std::size_t j = 0; j < k; ++j) {
      CollectivePattern::Ring r{{}, per * (n - 1), total / kk / (per * (n - 1))};
      for (const auto& d : domains) r.gpus.push_back(d[j]);
      out.rings.push_back(std::move(r));
    }
    return out;
  }
  if (t.algo == CollAlgo::Tree && all_reduce) {
    const int depth = static_cast<int>(std::ceil(std::log2(static_cast<double>(p))));
    std::vector<std::vector<CollectivePattern::Flow>> up(static_cast<std::size_t>(depth));
    for (int l = 0; l < depth; ++l)
      for (int i = 1 << l; i < p; i += 2 << l)
        up[static_cast<std::size_t>(l)].push_back({gpus[static_cast<std::size_t>(i)], gpus[static_cast<std::size_t>(i - (1 << l))], bytes});
    for (const auto& s : up) out.stages.push_back(s);
    for (auto s = up.rbegin(); s != up.rend(); ++s) {
      std::vector<CollectivePattern::Flow> down = *s;
      for (auto& f : down) std::swap(f.src, f.dst);
      out.stages.push_back(std::move(down));
    }
    return out;
  }
  out.rings.push_back({gpus, all_reduce ? 2 * (p - 1) : p - 1, bytes / p});
  return out;
}

}  // namespace shardsim
