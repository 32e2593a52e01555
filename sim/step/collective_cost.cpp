// sim/step/collective_cost.cpp — NCCL's tuning model on the cluster's bandwidths; all-to-all port loads (see the header).
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

// The all-to-all's own time, without the call latency (defined below all_to_all_time).
double pairwise_time(const Cluster& c, const std::vector<int>& gpus, const A2aMatrix& matrix,
                     const CollectiveModel& m);

constexpr double kUs = 1e-6, kGBs = 1e9;

// What NCCL's tuner knows of a group: its size, its nodes, and the bus bandwidth its rings reach
// before any protocol caps it (bytes/s).
struct Group {
  int p = 0, nodes = 0, per_node = 0;  // per_node: the fewest GPUs of the group on one node
  double bus_bw = 0;
  double nvlink_bw = 0;                 // its GPUs' NVLink (one type: a pool lies on one)
  bool one_domain() const { return nodes == 1; }
};

Group group_of(const Cluster& c, const std::vector<int>& gpus, const CollectiveModel& m) {
  Group g;
  g.p = static_cast<int>(gpus.size());
  g.nvlink_bw = c.gpu_of(gpus.at(0)).nvlink_bw;
  const auto domains = by_domain(c, gpus);
  g.nodes = static_cast<int>(domains.size());
  g.per_node = g.p;
  for (const auto& d : domains) g.per_node = std::min(g.per_node, static_cast<int>(d.size()));
  if (g.one_domain()) {
    g.bus_bw = ring_hop(c, gpus, m).bw * small_group_fraction(g.p, true, m);
    return g;
  }
  // Across domains NCCL runs one ring channel per NIC: the slowest domain's NVLink ring, and its
  // GPUs' NICs together.
  const double net_eff = c.collective_efficiency().network;
  g.bus_bw = 1e300;
  for (const auto& d : domains) {
    if (d.size() > 1) g.bus_bw = std::min(g.bus_bw, ring_hop(c, d, m).bw);
    double nic = 1e300;
    for (int x : d) nic = std::min(nic, c.injection_bw(x));
    g.bus_bw = std::min(g.bus_bw, static_cast<double>(d.size()) * nic * net_eff);
  }
  return g;
}

int floor_log2(double x) { return x >= 1 ? static_cast<int>(std::floor(std::log2(x))) : -1; }

// NCCL's price of `algo` (Ring or Tree) with protocol `pr` for `kind` on `g`: {latency, algBw}.
struct Price {
  double latency = 0, alg_bw = 0;
};

