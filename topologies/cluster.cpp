// topologies/cluster.cpp — Cluster: validation, structure queries, routes, bisection.
//
// Owns: the checks every cluster passes on construction (GPU ids, sizes, link values, names,
// connectivity), the derived indexes (sorted adjacency, leaf of each GPU), the per-destination
// shortest-path trees behind route() (whole, cached; or, for a route near its destination on a
// switched fabric, only the layers it needs), and the max-flow behind bisection_bw().
// Units: bytes/s per direction, seconds.
// Thread-safety: everything below the constructor is const; the lazily built trees live in
// RouteCache under a shared_mutex (readers share, a miss computes outside the lock and publishes
// under the exclusive lock); bisection is computed once under a once_flag.
#include "topologies/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <queue>
#include <shared_mutex>
#include <stdexcept>
#include <unordered_set>

#include <boost/graph/push_relabel_max_flow.hpp>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"

namespace shardsim {

const char* to_string(VertexKind k) {
  switch (k) {
    case VertexKind::Gpu: return "gpu";
    case VertexKind::NvSwitch: return "nvswitch";
    case VertexKind::Nic: return "nic";
    case VertexKind::Switch: return "switch";
  }
  return "?";
}

const char* to_string(LinkClass c) {
  switch (c) {
    case LinkClass::NvLink: return "nvlink";
    case LinkClass::NicLink: return "nic";
    case LinkClass::LeafSpine: return "leaf-spine";
    case LinkClass::SpineCore: return "spine-core";
    case LinkClass::Torus: return "torus";
    case LinkClass::DragonflyLocal: return "dragonfly-local";
    case LinkClass::DragonflyGlobal: return "dragonfly-global";
  }
  return "?";
}

namespace {

// Cost of forwarding through a GPU, in hops: any path without GPU transit beats any path with one.
constexpr std::uint64_t kGpuTransit = std::uint64_t{1} << 24;
constexpr std::uint64_t kUnreached = std::numeric_limits<std::uint64_t>::max();
// Memory the cached shortest-path trees may hold before the cache is emptied and refilled.
constexpr std::size_t kTreeCacheBytes = std::size_t{1} << 30;
// Upper bound on vertices (GPUs + switches), far above any generator's output for 65536 GPUs.
constexpr std::size_t kMaxVertices = std::size_t{1} << 21;

// Shortest-path tree towards one destination vertex: cost (hops + transit penalties) from every
// vertex to it, and the widest bottleneck among the cheapest paths from that vertex.
struct DestTree {
  std::vector<std::uint64_t> cost;
  std::vector<double> bottleneck;
};

// The part of a DestTree one route needs: the breadth-first layers around the destination up to
// the source's (route() reads costs only below the source's and bottlenecks up to it). Built in a
// per-thread scratch whose touched entries are reset before the next use, so a route inside a node
// costs the vertices near it, not the whole fabric (the full trees, one per destination GPU, made
// routing every pair of every replica O(GPUs × vertices): 1 GiB of trees from 8,192 GPUs on).
struct LocalTree {
  std::vector<std::uint64_t> cost;
  std::vector<double> bottleneck;
  std::vector<int> order;  // the vertices reached, in breadth-first order (also the queue)
};
// Vertices a local tree may reach before the full tree is built instead (a route across the fabric).
constexpr std::size_t kLocalTreeVertices = 2048;

}  // namespace

struct Cluster::RouteCache {
  // Immutable after construction: adjacency sorted by (neighbour, edge id), per-edge data.
  std::vector<int> offset;                    // size V + 1
  std::vector<int> neighbour;                 // size 2E
  std::vector<int> edge;                      // size 2E, edge id of the same slot
  std::vector<double> bandwidth;              // per edge id
  std::vector<std::pair<int, int>> ends;      // per edge id (as added: a, b)
  std::vector<char> is_gpu;                   // per vertex
  std::vector<int> gpu_vertex;                // per GPU id
  std::vector<int> route_key;                 // per GPU id: position in (leaf, gpu id) order
  std::vector<double> injection;              // per GPU id: injection_bw(), read per priced all-to-all

