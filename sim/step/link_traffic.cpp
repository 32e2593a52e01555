// sim/step/link_traffic.cpp — bytes of a step program per link, by NCCL's traffic patterns.
#include "sim/step/link_traffic.hpp"

#include <algorithm>

#include "sim/step/collective_pattern.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

LinkTrafficCounter::LinkTrafficCounter(const Cluster& cluster, const CollectiveModel& model)
    : c_(cluster), model_(model), load_(2 * static_cast<std::size_t>(cluster.num_links()), 0.0) {}

int LinkTrafficCounter::local(int gpu) {
  if (local_.empty()) local_.assign(static_cast<std::size_t>(c_.num_gpus()), -1);
  std::int32_t& l = local_[static_cast<std::size_t>(gpu)];
  if (l >= 0) return l;
  l = seen_++;
  if (seen_ > cap_) {  // the table of pairs doubles, its rows moved to their new stride
    const int cap = std::max(16, 2 * cap_);
    std::vector<std::int32_t> grown(static_cast<std::size_t>(cap) * static_cast<std::size_t>(cap), 0);
    for (int i = 0; i < cap_; ++i)
      std::copy_n(route_at_.begin() + static_cast<std::ptrdiff_t>(i) * cap_, cap_,
                  grown.begin() + static_cast<std::ptrdiff_t>(i) * cap);
    route_at_ = std::move(grown);
    cap_ = cap;
  }
  return l;
}

std::pair<const int*, const int*> LinkTrafficCounter::hops(int src, int dst) {
  const int ls = local(src), ld = local(dst);  // (both before the index: either may grow the table)
  std::int32_t& at = route_at_[static_cast<std::size_t>(ls) * static_cast<std::size_t>(cap_) + static_cast<std::size_t>(ld)];
  if (at == 0) {
    const Route r = c_.route(src, dst);
    const std::vector<Vertex> v = c_.route_vertices(src, r);
    at = static_cast<std::int32_t>(hops_.size()) + 1;
    hops_.push_back(static_cast<int>(r.links.size()));
    for (std::size_t i = 0; i < r.links.size(); ++i)
      hops_.push_back(2 * r.links[i] + (static_cast<int>(v[i]) == c_.link_ends(r.links[i]).first ? 0 : 1));
  }
  const int* first = hops_.data() + at;
  return {first, first + first[-1]};
}

void LinkTrafficCounter::carry(int src, int dst, double bytes) {
  const auto [first, last] = hops(src, dst);
  for (const int* h = first; h != last; ++h) {
    const auto d = static_cast<std::size_t>(*h);
    if (load_[d] == 0) touched_.push_back(*h);
    load_[d] += bytes;
  }
}

// src → dst. Across nodes and rails of a rail-optimised fabric the bytes stay on one rail: through
// the sender's GPU on the receiver's rail (send side, PXN), or along the sender's rail to the
// receiver's node's GPU on it, then over NVLink (receive side, DeepEP's forwarding).
void LinkTrafficCounter::flow(int src, int dst, double bytes, A2aRouting routing) {
  if (src == dst || !(bytes > 0)) return;
  if (c_.fabric().rail_optimized && !c_.same_nvlink_domain(src, dst) && !c_.same_rail(src, dst)) {
    const int gpn = c_.gpus_per_node();
    const int proxy = routing == A2aRouting::SendSide ? c_.node_of(src) * gpn + c_.rail_of(dst)
                                                      : c_.node_of(dst) * gpn + c_.rail_of(src);
    carry(src, proxy, bytes);
    carry(proxy, dst, bytes);
    return;
  }
  carry(src, dst, bytes);
}

// An all-reduce, reduce-scatter or all-gather: the flows of its pattern (collective_pattern.hpp),
// the one the SimGrid tier expands, for the algorithm collective_time() picks.
void LinkTrafficCounter::collective(const StepProgram& p, const StepOp& op) {
  const std::vector<int>& g = p.groups[static_cast<std::size_t>(op.group)];
  std::vector<int> gpus(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) gpus[i] = p.rank_gpu[static_cast<std::size_t>(g[i])];
  const auto key = std::make_tuple(gpus, static_cast<int>(op.coll), op.bytes, static_cast<int>(op.algo), static_cast<int>(p.allreduce));
  auto it = choice_.find(key);
  if (it == choice_.end())
    it = choice_.emplace(key, collective_time(c_, op.coll, gpus, op.bytes, op.algo, model_, p.allreduce)).first;
  const CollectivePattern pat = collective_pattern(c_, op.coll, gpus, op.bytes, it->second, model_);
  for (const CollectivePattern::Ring& r : pat.rings) {
    const std::size_t n = r.gpus.size();
    for (std::size_t i = 0; i < n; ++i) flow(r.gpus[i], r.gpus[(i + 1) % n], r.steps * r.chunk * op.weight);
  }
  for (const auto& stage : pat.stages)
    for (const CollectivePattern::Flow& f : stage) flow(f.src, f.dst, f.bytes * op.weight);
}

LinkTraffic LinkTrafficCounter::count(const StepProgram& p) {
  for (const StepOp& op : p.ops) {
    if (op.type == OpType::Send) {
      flow(p.rank_gpu[static_cast<std::size_t>(op.rank)], p.rank_gpu[static_cast<std::size_t>(op.peer)], op.bytes * op.weight);
      continue;
    }
    if (op.type != OpType::Collective || op.group < 0) continue;
    const std::vector<int>& g = p.groups[static_cast<std::size_t>(op.group)];
    const std::size_t n = g.size();
    if (n < 2) continue;
    auto gpu = [&](std::size_t i) { return p.rank_gpu[static_cast<std::size_t>(g[i])]; };
    if (op.coll == CollKind::AllToAll) {  // pair by pair: its matrix, or bytes / n to every other member
      A2aMatrix uniform;
      if (op.matrix < 0) uniform = A2aMatrix::uniform(n, op.bytes / static_cast<double>(n));
      const A2aMatrix& m = op.matrix >= 0 ? p.a2a[static_cast<std::size_t>(op.matrix)] : uniform;
      std::vector<int> gpus(n);
      for (std::size_t i = 0; i < n; ++i) gpus[i] = gpu(i);
      const A2aRouting routing = all_to_all_routing(c_, gpus, m, model_);  // as both executors route it
      for (const A2aMatrix::Entry& x : m.entries())  // flow() skips i == j and pairs without bytes
        flow(gpus[x.from], gpus[x.to], x.bytes * op.weight, routing);
      continue;
    }
    collective(p, op);
  }
  LinkTraffic t;
  for (int d : touched_) {
    const int link = d / 2;
    const LinkInfo& info = c_.link(link);
    const auto cls = static_cast<std::size_t>(info.cls);
    t.bytes[cls] += load_[static_cast<std::size_t>(d)];
    t.busiest[cls] = std::max(t.busiest[cls], load_[static_cast<std::size_t>(d)] / info.bandwidth);
    load_[static_cast<std::size_t>(d)] = 0;
  }
  touched_.clear();
  return t;
}

}  // namespace shardsim