Price nccl_price(const Cluster& c, CollKind kind, const Group& g, CollAlgo algo, CollProto pr, double bytes,
                 const CollectiveModel& m) {
  const NcclTuning& t = m.nccl;
  const auto k = static_cast<std::size_t>(pr);
  const int n = g.nodes, p = g.p;
  const std::size_t by_nodes = static_cast<std::size_t>(std::min(n, 3) - 1);
  const double ll_max = n == 1 ? t.ll_max_nvlink_fraction * g.nvlink_bw
                               : (n == 2 ? t.ll_max_two_nodes : t.ll_max_more_nodes) * kGBs;
  const double nsteps = kind == CollKind::AllReduce ? 2.0 * (p - 1) : p - 1.0;
  const double ch = t.channels;
  double bus = g.bus_bw;
  Price out;
  if (algo == CollAlgo::Ring) {
    if (pr == CollProto::LL) bus = std::min(ll_max, 0.5 * bus);
    if (pr == CollProto::LL128) bus = std::min(0.92 * bus, ch * t.ring_ll128_per_channel * kGBs);
    out.alg_bw = bus * p / nsteps;
    double intra = t.nvlink_ring[k];
    const double inter = (g.per_node == 1 ? t.net_tree[k] : t.net_ring[k]);
    if (n > 1) intra = std::max(intra, t.net_overhead * (pr == CollProto::Simple ? 3 : 1));
    const double n_inter = n == 1 ? 0 : (kind == CollKind::AllReduce ? 2.0 * (n - 1) : n - 1.0);
    out.latency = t.base_ring[k] + (nsteps - n_inter) * intra + n_inter * inter;
    if (pr == CollProto::Simple && n > 1 && kind == CollKind::AllReduce && bytes / (ch * p) >= 64)
      out.latency *= t.ring_plateau;
  } else {  // tree all-reduce
    bus = std::min(0.92 * bus, ch * t.tree_per_channel[by_nodes] * kGBs);
    if (pr == CollProto::LL) bus = std::min(bus / 3.8, ll_max);
    if (pr == CollProto::LL128)
      bus = std::min(bus * (n == 1 ? 7.0 / 9.0 : 120.0 / 128.0), ch * t.tree_ll128_per_channel[by_nodes] * kGBs);
    out.alg_bw = 0.5 * bus;
    const int log_size = floor_log2(bytes / 64);
    if (log_size >= 0 && log_size < 23) out.alg_bw *= t.tree_correction[k][static_cast<std::size_t>(log_size)];
    out.latency = t.base_tree[k] + 2 * ((p / n - 1) * t.nvlink_tree[k] + floor_log2(n) * t.net_tree[k]);
  }
  out.latency *= kUs;
  return out;
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

double all_to_all_call_latency(const A2aMatrix& matrix, const CollectiveModel& m) {
  double largest = 0;
  for (const A2aMatrix::Entry& x : matrix.entries())
    if (x.from != x.to) largest = std::max(largest, x.bytes);
  if (largest > m.p2p_ll_threshold) return m.a2a_call_latency;
  const NcclTuning& t = m.nccl;
  const double saved = (t.base_ring[2] - t.base_ring[0]) + (t.nvlink_ring[2] - t.nvlink_ring[0]);
  return std::max(0.0, m.a2a_call_latency - saved * kUs);
}

const char* to_string(CollProto p) {
  switch (p) {
    case CollProto::LL: return "LL";
    case CollProto::LL128: return "LL128";
    case CollProto::Simple: return "Simple";
  }
  return "?";
}

const CustomAllReduce& custom_allreduce(AllReduceKernels k) {
  // Fitted on AIConfigurator's custom all-reduce tables (docs/communication.md, "Engines' own
  // all-reduce"): the base latencies per NVLink generation, the per-peer term and both
  // efficiencies per library. Workspaces: TensorRT-LLM's getMaxRequiredWorkspaceSize (16 MB on
  // 2 GPUs, 8 MB on more; its strategy table covers TP 2, 4, 8); vLLM's and SGLang's custom
  // all-reduce max_size (8 MiB; world sizes 2, 4, 6, 8).
  static const CustomAllReduce trtllm{2.6e-6, 4.6e-6, 0.10e-6, 0.65, 0.50, 2.0e-6, 16e6, 8e6, (1u << 2) | (1u << 4) | (1u << 8)};
  static const CustomAllReduce vllm{4.2e-6, 7.2e-6, 0.05e-6, 0.55, 0.70, 0.0, 8.0 * 1024 * 1024, 8.0 * 1024 * 1024,
                                    (1u << 2) | (1u << 4) | (1u << 6) | (1u << 8)};
  static const CustomAllReduce sglang{2.4e-6, 4.0e-6, 0.15e-6, 0.65, 0.70, 0.25e-6, 8.0 * 1024 * 1024, 8.0 * 1024 * 1024,
                                      (1u << 2) | (1u << 4) | (1u << 6) | (1u << 8)};
  switch (k) {
    case AllReduceKernels::Trtllm: return trtllm;
    case AllReduceKernels::Vllm: return vllm;
    case AllReduceKernels::Sglang: return sglang;
    case AllReduceKernels::Nccl: break;
  }
  throw std::invalid_argument("custom_allreduce: NCCL has no custom all-reduce");
}

std::vector<CollectiveTime> collective_candidates(const Cluster& c, CollKind kind, const std::vector<int>& gpus,
                                                  double bytes, CollAlgo algo, const CollectiveModel& m,
                                                  AllReduceKernels kernels) {
  std::vector<CollectiveTime> out;
  if (gpus.size() <= 1 || bytes <= 0) return out;
  if (kind == CollKind::AllToAll) {
    // A uniform all-to-all: every rank sends bytes/p to every other rank.
    const A2aMatrix mat = A2aMatrix::uniform(gpus.size(), bytes / static_cast<double>(gpus.size()));
    const double t = pairwise_time(c, gpus, mat, m), call = all_to_all_call_latency(mat, m);
    const CollProto pr = call < m.a2a_call_latency ? CollProto::LL : CollProto::Simple;
    out.push_back({call + t, CollAlgo::Pairwise, pr, call, t});
    return out;
  }
  const Group g = group_of(c, gpus, m);
  // NVLS wherever NCCL enables it for an all-reduce: one NVLink domain of at least two GPUs
  // (src/transport/nvls.cc, ncclNvlsInit: off below two GPUs). On two it moves 1.5 S per port, so the
  // ring wins there (NVLS's S·(1 + 1/p) against the ring's S); nothing is excluded by hand.
  const bool nvls_ok = kind == CollKind::AllReduce && g.one_domain();
  const bool tree_ok = kind == CollKind::AllReduce;
  std::vector<CollAlgo> algos;
  switch (algo) {
    case CollAlgo::Auto:
      algos = {CollAlgo::Ring};
      if (tree_ok) algos.push_back(CollAlgo::Tree);
      if (nvls_ok) algos.push_back(CollAlgo::Nvls);
      break;
    case CollAlgo::Tree: algos = {tree_ok ? CollAlgo::Tree : CollAlgo::Ring}; break;
    case CollAlgo::Nvls: algos = {nvls_ok ? CollAlgo::Nvls : CollAlgo::Ring}; break;
    default: algos = {CollAlgo::Ring}; break;
  }
  for (CollAlgo a : algos) {
    if (a == CollAlgo::Nvls) {
      const double lat = m.nvls_latency;
      const double bw = bytes * (1 + 1.0 / g.p) / (m.nvls_port_fraction * g.nvlink_bw);
      out.push_back({lat + bw, a, CollProto::Simple, lat, bw});
      continue;
    }
    for (CollProto pr : {CollProto::LL, CollProto::LL128, CollProto::Simple}) {
      const Price x = nccl_price(c, kind, g, a, pr, bytes, m);
      const double bw = bytes / x.alg_bw;
      out.push_back({x.latency + bw, a, pr, x.latency, bw});
    }
  }
  // The engine's own kernels, inside one NVLink domain, for the group sizes and bytes it allows.
  if (kind == CollKind::AllReduce && algo == CollAlgo::Auto && kernels != AllReduceKernels::Nccl && g.one_domain() &&
      g.p < 32) {
    const CustomAllReduce& k = custom_allreduce(kernels);
    if ((k.group_sizes >> g.p & 1u) && bytes <= (g.p == 2 ? k.max_bytes_two : k.max_bytes)) {
      const double nvl = g.nvlink_bw;
      const double alpha = (nvl >= 900e9 ? k.alpha_nvlink5 : k.alpha_nvlink4) + k.per_peer * (g.p - 1);
      const double one = (g.p - 1) * bytes / (k.one_shot_eff * nvl);
      const double two = 2.0 * (g.p - 1) / g.p * bytes / (k.two_shot_eff * nvl);
      out.push_back({alpha + one, CollAlgo::OneShot, CollProto::Simple, alpha, one});
      const double alpha2 = 2 * alpha + k.two_shot_per_peer * (g.p - 1);
      out.push_back({alpha2 + two, CollAlgo::TwoShot, CollProto::Simple, alpha2, two});
    }
  }
  return out;
}

CollectiveTime collective_time(const Cluster& c, CollKind kind, const std::vector<int>& gpus, double bytes,
                               CollAlgo algo, const CollectiveModel& m, AllReduceKernels kernels) {
  CollectiveTime out{0, algo};
  for (const CollectiveTime& t : collective_candidates(c, kind, gpus, bytes, algo, m, kernels))  // the first of the fastest
    if (out.seconds == 0 || t.seconds < out.seconds) out = t;
  return out;
}

double all_to_all_time(const Cluster& c, const std::vector<int>& gpus, const A2aMatrix& matrix,
                       const CollectiveModel& m) {
  return gpus.size() <= 1 ? 0 : all_to_all_call_latency(matrix, m) + pairwise_time(c, gpus, matrix, m);
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
  const double nv_bw = c.gpu_of(gpus.at(0)).nvlink_bw * m.a2a_nvlink_efficiency;
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