  // Lazily filled.
  std::shared_mutex mu;
  std::vector<std::shared_ptr<const DestTree>> trees;  // per destination GPU
  std::size_t tree_bytes = 0;
  std::once_flag switched_once;
  bool switched = false;  // every GPU reaches every other through switches alone (switched_fabric())
  std::once_flag bisection_once;
  double bisection = 0;

  // Cost of stepping from a vertex onto `next` when heading for `dst`.
  std::uint64_t step(int next, int dst) const { return 1 + (is_gpu[next] && next != dst ? kGpuTransit : 0); }
  // The widest bottleneck among v's cheapest paths to dst, from its neighbours one step closer
  // (already final: vertices are finalised in nondecreasing cost).
  double widest(const std::uint64_t* cost, const double* bottleneck, int v, int dst) const {
    double best = 0;
    for (int k = offset[v]; k < offset[v + 1]; ++k) {
      const int m = neighbour[k];
      if (cost[m] != kUnreached && cost[m] + step(m, dst) == cost[v])
        best = std::max(best, std::min(bandwidth[edge[k]], bottleneck[m]));
    }
    return best;
  }
  DestTree build_tree(int dst) const;
  std::shared_ptr<const DestTree> tree(int dst_gpu);
  std::shared_ptr<const DestTree> cached_tree(int dst_gpu);
  bool switched_fabric();
  bool local_tree(int dst, int src, LocalTree& t) const;
};

// Shortest-path tree towards `dst`. Fast path: breadth-first search that never expands a GPU other
// than dst — exact whenever that reaches every GPU (all generated fabrics): a vertex it misses (say
// another node's NVSwitch) is reachable only through a GPU, at a cost above kGpuTransit, so it lies
// on no GPU's cheapest route. Otherwise: Dijkstra with the transit penalty.
// Either way vertices are finalised in nondecreasing cost, so each vertex's widest bottleneck is
// computed from neighbours already final.
DestTree Cluster::RouteCache::build_tree(int dst) const {
  const std::size_t n = is_gpu.size();
  DestTree t;
  t.cost.assign(n, kUnreached);
  t.bottleneck.assign(n, 0.0);
  auto finalise = [&](int v) { t.bottleneck[v] = widest(t.cost.data(), t.bottleneck.data(), v, dst); };
  t.cost[dst] = 0;
  t.bottleneck[dst] = std::numeric_limits<double>::infinity();

  std::vector<int> queue;
  queue.reserve(n);
  queue.push_back(dst);
  std::size_t gpus_reached = 0;
  for (std::size_t head = 0; head < queue.size(); ++head) {
    const int v = queue[head];
    gpus_reached += is_gpu[v];
    if (v != dst) finalise(v);
    if (is_gpu[v] && v != dst) continue;  // GPUs do not forward
    for (int k = offset[v]; k < offset[v + 1]; ++k) {
      const int m = neighbour[k];
      if (t.cost[m] == kUnreached) {
        t.cost[m] = t.cost[v] + 1;
        queue.push_back(m);
      }
    }
  }
  if (gpus_reached == gpu_vertex.size()) return t;

  // Some GPU is reachable only through another GPU: redo with the penalty.
  t.cost.assign(n, kUnreached);
  t.bottleneck.assign(n, 0.0);
  t.cost[dst] = 0;
  t.bottleneck[dst] = std::numeric_limits<double>::infinity();
  using Item = std::pair<std::uint64_t, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
  pq.push({0, dst});
  while (!pq.empty()) {
    auto [c, v] = pq.top();
    pq.pop();
    if (c != t.cost[v]) continue;
    if (v != dst) finalise(v);
    // Leaving v towards dst through v costs the transit penalty when v is some other GPU.
    const std::uint64_t through = c + step(v, dst);
    for (int k = offset[v]; k < offset[v + 1]; ++k) {
      const int m = neighbour[k];
      if (through < t.cost[m]) {
        t.cost[m] = through;
        pq.push({through, m});
      }
    }
  }
  return t;
}

std::shared_ptr<const DestTree> Cluster::RouteCache::cached_tree(int dst_gpu) {
  std::shared_lock lock(mu);
  return trees[dst_gpu];
}

// Whether breadth-first search that never forwards through a GPU reaches every GPU from every
// destination (build_tree's fast path, exact then): every GPU has a switch neighbour and the
// switches around GPU 0 reach every GPU.
bool Cluster::RouteCache::switched_fabric() {
  std::call_once(switched_once, [&] {
    const std::size_t n = is_gpu.size();
    std::vector<char> seen(n, 0);
    std::vector<int> queue{gpu_vertex[0]};
    seen[gpu_vertex[0]] = 1;
    std::size_t via_switch = 0;
    bool gpu0_switched = false;
    for (std::size_t head = 0; head < queue.size(); ++head) {
      const int v = queue[head];
      if (is_gpu[v] && head > 0) continue;  // GPUs do not forward
      for (int k = offset[v]; k < offset[v + 1]; ++k) {
        const int m = neighbour[k];
        if (!is_gpu[v] && m == gpu_vertex[0]) gpu0_switched = true;
        if (seen[m]) continue;
        seen[m] = 1;
        if (is_gpu[m] && !is_gpu[v]) ++via_switch;
        if (!is_gpu[m] || head == 0) queue.push_back(m);
      }
    }
    switched = gpu0_switched && via_switch + 1 == gpu_vertex.size();
  });
  return switched;
}

// Breadth-first layers from `dst` until the layer holding `src` is complete (as build_tree's fast
// path computes them, so the route is the same); false when more than kLocalTreeVertices are reached
// first. Only valid on a switched fabric.
bool Cluster::RouteCache::local_tree(int dst, int src, LocalTree& t) const {
  const std::size_t n = is_gpu.size();
  if (t.cost.size() != n) {
    t.cost.assign(n, kUnreached);
    t.bottleneck.assign(n, 0.0);
    t.order.clear();
  }
  for (int v : t.order) t.cost[v] = kUnreached, t.bottleneck[v] = 0.0;
  t.order.clear();
  t.cost[dst] = 0;
  t.bottleneck[dst] = std::numeric_limits<double>::infinity();
  t.order.push_back(dst);
  std::uint64_t last = kUnreached;  // the source's layer, once reached
  for (std::size_t head = 0; head < t.order.size(); ++head) {
    const int v = t.order[head];
    const std::uint64_t c = t.cost[v];
    if (c > last) break;
    if (v != dst) t.bottleneck[v] = widest(t.cost.data(), t.bottleneck.data(), v, dst);
    if (v == src) last = c;
    if (c == last || (is_gpu[v] && v != dst)) continue;  // the last layer, or a GPU: not expanded
    for (int k = offset[v]; k < offset[v + 1]; ++k) {
      const int m = neighbour[k];
      if (t.cost[m] != kUnreached) continue;
      t.cost[m] = c + 1;
      t.order.push_back(m);
    }
    if (t.order.size() > kLocalTreeVertices) return false;
  }
  return last != kUnreached;
}

std::shared_ptr<const DestTree> Cluster::RouteCache::tree(int dst_gpu) {
  {
    std::shared_lock lock(mu);
    if (auto t = trees[dst_gpu]) return t;
  }
  auto built = std::make_shared<const DestTree>(build_tree(gpu_vertex[dst_gpu]));
  const std::size_t bytes = built->cost.size() * (sizeof(std::uint64_t) + sizeof(double));
  std::unique_lock lock(mu);
  if (auto t = trees[dst_gpu]) return t;  // another thread won
  if (tree_bytes + bytes > kTreeCacheBytes) {
    for (auto& p : trees) p.reset();  // holders keep their copies alive
    tree_bytes = 0;
  }
  trees[dst_gpu] = built;
  tree_bytes += bytes;
  return built;
}

Cluster::Cluster(std::string name, std::string source, GpuSpec gpu, int gpus_per_node, FabricInfo fabric,
                 ClusterGraph graph, std::vector<GpuSpec> node_gpus)
    : name_(std::move(name)),
      source_(std::move(source)),
      gpu_(std::move(gpu)),
      gpus_per_node_(gpus_per_node),
      fabric_(std::move(fabric)),
      graph_(std::move(graph)),  // a copy with Boost 1.74 (no move constructor)
      cache_(std::make_shared<RouteCache>()) {
  validate();
  types_.push_back(gpu_);
  if (node_gpus.empty()) return;
  if (static_cast<int>(node_gpus.size()) != num_nodes())
    throw InputError(source_, "/node_gpus", std::to_string(node_gpus.size()) + " node GPU types for " +
                                                 std::to_string(num_nodes()) + " nodes");
  if (!(node_gpus[0] == gpu_)) throw std::logic_error("Cluster: node 0's GPU type must be the cluster's gpu");
  for (const GpuSpec& g : node_gpus) {
    std::size_t t = 0;
    while (t < types_.size() && !(types_[t] == g)) ++t;
    if (t == types_.size()) {
      for (const GpuSpec& o : types_)
        if (o.name == g.name)
          throw InputError(source_, "/node_gpus", "two different GPU specs are both called \"" + g.name + "\"");
      types_.push_back(g);
    }
    node_type_.push_back(static_cast<int>(t));
  }
  if (types_.size() == 1) node_type_.clear();
}

const GpuSpec& Cluster::node_gpu(int node) const {
  if (node < 0 || node >= num_nodes()) throw std::out_of_range("node_gpu: no node " + std::to_string(node));
  return node_type_.empty() ? gpu_ : types_[static_cast<std::size_t>(node_type_[static_cast<std::size_t>(node)])];
}

int Cluster::gpu_type_of(int gpu) const {
  if (node_type_.empty()) {
    if (gpu < 0 || gpu >= num_gpus()) throw std::out_of_range("gpu_type_of: no GPU " + std::to_string(gpu));
    return 0;
  }
  return node_type_[static_cast<std::size_t>(node_of(gpu))];
}

bool Cluster::one_gpu_type(int first, int gpus) const {
  for (int g = first + 1; g < first + gpus; ++g)
    if (gpu_type_of(g) != gpu_type_of(first)) return false;
  return true;
}

std::string Cluster::gpus_text() const {
  std::vector<int> count(types_.size(), 0);
  for (int n = 0; n < num_nodes(); ++n) count[static_cast<std::size_t>(node_type_.empty() ? 0 : node_type_[static_cast<std::size_t>(n)])] += gpus_per_node_;
  std::string s;
  for (std::size_t t = 0; t < types_.size(); ++t) s += (t ? " + " : "") + std::to_string(count[t]) + " × " + types_[t].name;
  return s;
}

void Cluster::validate() {
  const bool explicit_links = fabric_.kind == "links";
  const std::string fabric_field = explicit_links ? "/fabric/links" : "/fabric";
  auto fail = [&](const std::string& field, const std::string& reason) {
    throw InputError(source_, field, reason);
  };
  if (gpus_per_node_ < 1) fail("/gpus_per_node", "must be >= 1, got " + std::to_string(gpus_per_node_));
  const std::size_t nv = boost::num_vertices(graph_);
  if (nv > kMaxVertices)
    fail(fabric_field, std::to_string(nv) + " vertices is more than the limit of " + std::to_string(kMaxVertices));

  // GPU vertices: ids 0..N-1, each exactly once; node-major numbering.
  std::size_t ngpu = 0;
  for (std::size_t v = 0; v < nv; ++v) ngpu += graph_[v].kind == VertexKind::Gpu;
  if (ngpu == 0) fail("/nodes", "the cluster has no GPUs");
  if (ngpu > static_cast<std::size_t>(kMaxClusterGpus))
    fail("/nodes", std::to_string(ngpu) + " GPUs is more than the limit of " + std::to_string(kMaxClusterGpus));
  if (ngpu % static_cast<std::size_t>(gpus_per_node_) != 0)
    fail("/gpus_per_node", std::to_string(gpus_per_node_) + " does not divide the " + std::to_string(ngpu) + " GPUs");
  gpu_vertex_.assign(ngpu, static_cast<Vertex>(-1));
  std::unordered_set<std::string> names;
  for (std::size_t v = 0; v < nv; ++v) {
    VertexInfo& info = graph_[v];
    if (info.name.empty()) fail(fabric_field, "vertex " + std::to_string(v) + " has no name");
    if (!names.insert(info.name).second) fail(fabric_field, "duplicate vertex name \"" + info.name + "\"");
    if (info.kind != VertexKind::Gpu) continue;
    if (info.gpu < 0 || static_cast<std::size_t>(info.gpu) >= ngpu || gpu_vertex_[info.gpu] != static_cast<Vertex>(-1))
      fail(fabric_field, "GPU vertex \"" + info.name + "\" has id " + std::to_string(info.gpu) +
                             ", expected each of 0.." + std::to_string(ngpu - 1) + " once");
    gpu_vertex_[info.gpu] = v;
    const int node = info.gpu / gpus_per_node_;
    if (info.node == -1) info.node = node;
    if (info.node != node)
      fail(fabric_field, "\"" + info.name + "\" is marked node " + std::to_string(info.node) +
                             " but node-major numbering puts it in node " + std::to_string(node));
  }

  // Links: finite positive bandwidth, finite non-negative latency, no self-loops.
  RouteCache& rc = *cache_;
  std::vector<std::vector<std::pair<int, int>>> adj(nv);
  int id = 0;
  for (auto [it, end] = boost::edges(graph_); it != end; ++it, ++id) {
    const LinkInfo& l = graph_[*it];
    const int a = static_cast<int>(boost::source(*it, graph_));
    const int b = static_cast<int>(boost::target(*it, graph_));
    const std::string field = explicit_links ? fabric_field + "/" + std::to_string(id) : fabric_field;
    const std::string what = "link " + graph_[a].name + " -- " + graph_[b].name;
    if (!std::isfinite(l.bandwidth) || l.bandwidth <= 0)
      fail(field, what + ": bandwidth must be finite and > 0, got " + format_number(l.bandwidth));
    if (!std::isfinite(l.latency) || l.latency < 0)
      fail(field, what + ": latency must be finite and >= 0, got " + format_number(l.latency));
    if (a == b) fail(field, what + ": a link must join two different vertices");
    links_.push_back(l);
    rc.bandwidth.push_back(l.bandwidth);
    rc.ends.emplace_back(a, b);
    adj[a].emplace_back(b, id);
    adj[b].emplace_back(a, id);
  }
  rc.offset.assign(nv + 1, 0);
  for (std::size_t v = 0; v < nv; ++v) {
    std::sort(adj[v].begin(), adj[v].end());
    rc.offset[v + 1] = rc.offset[v] + static_cast<int>(adj[v].size());
    for (auto [m, e] : adj[v]) {
      rc.neighbour.push_back(m);
      rc.edge.push_back(e);
    }
  }
  rc.is_gpu.assign(nv, 0);
  rc.gpu_vertex.resize(ngpu);
  for (std::size_t g = 0; g < ngpu; ++g) {
    rc.is_gpu[gpu_vertex_[g]] = 1;
    rc.gpu_vertex[g] = static_cast<int>(gpu_vertex_[g]);
  }
  rc.trees.resize(ngpu);

  // Connected: every vertex reachable from GPU 0 (routes may then forward through GPUs only
  // where nothing else joins two parts; see route()).
  std::vector<int> comp(nv, -1);
  int ncomp = 0;
  auto flood = [&](std::size_t s) {
    if (comp[s] != -1) return;
    std::vector<int> stack{static_cast<int>(s)};
    comp[s] = ncomp;
    while (!stack.empty()) {
      int v = stack.back();
      stack.pop_back();
      for (int k = rc.offset[v]; k < rc.offset[v + 1]; ++k)
        if (comp[rc.neighbour[k]] == -1) {
          comp[rc.neighbour[k]] = ncomp;
          stack.push_back(rc.neighbour[k]);
        }
    }
    ++ncomp;
  };
  flood(gpu_vertex_[0]);  // part 0 is GPU 0's
  for (std::size_t v = 0; v < nv; ++v) flood(v);
  if (ncomp > 1) {
    std::size_t lost = 0;
    while (comp[lost] == 0) ++lost;
    // Prefer naming a GPU that cannot be reached.
    for (std::size_t g = 0; g < ngpu; ++g)
      if (comp[gpu_vertex_[g]] != 0) { lost = gpu_vertex_[g]; break; }
    fail(fabric_field, "not connected: " + graph_[lost].name + " cannot reach " + graph_[gpu_vertex_[0]].name + " (" +
                           std::to_string(ncomp) + " separate parts)");
  }

  // Leaves: level-1 switches in vertex order; a GPU's leaf is the first one it touches, directly
  // or through one of its NICs.
  std::vector<int> leaf_ordinal(nv, -1);
  for (std::size_t v = 0; v < nv; ++v)
    if (graph_[v].kind == VertexKind::Switch && graph_[v].level == 1) leaf_ordinal[v] = num_leaves_++;
  leaf_.assign(ngpu, -1);
  for (std::size_t g = 0; g < ngpu; ++g) {
    int best = -1;
    auto consider = [&](int v) {
      if (leaf_ordinal[v] >= 0 && (best < 0 || leaf_ordinal[v] < best)) best = leaf_ordinal[v];
    };
    const int gv = static_cast<int>(gpu_vertex_[g]);
    for (int k = rc.offset[gv]; k < rc.offset[gv + 1]; ++k) {
      int m = rc.neighbour[k];
      consider(m);
      if (graph_[m].kind == VertexKind::Nic)
        for (int j = rc.offset[m]; j < rc.offset[m + 1]; ++j) consider(rc.neighbour[j]);
    }
    leaf_[g] = best;
  }
  // Destination-mod-k keys: GPUs of one leaf get consecutive keys (as sequential LIDs behind one
  // leaf would), so the destinations behind a leaf spread over all of its uplinks.
  std::vector<int> order(ngpu);
  for (std::size_t g = 0; g < ngpu; ++g) order[g] = static_cast<int>(g);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return leaf_[a] < leaf_[b]; });
  rc.route_key.assign(ngpu, 0);
  for (std::size_t i = 0; i < ngpu; ++i) rc.route_key[order[i]] = static_cast<int>(i);
  rc.injection.resize(ngpu);
  for (std::size_t g = 0; g < ngpu; ++g) rc.injection[g] = network_injection(static_cast<int>(g));
}

