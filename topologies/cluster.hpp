// topologies/cluster.hpp — a GPU cluster as a graph, and the queries the simulator needs.
//
// Owns: Cluster — GPUs, NVSwitches, NICs and network switches as vertices of a Boost.Graph,
// links (bandwidth per direction, latency, class) as edges — plus the structure that the
// generators know (NVLink domains, rails, leaf switches) and route / bisection queries.
// A Cluster is built by topologies/cluster_io (JSON file or `dgx-h100:N`-style shorthand)
// through the generators in topologies/generators; it is validated (connected, consistent) on
// construction and immutable afterwards.
// Units: bytes/s per direction, seconds. GPU ids are 0..num_gpus()-1, numbered node-major
// (gpu = node * gpus_per_node + local index) for node-based fabrics.
// GPU types: one per cluster, or one per node for a mixed cluster (nodes of H100 and H200, say:
// the "+" shorthand and the cluster file's "node_gpus"). gpu() is node 0's type; whatever prices
// work on a GPU asks gpu_of(gpu). A plan's pool lies on one type (plan_check refuses one that
// spans two).
// Routing: fewest hops without forwarding through a GPU (GPUs forward only when no other path
// exists, e.g. an explicit GPU-GPU link list); among equal hop counts the widest bottleneck; among
// equals, destination-mod-k over the candidate next links (as InfiniBand's fat-tree routing does), so
// routes spread over spines deterministically. A route between GPUs of one node on an NVSwitch is
// GPU→NvSwitch→GPU.
// Thread-safety: all const methods are safe to call concurrently (route caches are internally
// synchronised: per-destination shortest-path trees under a shared_mutex, bisection under a
// once_flag). Copies share those caches; the graph itself never changes after construction.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "topologies/gpu_spec.hpp"

#include "topologies/link_class.hpp"

namespace shardsim {

enum class VertexKind { Gpu, NvSwitch, Nic, Switch };
// Names used in output and in cluster JSON: "gpu", "nvswitch", "nic", "switch"; "nvlink", "nic",
// "leaf-spine", "spine-core", "torus", "dragonfly-local", "dragonfly-global".
const char* to_string(VertexKind k);
const char* to_string(LinkClass c);

// Largest cluster accepted (GPUs); anything bigger is refused as an input error.
inline constexpr int kMaxClusterGpus = 65536;

struct VertexInfo {
  VertexKind kind = VertexKind::Gpu;
  std::string name;   // e.g. "gpu12", "nvsw1", "nic12", "leaf3", "spine0"
  int gpu = -1;       // GPU id for Gpu/Nic vertices
  int node = -1;      // node (NVLink domain) for Gpu/NvSwitch/Nic vertices
  int level = 0;      // switch level: 1 = leaf, 2 = spine, 3 = core
};

struct LinkInfo {
  LinkClass cls = LinkClass::NicLink;
  double bandwidth = 0;  // bytes/s per direction
  double latency = 0;    // seconds
};

using ClusterGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, VertexInfo, LinkInfo>;
using Vertex = ClusterGraph::vertex_descriptor;
using Edge = ClusterGraph::edge_descriptor;

struct Route {
  std::vector<int> links;          // edge ids (see Cluster::link) in path order, src → dst
  double bottleneck_bw = 0;        // min bandwidth over the links, bytes/s
  double latency = 0;              // sum of link latencies, seconds
  bool nvlink_only = false;        // stays inside one NVLink domain
  int hops() const { return static_cast<int>(links.size()); }
};

// Per-link latencies the generators assign, seconds. A route adds the latencies of its links, so a
// same-node route costs 2 × nvlink and an inter-node route 2 × nic + (switch hops) × switch_link.
// Keep switch_link 0 to give all routes of one class equal latency (docs/simgrid.md: CM02 shares a
// bottleneck in inverse proportion to path latency).
struct Latencies {
  double nvlink = 0.5e-6;      // GPU↔NvSwitch
  double nic = 1.5e-6;         // GPU↔first network switch or router
  double switch_link = 0.0;    // switch↔switch: leaf-spine, spine-core, torus, dragonfly
};

// Achieved fraction of link bandwidth for collective traffic; used by sim/ (alpha-beta executor).
struct CollectiveEfficiency {
  double nvlink = 0.82;        // 0.82 × 450 GB/s ≈ 370 GB/s: ring-type NCCL bus bandwidth on 8×H100
  double network = 0.9;        // inter-node links
};

struct FabricInfo {
  std::string kind;                // "fat-tree", "nvlink-domain", "torus", "dragonfly", "links"
  int levels = 0;                  // fat-tree levels (2 or 3)
  double oversubscription = 1.0;   // down:up ratio at the most oversubscribed level
  bool rail_optimized = false;
  std::vector<int> torus_dims;     // for torus
  int groups = 0;                  // dragonfly groups

