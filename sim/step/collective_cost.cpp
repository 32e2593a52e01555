// sim/step/collective_cost.cpp — alpha-beta formulas per collective algorithm (see the header).
#include "sim/step/collective_cost.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

#include "topologies/cluster.hpp"

namespace shardsim {

Hop hop(const Cluster& c, int a, int b, const CollectiveModel& m) {
  if (a == b) return {0, 1e30};
  Route r = c.route(a, b);
  const auto& eff = c.collective_efficiency();
  return {r.latency + m.step_overhead, r.bottleneck_bw * (r.nvlink_only ? eff.nvlink : eff.network)};
}

Hop ring_hop(const Cluster& c, const std::vector<int>& gpus, const CollectiveModel& m) {
  Hop worst{0, 1e30};
  const std::size_t p = gpus.size();
  for (std::size_t i = 0; i < p; ++i) {
    Hop h = hop(c, gpus[i], gpus[(i + 1) % p], m);
    worst.alpha = std::max(worst.alpha, h.alpha);
    worst.bw = std::min(worst.bw, h.bw);
  }
  return worst;
}

namespace {

double ring(CollKind kind, double p, double bytes, Hop h) {
  if (p <= 1) return 0;
  double steps = kind == CollKind::AllReduce ? 2 * (p - 1) : (p - 1);
  return steps * (h.alpha + bytes / (p * h.bw));
}

double hierarchical(const Cluster& c, CollKind kind, const std::vector<std::vector<int>>& domains, double bytes,
                    const CollectiveModel& m) {
  const double n = static_cast<double>(domains.size());
  std::size_t g = domains.front().size();
  for (const auto& d : domains) g = std::min(g, d.size());
  // Intra-domain phase(s) on the slowest domain ring; inter-domain phase on rail 0's ring of S/g.
  // NCCL pipelines chunks through the phases, so the bandwidth terms overlap (max), the latency
  // terms add.
  double intra_bw = 0, intra_alpha = 0;
  for (const auto& d : domains) {
    CollKind k = kind == CollKind::AllReduce ? CollKind::ReduceScatter : kind;
    Hop h = ring_hop(c, d, m);
    double p = static_cast<double>(d.size());
    double phases = kind == CollKind::AllReduce ? 2 : 1;
    (void)k;
    intra_bw = std::max(intra_bw, phases * (p - 1) * bytes / (p * h.bw));
    intra_alpha = std::max(intra_alpha, phases * (p - 1) * h.alpha);
  }
  std::vector<int> rail;
  for (const auto& d : domains) rail.push_back(d.front());
  Hop hr = ring_hop(c, rail, m);
  double steps = kind == CollKind::AllReduce ? 2 * (n - 1) : (n - 1);
  double inter_bw = steps * (bytes / static_cast<double>(g)) / (n * hr.bw);
  return intra_alpha + steps * hr.alpha + std::max(intra_bw, inter_bw);
}

double tree_all_reduce(const Cluster& c, const std::vector<int>& gpus, double bytes, const CollectiveModel& m) {
  Hop worst{0, 1e30};
  for (std::size_t i = 1; i < gpus.size(); ++i) {
    Hop h = hop(c, gpus[0], gpus[i], m);
    worst.alpha = std::max(worst.alpha, h.alpha);
    worst.bw = std::min(worst.bw, h.bw);
  }
  double depth = std::ceil(std::log2(static_cast<double>(gpus.size())));
  return 2 * depth * worst.alpha + 2 * bytes / worst.bw;
}

// The all-to-all's own time, without the call latency (defined below all_to_all_time).
double pairwise_time(const Cluster& c, const std::vector<int>& gpus, const A2aMatrix& matrix,
                     const CollectiveModel& m);

double nvls(const Cluster& c, const std::vector<int>& gpus, double bytes, const CollectiveModel& m) {
  double p = static_cast<double>(gpus.size());
  Hop h = hop(c, gpus[0], gpus[1], m);
  return 2 * h.alpha + m.nvls_latency + 2 * (p - 1) / p * bytes / (m.nvls_busbw_fraction * c.gpu().nvlink_bw);
}

}  // namespace

std::vector<std::vector<int>> by_domain(const Cluster& c, const std::vector<int>& gpus) {
  std::map<int, std::size_t> index;
  std::vector<std::vector<int>> out;
  for (int g : gpus) {
    auto [it, fresh] = index.emplace(c.node_of(g), out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(g);
  }
  return out;
}

double small_group_fraction(int p, bool one_domain, const CollectiveModel& m) {
  if (!one_domain || p < 2) return 1.0;
  return std::min(1.0, m.small_group_base + m.small_group_step * (p - 2));
}

double call_latency(CollKind kind, const CollectiveModel& m) { return m.call_latency[static_cast<std::size_t>(kind)]; }

CollectiveTime collective_time(const Cluster& c, CollKind kind, const std::vector<int>& gpus, double bytes,
                               CollAlgo algo, const CollectiveModel& m) {
  CollectiveTime t = algorithm_time(c, kind, gpus, bytes, algo, m);
  if (t.seconds > 0) t.seconds += call_latency(kind, m);
  return t;
}

CollectiveTime algorithm_time(const Cluster& c, CollKind kind, const std::vector<int>& gpus, double bytes,
                              CollAlgo algo, const CollectiveModel& m) {
  CollectiveTime out{0, algo};
  if (gpus.size() <= 1 || bytes <= 0) return out;
  if (kind == CollKind::AllToAll) {
    // A uniform all-to-all: every rank sends bytes/p to every other rank.
    const A2aMatrix mat = A2aMatrix::uniform(gpus.size(), bytes / static_cast<double>(gpus.size()));
    return {pairwise_time(c, gpus, mat, m), CollAlgo::Pairwise};
  }
  auto domains = by_domain(c, gpus);
  bool one_domain = domains.size() == 1;
  const double p = static_cast<double>(gpus.size());
  // Ring and tree traffic of a small one-domain group moves as if it carried bytes / fraction.
  const double rb = bytes / small_group_fraction(static_cast<int>(gpus.size()), one_domain, m);
  auto time_of = [&](CollAlgo a) -> double {
    switch (a) {
      case CollAlgo::Ring: return ring(kind, p, rb, ring_hop(c, gpus, m));
      case CollAlgo::Tree:
        return kind == CollKind::AllReduce ? tree_all_reduce(c, gpus, rb, m) : ring(kind, p, rb, ring_hop(c, gpus, m));
      case CollAlgo::Nvls: return kind == CollKind::AllReduce && one_domain ? nvls(c, gpus, bytes, m) : 1e30;
      case CollAlgo::Hierarchical:
        return one_domain ? ring(kind, p, rb, ring_hop(c, gpus, m)) : hierarchical(c, kind, domains, bytes, m);
      default: return 1e30;
    }
  };
  if (algo != CollAlgo::Auto) {
    out.seconds = time_of(algo);
    return out;
  }
  std::vector<CollAlgo> candidates;
  if (one_domain) {
    candidates = {CollAlgo::Ring};
    if (kind == CollKind::AllReduce) {
      candidates.push_back(CollAlgo::Tree);
      if (bytes >= m.nvls_min_bytes && gpus.size() > 2) candidates.push_back(CollAlgo::Nvls);
    }
  } else {
    candidates = {CollAlgo::Hierarchical};
    if (kind == CollKind::AllReduce) candidates.push_back(CollAlgo::Tree);
  }
  out.seconds = 1e30;
  for (CollAlgo a : candidates) {
    double t = time_of(a);
    if (t < out.seconds) out = {t, a};
  }
  return out;
}

double all_to_all_time(const Cluster& c, const std::vector<int>& gpus, const A2aMatrix& matrix,
                       const CollectiveModel& m) {
  return gpus.size() <= 1 ? 0 : call_latency(CollKind::AllToAll, m) + pairwise_time(c, gpus, matrix, m);
}

namespace {

// The busiest NVLink port or NIC of an all-to-all routed each way (see all_to_all_routing in the
// header), seconds, without latencies: one pass over the matrix prices both routings. NVLink and
// NICs work at once; NICs are slots (group node index × rails).
struct PortTimes {
  double send = 0, recv = 0;
};

PortTimes busiest_port_times(const Cluster& c, const std::vector<int>& gpus, const A2aMatrix& matrix,
                             const CollectiveModel& m) {
  const std::size_t p = gpus.size();
  if (matrix.members() != p)
    throw std::logic_error("all-to-all: a matrix of " + std::to_string(matrix.members()) + " members for a group of " +
                           std::to_string(p));
  const auto& eff = c.collective_efficiency();
  const double nv_bw = c.gpu().nvlink_bw * m.a2a_nvlink_efficiency;
  const std::size_t rails = static_cast<std::size_t>(c.gpus_per_node());
  struct Load {  // one routing's bytes per NVLink port and per NIC slot
    std::vector<double> nv_out, nv_in, nic_out, nic_in;
    std::vector<int> nic_gpu;  // a GPU there (its NIC bandwidth)
  };
  // Scratch kept per thread: the executors price thousands of all-to-alls per plan.
  // The group's layout (its members' nodes and rails, their NIC slots) is kept from the last call
  // on the same GPUs and node size (what node_of and rail_of read): an executor prices every
  // layer's all-to-all over the same group.
  struct Scratch {
    std::vector<int> gpus;   // the members the layout below is of
    std::size_t rails = 0;   // and the GPUs per node
    std::vector<int> node, rail, nodes, proxy;
    std::vector<std::size_t> home;  // each member's own NIC slot
    Load send, recv;
  };
  thread_local Scratch sc;
  auto& [members, node_size, node, rail, nodes, proxy, home, send, recv] = sc;
  auto slot = [rails](int ni, int r) { return static_cast<std::size_t>(ni) * rails + static_cast<std::size_t>(r); };
  if (members != gpus || node_size != rails) {
    members = gpus;
    node_size = rails;
    node.resize(p);
    rail.resize(p);
    home.resize(p);
    nodes.clear();  // distinct nodes in order of appearance
    for (std::size_t i = 0; i < p; ++i) {
      const int n = c.node_of(gpus[i]);
      rail[i] = c.rail_of(gpus[i]);
      auto it = std::find(nodes.begin(), nodes.end(), n);
      node[i] = static_cast<int>(it - nodes.begin());  // the node's index among the group's nodes
      if (it == nodes.end()) nodes.push_back(n);
      home[i] = static_cast<std::size_t>(node[i]) * rails + static_cast<std::size_t>(rail[i]);
    }
    proxy.assign(nodes.size() * rails, -1);  // the group member at a slot
    for (std::size_t i = 0; i < p; ++i) proxy[home[i]] = static_cast<int>(i);
  }
  const std::size_t slots = nodes.size() * rails;
  for (Load* l : {&send, &recv}) {
    l->nv_out.assign(p, 0);
    l->nv_in.assign(p, 0);
    l->nic_out.assign(slots, 0);
    l->nic_in.assign(slots, 0);
    l->nic_gpu.assign(slots, -1);
  }
  for (std::size_t i = 0; i < p; ++i) send.nic_gpu[home[i]] = recv.nic_gpu[home[i]] = gpus[i];
  for (const A2aMatrix::Entry& x : matrix.entries()) {  // in (sender, receiver) order, as a dense scan
    const std::size_t i = x.from, j = x.to;
    const double b = x.bytes;
    if (i == j || !(b > 0)) continue;
    if (node[i] == node[j]) {
      for (Load* l : {&send, &recv}) {
        l->nv_out[i] += b;
        l->nv_in[j] += b;
      }
      continue;
    }
    // Send side (PXN): NVLink to node i's GPU on rail(j), then rail(j).
    const std::size_t out = slot(node[i], rail[j]);
    if (rail[j] != rail[i]) {
      send.nv_out[i] += b;
      if (proxy[out] >= 0) send.nv_in[static_cast<std::size_t>(proxy[out])] += b;
    }
    if (send.nic_gpu[out] < 0) send.nic_gpu[out] = gpus[i];
    send.nic_out[out] += b;
    send.nic_in[home[j]] += b;
    // Receive side (forwarding): rail(i) to node j's GPU on rail(i), then NVLink to j.
    const std::size_t in = slot(node[j], rail[i]);
    recv.nic_out[home[i]] += b;
    if (proxy[in] < 0) {  // no group member there to forward: straight to j's NIC
      recv.nic_in[home[j]] += b;
      continue;
    }
    recv.nic_in[in] += b;
    if (rail[j] != rail[i]) {
      recv.nv_out[static_cast<std::size_t>(proxy[in])] += b;
      recv.nv_in[j] += b;
    }
  }
  auto worst = [&](const Load& l) {
    double nv = 0;  // the busiest NVLink port's bytes, divided once (division is monotone)
    for (std::size_t i = 0; i < p; ++i) nv = std::max(nv, std::max(l.nv_out[i], l.nv_in[i]));
    double w = std::max(0.0, nv / nv_bw);
    for (std::size_t k = 0; k < slots; ++k) {
      const double load = std::max(l.nic_out[k], l.nic_in[k]);
      if (l.nic_gpu[k] < 0 || load <= 0) continue;  // an idle NIC cannot be the busiest
      const double net_bw = c.injection_bw(l.nic_gpu[k]) * eff.network;
      if (net_bw > 0) w = std::max(w, load / net_bw);
    }
    return w;
  };
  const double s = worst(send);
  return {s, rails > 1 ? worst(recv) : s};
}

}  // namespace

A2aRouting all_to_all_routing(const Cluster& c, const std::vector<int>& gpus, const A2aMatrix& matrix,
                              const CollectiveModel& m) {
  if (gpus.size() <= 1 || c.gpus_per_node() <= 1) return A2aRouting::SendSide;
  const PortTimes t = busiest_port_times(c, gpus, matrix, m);
  return t.recv < t.send ? A2aRouting::ReceiveSide : A2aRouting::SendSide;
}

namespace {

double pairwise_time(const Cluster& c, const std::vector<int>& gpus, const A2aMatrix& matrix,
                     const CollectiveModel& m) {
  const std::size_t p = gpus.size();
  if (p <= 1) return 0;
  bool any_net = false;
  for (const A2aMatrix::Entry& x : matrix.entries())
    if (x.from != x.to && x.bytes > 0 && c.node_of(gpus[x.from]) != c.node_of(gpus[x.to])) {
      any_net = true;
      break;
    }
  double latency = hop(c, gpus[0], gpus[1], m).alpha;
  if (any_net)
    for (std::size_t j = 1; j < p; ++j)
      if (c.node_of(gpus[j]) != c.node_of(gpus[0])) {
        latency = std::max(latency, hop(c, gpus[0], gpus[j], m).alpha);
        break;
      }
  // The faster routing, as all_to_all_routing() picks it.
  const PortTimes t = busiest_port_times(c, gpus, matrix, m);
  return latency + std::min(t.send, t.recv);
}

}  // namespace

double p2p_time(const Cluster& c, int src, int dst, double bytes, const CollectiveModel& m) {
  if (src == dst || bytes <= 0) return 0;
  Hop h = hop(c, src, dst, m);
  return h.alpha + bytes / h.bw;
}

}  // namespace shardsim