int Cluster::count(VertexKind k) const {
  int n = 0;
  for (std::size_t v = 0; v < boost::num_vertices(graph_); ++v) n += graph_[v].kind == k;
  return n;
}

int Cluster::node_of(int gpu) const {
  if (gpu < 0 || gpu >= num_gpus()) throw std::out_of_range("node_of: no GPU " + std::to_string(gpu));
  return gpu / gpus_per_node_;
}

int Cluster::rail_of(int gpu) const {
  if (gpu < 0 || gpu >= num_gpus()) throw std::out_of_range("rail_of: no GPU " + std::to_string(gpu));
  return gpu % gpus_per_node_;
}

int Cluster::leaf_of(int gpu) const { return leaf_.at(gpu); }

const LinkInfo& Cluster::link(int id) const { return links_.at(id); }

std::pair<int, int> Cluster::link_ends(int id) const { return cache_->ends.at(id); }

Route Cluster::route(int src_gpu, int dst_gpu) const { return route_with(src_gpu, dst_gpu, true); }

Route Cluster::route_from_whole_tree(int src_gpu, int dst_gpu) const { return route_with(src_gpu, dst_gpu, false); }

Route Cluster::route_with(int src_gpu, int dst_gpu, bool near_ok) const {
  if (src_gpu < 0 || src_gpu >= num_gpus() || dst_gpu < 0 || dst_gpu >= num_gpus())
    throw std::out_of_range("route: GPU ids " + std::to_string(src_gpu) + ", " + std::to_string(dst_gpu) +
                            " outside 0.." + std::to_string(num_gpus() - 1));
  Route r;
  r.nvlink_only = true;
  if (src_gpu == dst_gpu) {
    r.bottleneck_bw = std::numeric_limits<double>::infinity();
    return r;
  }
  RouteCache& rc = *cache_;
  const int dst = rc.gpu_vertex[dst_gpu];
  int cur = rc.gpu_vertex[src_gpu];
  // The costs and bottlenecks towards dst: the cached full tree, else the layers up to the source's
  // (a route near its destination), else the full tree, built and cached.
  thread_local LocalTree local;
  std::shared_ptr<const DestTree> full = rc.cached_tree(dst_gpu);
  const std::uint64_t* cost = nullptr;
  const double* bottleneck = nullptr;
  if (!full && near_ok && rc.switched_fabric() && rc.local_tree(dst, cur, local)) {
    cost = local.cost.data();
    bottleneck = local.bottleneck.data();
  } else {
    if (!full) full = rc.tree(dst_gpu);
    cost = full->cost.data();
    bottleneck = full->bottleneck.data();
  }

  // Destination-mod-k: the k-th choice point uses digit k of the destination's key in the mixed
  // radix of the choice counts met so far, so consecutive destinations spread over parallel uplinks.
  std::uint64_t key = static_cast<std::uint64_t>(rc.route_key[dst_gpu]), div = 1;
  std::vector<int> cand;
  r.bottleneck_bw = bottleneck[cur];
  while (cur != dst) {
    cand.clear();
    const std::uint64_t c = cost[cur];
    for (int k = rc.offset[cur]; k < rc.offset[cur + 1]; ++k) {
      int m = rc.neighbour[k];
      if (cost[m] == kUnreached || cost[m] + rc.step(m, dst) != c) continue;
      if (std::min(rc.bandwidth[rc.edge[k]], bottleneck[m]) != bottleneck[cur]) continue;
      cand.push_back(k);
    }
    if (cand.empty()) throw std::logic_error("route: broken shortest-path tree");  // cannot happen
    std::size_t pick = 0;
    if (cand.size() > 1) {
      pick = static_cast<std::size_t>((key / div) % cand.size());
      if (div <= std::numeric_limits<std::uint64_t>::max() / cand.size()) div *= cand.size();
    }
    const int k = cand[pick];
    const LinkInfo& l = link(rc.edge[k]);
    r.links.push_back(rc.edge[k]);
    r.latency += l.latency;
    r.nvlink_only = r.nvlink_only && l.cls == LinkClass::NvLink;
    cur = rc.neighbour[k];
  }
  return r;
}