  // Generator parameters, echoed by cluster_to_json so that a generated cluster round-trips.
  int radix = 0;                            // fat-tree switch ports
  double requested_oversubscription = 1.0;  // as asked; `oversubscription` is what port counts gave
  double nic_bw = 0;                        // per-GPU NIC, bytes/s per direction
  double link_bw = 0;                       // torus link / dragonfly local link, bytes/s per direction
  double global_bw = 0;                     // dragonfly global link, bytes/s per direction
  int routers_per_group = 0;                // dragonfly
  int nodes_per_router = 0;                 // dragonfly
  int global_links_per_router = 0;          // dragonfly
  Latencies latencies;                      // what the generator (or link list defaults) used
  CollectiveEfficiency efficiency;          // carried for sim/, not used by the graph
};

// One constant `shardsim calibrate` fitted into a cluster file, with what set it: the measurement
// files (as their paths were given), how many of their rows (nccl-tests sizes at or above
// `min_bytes`; kernel table rows; power runs) and the fit's RMS of log(model / measured) before and
// after. `validate --hw FILE` prices those files' rows as calibration rows and any other file's as
// check rows (docs/validation.md, "Your own hardware").
struct CalibrationRecord {
  std::string constant;              // "collective_efficiency.network", "gpu.kernels.gemm_bf16", "gpu.power", …
  std::string kind;                  // the files' kind: "nccl-tests", "kernels" or "power"
  double value = 0;                  // the fitted value (power: active_w)
  std::vector<std::string> sources;  // the files
  int rows = 0;
  double min_bytes = 0;              // nccl-tests: the smallest size fitted (0: every row)
  double rms_log_before = 0, rms_log_after = 0;
};

class Cluster {
 public:
  // Builds from a graph and its structure; validates (connected, every GPU has a route to every
  // other, positive bandwidths) and throws InputError(source, field, reason) otherwise.
  // `node_gpus`: empty (every node has `gpu`), or one GPU type per node (node 0's must be `gpu`).
  Cluster(std::string name, std::string source, GpuSpec gpu, int gpus_per_node, FabricInfo fabric,
          ClusterGraph graph, std::vector<GpuSpec> node_gpus = {});

  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }   // file path or shorthand it came from
  const GpuSpec& gpu() const { return gpu_; }             // node 0's GPU type (the only one unless mixed())
  // Mixed clusters: the type of a GPU (std::out_of_range when there is no such GPU) or of a node;
  // the distinct types in node order, and which of them a GPU is.
  const GpuSpec& gpu_of(int gpu) const { return types_[static_cast<std::size_t>(gpu_type_of(gpu))]; }
  const GpuSpec& node_gpu(int node) const;
  // The type of the pool that starts at GPU `first` (node 0's when out of range, as for a plan
  // not yet checked): a pool lies on one type.
  const GpuSpec& pool_gpu(int first) const { return first >= 0 && first < num_gpus() ? gpu_of(first) : gpu_; }
  bool mixed() const { return types_.size() > 1; }
  const std::vector<GpuSpec>& gpu_types() const { return types_; }
  int gpu_type_of(int gpu) const;
  // Whether `gpus` GPUs from `first` on are all of one type (a pool must be: plan_check).
  bool one_gpu_type(int first, int gpus) const;
  // Per node (empty unless mixed()): the index into gpu_types().
  const std::vector<int>& node_types() const { return node_type_; }
  // "16 × H100-SXM-80GB", or "16 × H100-SXM-80GB + 16 × H200-SXM-141GB" for a mixed cluster.
  std::string gpus_text() const;
  const FabricInfo& fabric() const { return fabric_; }
  const CollectiveEfficiency& collective_efficiency() const { return fabric_.efficiency; }
  // The constants calibrate fitted into this cluster's file (empty for shorthands and plain files).
  const std::vector<CalibrationRecord>& calibration() const { return calibration_; }
  void set_calibration(std::vector<CalibrationRecord> records) { calibration_ = std::move(records); }
  const ClusterGraph& graph() const { return graph_; }
  int num_vertices() const { return static_cast<int>(boost::num_vertices(graph_)); }
  int count(VertexKind k) const;           // vertices of kind k
  int num_leaves() const { return num_leaves_; }   // level-1 switches (leaves, torus/dragonfly routers)