std::vector<Vertex> Cluster::route_vertices(int src_gpu, const Route& r) const {
  std::vector<Vertex> out{gpu_vertex(src_gpu)};
  for (int id : r.links) {
    auto [a, b] = link_ends(id);
    const int cur = static_cast<int>(out.back());
    if (a != cur && b != cur) throw std::invalid_argument("route_vertices: route does not start at this GPU");
    out.push_back(static_cast<Vertex>(a == cur ? b : a));
  }
  return out;
}

double Cluster::injection_bw(int gpu) const {
  if (gpu < 0 || gpu >= num_gpus()) throw std::out_of_range("injection_bw: no GPU " + std::to_string(gpu));
  return cache_->injection[static_cast<std::size_t>(gpu)];
}

double Cluster::network_injection(int gpu) const {
  const RouteCache& rc = *cache_;
  const int gv = static_cast<int>(gpu_vertex(gpu));
  double total = 0;
  for (int k = rc.offset[gv]; k < rc.offset[gv + 1]; ++k) {
    const LinkInfo& l = link(rc.edge[k]);
    if (l.cls == LinkClass::NvLink) continue;
    const int m = rc.neighbour[k];
    if (graph_[m].kind == VertexKind::Nic) {
      double out = 0;  // what the NIC can pass on to the network
      for (int j = rc.offset[m]; j < rc.offset[m + 1]; ++j)
        if (!rc.is_gpu[rc.neighbour[j]]) out += rc.bandwidth[rc.edge[j]];
      total += std::min(l.bandwidth, out);
    } else {
      total += l.bandwidth;
    }
  }
  return total;
}

namespace {

using FlowTraits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<boost::edge_capacity_t, std::int64_t,
                    boost::property<boost::edge_residual_capacity_t, std::int64_t,
                                    boost::property<boost::edge_reverse_t, FlowTraits::edge_descriptor>>>>;

// Adds the arc a→b with capacity c and its zero-capacity reverse b→a, as push-relabel expects
// (its flow checks treat every arc as either forward, capacity > 0, or reverse, capacity 0).
void add_arc(FlowGraph& g, int a, int b, std::int64_t c) {
  auto cap = boost::get(boost::edge_capacity, g);
  auto rev = boost::get(boost::edge_reverse, g);
  auto fwd = boost::add_edge(a, b, g).first;
  auto back = boost::add_edge(b, a, g).first;
  cap[fwd] = c;
  cap[back] = 0;
  rev[fwd] = back;
  rev[back] = fwd;
}

}  // namespace

double Cluster::bisection_bw() const {
  RouteCache& rc = *cache_;
  std::call_once(rc.bisection_once, [&] {
    const int n = num_gpus();
    if (n < 2) {
      rc.bisection = 0;
      return;
    }
    // Integer capacities keep push-relabel exact. A GPU's source/sink arc only has to exceed
    // every link together (inf); the preflow puts inf on each of n/2 GPUs at once, so scale until
    // (n + 2) · inf stays far inside int64 (it overflowed from ~8k GPUs when only `total` was bounded).
    double total = 0;
    for (double bw : rc.bandwidth) total += bw;
    const double scale = std::max(1.0, total * (n + 2.0) / 1e18);
    const std::int64_t inf = static_cast<std::int64_t>(std::ceil(total / scale)) + 1;
    const int nv = static_cast<int>(rc.is_gpu.size());
    const int s = nv, t = nv + 1;
    FlowGraph g(static_cast<std::size_t>(nv) + 2);
    for (std::size_t id = 0; id < rc.ends.size(); ++id) {
      const auto c = static_cast<std::int64_t>(std::llround(rc.bandwidth[id] / scale));
      add_arc(g, rc.ends[id].first, rc.ends[id].second, c);  // one arc per direction
      add_arc(g, rc.ends[id].second, rc.ends[id].first, c);
    }
    for (int gpu = 0; gpu < n; ++gpu) {
      if (gpu < n / 2) add_arc(g, s, rc.gpu_vertex[gpu], inf);
      else add_arc(g, rc.gpu_vertex[gpu], t, inf);
    }
    const std::int64_t flow = boost::push_relabel_max_flow(g, s, t);
    rc.bisection = static_cast<double>(flow) * scale;
  });
  return rc.bisection;
}

}  // namespace shardsim