  int num_gpus() const { return static_cast<int>(gpu_vertex_.size()); }
  int gpus_per_node() const { return gpus_per_node_; }            // = NVLink domain size
  int num_nodes() const { return num_gpus() / gpus_per_node_; }
  Vertex gpu_vertex(int gpu) const { return gpu_vertex_.at(gpu); }

  int node_of(int gpu) const;             // NVLink domain id
  int rail_of(int gpu) const;             // local index within the node (rail id)
  int leaf_of(int gpu) const;             // leaf switch (level-1) index, -1 when none
  bool same_nvlink_domain(int a, int b) const { return node_of(a) == node_of(b); }
  bool same_rail(int a, int b) const { return rail_of(a) == rail_of(b); }
  bool same_leaf(int a, int b) const { return leaf_of(a) >= 0 && leaf_of(a) == leaf_of(b); }

  // Link by edge id (0..num_links()-1, stable).
  int num_links() const { return static_cast<int>(links_.size()); }
  const LinkInfo& link(int id) const;
  std::pair<int, int> link_ends(int id) const;   // vertex indices

  // Shortest route (fewest hops; among equals, deterministic) between two GPUs.
  // src == dst gives an empty route (bottleneck +infinity, latency 0). Ids out of range:
  // std::out_of_range. Cost: on a fabric where GPUs reach each other through switches, a route near
  // its destination explores only the layers around it (up to 2,048 vertices); otherwise one cached
  // shortest-path tree per destination (built on first use, O(V log V)); then O(hops × degree).
  Route route(int src_gpu, int dst_gpu) const;
  // The same route, always from the destination's whole tree (for tests: the two must agree).
  Route route_from_whole_tree(int src_gpu, int dst_gpu) const;
  // The vertices a route visits, src GPU first (route(a, b) must have come from gpu `src_gpu`).
  std::vector<Vertex> route_vertices(int src_gpu, const Route& r) const;
  // Per-GPU injection bandwidth into the inter-node network (sum of its NIC links), bytes/s.
  double injection_bw(int gpu) const;
  // Bisection bandwidth: min cut between the two halves of the GPU id range, bytes/s per
  // direction (computed by max-flow on the graph).
  // Computed once per cluster (push-relabel), then cached; 0 when there are fewer than 2 GPUs.
  double bisection_bw() const;

 private:
  std::string name_, source_;
  GpuSpec gpu_;
  std::vector<GpuSpec> types_;     // distinct GPU types in node order; types_[0] = gpu_
  std::vector<int> node_type_;     // per node, index into types_ (empty: all 0)
  int gpus_per_node_;
  FabricInfo fabric_;
  ClusterGraph graph_;
  std::vector<Vertex> gpu_vertex_;
  // Per link id, by value: Boost edge descriptors point into one graph object and would dangle in
  // a copied Cluster.
  std::vector<LinkInfo> links_;
  std::vector<int> leaf_;          // per GPU: leaf ordinal or -1
  int num_leaves_ = 0;
  std::vector<CalibrationRecord> calibration_;
  void validate();
  double network_injection(int gpu) const;  // what injection_bw() returns, from the graph
  Route route_with(int src_gpu, int dst_gpu, bool near_ok) const;
  struct RouteCache;
  std::shared_ptr<RouteCache> cache_;
};

// Loads a cluster from a spec: a shorthand ("dgx-h100:32", see cluster_io.hpp for the grammar)
// or a JSON file path. Throws InputError on any problem.
Cluster load_cluster(const std::string& spec);

}  // namespace shardsim
