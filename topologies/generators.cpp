// topologies/generators.cpp — fat-tree, NVLink-domain, torus and dragonfly cluster graphs.
//
// Owns: the construction rules documented in generators.hpp and docs/cluster-format.md, and the
// parameter checks that only the generators can make (a 2-level tree too small for its leaves, a
// dragonfly with too few global ports, …).
// Units: bytes/s per direction, seconds. Thread-safety: pure functions.
#include "topologies/generators.hpp"

#include <cmath>
#include <cstdint>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"

namespace shardsim {

void SpecContext::fail(const std::string& param, const std::string& reason) const {
  throw InputError(source, field ? field(param) : param, reason);
}

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// Appends vertices and links to a graph in a fixed order (ids are insertion order).
class Builder {
 public:
  explicit Builder(ClusterGraph& g) : g_(g) {}
  Vertex vertex(VertexKind kind, std::string name, int gpu = -1, int node = -1, int level = 0) {
    VertexInfo info;
    info.kind = kind;
    info.name = std::move(name);
    info.gpu = gpu;
    info.node = node;
    info.level = level;
    return boost::add_vertex(info, g_);
  }
  void link(Vertex a, Vertex b, LinkClass cls, double bw, double latency) {
    LinkInfo l;
    l.cls = cls;
    l.bandwidth = bw;
    l.latency = latency;
    boost::add_edge(a, b, l, g_);
  }

 private:
  ClusterGraph& g_;
};

void check_int(const SpecContext& ctx, const std::string& param, std::int64_t v, std::int64_t lo, std::int64_t hi) {
  if (v < lo || v > hi) ctx.fail(param, "value " + str(v) + " out of range [" + str(lo) + ", " + str(hi) + "]");
}

void check_bw(const SpecContext& ctx, const std::string& param, double v) {
  if (!std::isfinite(v) || v <= 0) ctx.fail(param, "must be a finite number > 0, got " + format_number(v));
  if (v > 1e15) ctx.fail(param, "value " + format_number(v) + " bytes/s is implausibly large (limit 1e15)");
  // Tiny figures made every time infinite (or NaN) downstream; no interconnect is slower than this.
  if (v < 1e6) ctx.fail(param, "value " + format_number(v) + " bytes/s is implausibly small (at least 1e6)");
}

void check_gpu_total(const SpecContext& ctx, std::int64_t nodes, std::int64_t gpn) {
  check_int(ctx, "gpus_per_node", gpn, 1, kMaxClusterGpus);
  check_int(ctx, "nodes", nodes, 1, kMaxClusterGpus);
  if (nodes * gpn > kMaxClusterGpus)
    ctx.fail("nodes", str(nodes) + " nodes × " + str(gpn) + " GPUs = " + str(nodes * gpn) +
                          " GPUs is more than the limit of " + str(kMaxClusterGpus));
}

void check_latencies(const SpecContext& ctx, const Latencies& lat) {
  for (auto [name, v] : {std::pair{"latencies.nvlink", lat.nvlink}, std::pair{"latencies.nic", lat.nic},
                         std::pair{"latencies.switch", lat.switch_link}})
    if (!std::isfinite(v) || v < 0 || v > 1) ctx.fail(name, "must be in [0, 1] seconds, got " + format_number(v));
}

// GPU vertices 0..N-1, then one NvSwitch per node (when a node has more than one GPU) with one
// NvLink link per GPU. Returns the GPU vertices.
std::vector<Vertex> add_nodes(Builder& b, const GpuSpec& gpu, int nodes, int gpn, const Latencies& lat) {
  std::vector<Vertex> gpus;
  gpus.reserve(static_cast<std::size_t>(nodes) * gpn);
  for (int i = 0; i < nodes * gpn; ++i) gpus.push_back(b.vertex(VertexKind::Gpu, "gpu" + str(i), i, i / gpn));
  if (gpn > 1)
    for (int n = 0; n < nodes; ++n) {
      Vertex sw = b.vertex(VertexKind::NvSwitch, "nvsw" + str(n), -1, n);
      for (int l = 0; l < gpn; ++l) b.link(gpus[n * gpn + l], sw, LinkClass::NvLink, gpu.nvlink_bw, lat.nvlink);
    }
  return gpus;
}

int ceil_div(std::int64_t a, std::int64_t b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace

GeneratedFabric generate_fat_tree(const GpuSpec& gpu, int nodes, int gpn, const FatTreeParams& p,
                                  const Latencies& lat, const SpecContext& ctx) {
  check_gpu_total(ctx, nodes, gpn);
  check_int(ctx, "radix", p.radix, 4, 1024);
  if (p.radix % 2) ctx.fail("radix", "must be even (half the ports go down, half up), got " + str(p.radix));
  if (p.levels != 0 && p.levels != 2 && p.levels != 3)
    ctx.fail("levels", "must be 2, 3 or 0 (automatic), got " + str(p.levels));
  if (!std::isfinite(p.oversubscription) || p.oversubscription < 1 || p.oversubscription > 64)
    ctx.fail("oversubscription", "must be in [1, 64] (down:up ratio), got " + format_number(p.oversubscription));
  check_bw(ctx, "nic_bw", p.nic_bw);
  check_bw(ctx, "gpu.nvlink_bw", gpu.nvlink_bw);
  check_latencies(ctx, lat);

  const int n_gpus = nodes * gpn;
  const int down = p.radix / 2;
  // Leaf of each GPU, and the fullest leaf's down-link count.
  int n_leaves = 0, per_leaf = 0, leaves_per_pod = 0;
  std::vector<int> leaf_of(n_gpus);
  if (p.rail_optimized) {
    const int sus = ceil_div(nodes, down);
    n_leaves = sus * gpn;
    per_leaf = std::min(nodes, down);
    for (int g = 0; g < n_gpus; ++g) leaf_of[g] = (g / gpn / down) * gpn + g % gpn;
    leaves_per_pod = std::max(1, down / gpn) * gpn;  // whole scalable units
  } else {
    n_leaves = ceil_div(n_gpus, down);
    per_leaf = std::min(n_gpus, down);
    for (int g = 0; g < n_gpus; ++g) leaf_of[g] = g / down;
    leaves_per_pod = down;
  }
  // Uplinks per leaf: ceil(per_leaf / o), tolerant of rounding in an exact ratio such as 32 / 2.
  const int up = std::max(1, static_cast<int>(std::ceil(per_leaf / p.oversubscription - 1e-9)));
  int levels = p.levels;
  if (levels == 0) levels = n_leaves <= p.radix ? 2 : 3;
  if (levels == 2 && n_leaves > p.radix)
    ctx.fail("levels", "a 2-level fat-tree of radix " + str(p.radix) + " reaches at most " + str(p.radix) +
                           " leaves; this cluster needs " + str(n_leaves) + ": use 3 levels or a larger radix");
  const int pods = ceil_div(n_leaves, leaves_per_pod);
  if (levels == 3 && pods > p.radix)
    ctx.fail("nodes", "a 3-level fat-tree of radix " + str(p.radix) + " reaches at most " + str(p.radix) +
                          " pods of " + str(leaves_per_pod) + " leaves; this cluster needs " + str(pods) +
                          ": use a larger radix");

  GeneratedFabric out;  // returned by name (NRVO): the graph is built in place
  Builder b(out.graph);
  std::vector<Vertex> gpus = add_nodes(b, gpu, nodes, gpn, lat);
  std::vector<Vertex> leaves;
  for (int l = 0; l < n_leaves; ++l) leaves.push_back(b.vertex(VertexKind::Switch, "leaf" + str(l), -1, -1, 1));
  for (int g = 0; g < n_gpus; ++g) b.link(gpus[g], leaves[leaf_of[g]], LinkClass::NicLink, p.nic_bw, lat.nic);
  if (levels == 2) {
    std::vector<Vertex> spines;
    for (int s = 0; s < up; ++s) spines.push_back(b.vertex(VertexKind::Switch, "spine" + str(s), -1, -1, 2));
    for (int l = 0; l < n_leaves; ++l)
      for (int s = 0; s < up; ++s) b.link(leaves[l], spines[s], LinkClass::LeafSpine, p.nic_bw, lat.switch_link);
  } else {
    const int cores_per_group = std::min(leaves_per_pod, n_leaves);
    std::vector<Vertex> spines, cores;
    for (int i = 0; i < pods * up; ++i) spines.push_back(b.vertex(VertexKind::Switch, "spine" + str(i), -1, -1, 2));
    for (int i = 0; i < up * cores_per_group; ++i)
      cores.push_back(b.vertex(VertexKind::Switch, "core" + str(i), -1, -1, 3));
    for (int l = 0; l < n_leaves; ++l) {
      const int pod = l / leaves_per_pod;
      for (int s = 0; s < up; ++s)
        b.link(leaves[l], spines[pod * up + s], LinkClass::LeafSpine, p.nic_bw, lat.switch_link);
    }
    for (int pod = 0; pod < pods; ++pod)
      for (int s = 0; s < up; ++s)
        for (int j = 0; j < cores_per_group; ++j)
          b.link(spines[pod * up + s], cores[s * cores_per_group + j], LinkClass::SpineCore, p.nic_bw,
                 lat.switch_link);
  }

  FabricInfo& f = out.info;
  f.kind = "fat-tree";
  f.levels = levels;
  f.oversubscription = static_cast<double>(per_leaf) / up;
  f.requested_oversubscription = p.oversubscription;
  f.rail_optimized = p.rail_optimized;
  f.radix = p.radix;
  f.nic_bw = p.nic_bw;
  f.latencies = lat;
  return out;
}

GeneratedFabric generate_nvlink_domains(const GpuSpec& gpu, int racks, int gpus_per_rack, const FatTreeParams& p,
                                        const Latencies& lat, const SpecContext& ctx) {
  GeneratedFabric out = generate_fat_tree(gpu, racks, gpus_per_rack, p, lat, ctx);
  out.info.kind = "nvlink-domain";
  return out;
}

GeneratedFabric generate_torus(const GpuSpec& gpu, int gpn, const TorusParams& p, const Latencies& lat,
                               const SpecContext& ctx) {
  if (p.dims.empty() || p.dims.size() > 3) ctx.fail("dims", "expected 1 to 3 dimensions, got " + str(std::ssize(p.dims)));
  std::int64_t nodes = 1;
  for (int d : p.dims) {
    check_int(ctx, "dims", d, 1, kMaxClusterGpus);
    nodes *= d;
    if (nodes > kMaxClusterGpus) break;
  }
  if (nodes > kMaxClusterGpus) ctx.fail("dims", "more than " + str(kMaxClusterGpus) + " nodes");
  check_gpu_total(ctx, nodes, gpn);
  check_bw(ctx, "link_bw", p.link_bw);
  check_bw(ctx, "nic_bw", p.nic_bw);
  check_bw(ctx, "gpu.nvlink_bw", gpu.nvlink_bw);
  check_latencies(ctx, lat);

  const int n = static_cast<int>(nodes);
  GeneratedFabric out;  // returned by name (NRVO): the graph is built in place
  Builder b(out.graph);
  std::vector<Vertex> gpus = add_nodes(b, gpu, n, gpn, lat);
  std::vector<Vertex> routers;
  for (int i = 0; i < n; ++i) routers.push_back(b.vertex(VertexKind::Switch, "rtr" + str(i), -1, i, 1));
  for (int g = 0; g < n * gpn; ++g) b.link(gpus[g], routers[g / gpn], LinkClass::NicLink, p.nic_bw, lat.nic);
  // Node index = x + X·(y + Y·z): stride of dimension d is the product of the earlier sizes.
  const int nd = static_cast<int>(p.dims.size());
  for (int i = 0; i < n; ++i) {
    int stride = 1;
    for (int d = 0; d < nd; ++d) {
      const int k = p.dims[d];
      const int coord = (i / stride) % k;
      const int next = i + ((coord + 1) % k - coord) * stride;
      if (k >= 3 || (k == 2 && coord == 0))
        b.link(routers[i], routers[next], LinkClass::Torus, p.link_bw, lat.switch_link);
      stride *= k;
    }
  }
  FabricInfo& f = out.info;
  f.kind = "torus";
  f.torus_dims = p.dims;
  f.link_bw = p.link_bw;
  f.nic_bw = p.nic_bw;
  f.latencies = lat;
  return out;
}

GeneratedFabric generate_dragonfly(const GpuSpec& gpu, int gpn, const DragonflyParams& p, const Latencies& lat,
                                   const SpecContext& ctx) {
  check_int(ctx, "groups", p.groups, 1, kMaxClusterGpus);
  check_int(ctx, "routers_per_group", p.routers_per_group, 1, 1024);
  check_int(ctx, "nodes_per_router", p.nodes_per_router, 1, 1024);
  check_int(ctx, "global_links_per_router", p.global_links_per_router, 0, 1024);
  const std::int64_t ports = std::int64_t{p.routers_per_group} * p.global_links_per_router;
  if (p.groups - 1 > ports)
    ctx.fail("groups", str(p.groups) + " groups need " + str(p.groups - 1) + " global links per group, but " +
                           str(p.routers_per_group) + " routers × " + str(p.global_links_per_router) +
                           " global links give " + str(ports) + "; at most " + str(ports + 1) + " groups");
  const std::int64_t nodes = std::int64_t{p.groups} * p.routers_per_group * p.nodes_per_router;
  if (nodes > kMaxClusterGpus) ctx.fail("groups", str(nodes) + " nodes is more than the limit of " + str(kMaxClusterGpus));
  check_gpu_total(ctx, nodes, gpn);
  check_bw(ctx, "local_bw", p.local_bw);
  check_bw(ctx, "global_bw", p.global_bw);
  check_bw(ctx, "nic_bw", p.nic_bw);
  check_bw(ctx, "gpu.nvlink_bw", gpu.nvlink_bw);
  check_latencies(ctx, lat);

  const int n = static_cast<int>(nodes), a = p.routers_per_group, h = p.global_links_per_router;
  GeneratedFabric out;  // returned by name (NRVO): the graph is built in place
  Builder b(out.graph);
  std::vector<Vertex> gpus = add_nodes(b, gpu, n, gpn, lat);
  std::vector<Vertex> routers;
  for (int grp = 0; grp < p.groups; ++grp)
    for (int r = 0; r < a; ++r) {
      std::string name = "g";  // built piecewise: GCC 12 warns falsely (-Wrestrict) on a + chain here
      name += str(grp);
      name += 'r';
      name += str(r);
      routers.push_back(b.vertex(VertexKind::Switch, std::move(name), -1, -1, 1));
    }
  for (int g = 0; g < n * gpn; ++g)
    b.link(gpus[g], routers[g / gpn / p.nodes_per_router], LinkClass::NicLink, p.nic_bw, lat.nic);
  for (int grp = 0; grp < p.groups; ++grp)
    for (int r = 0; r < a; ++r)
      for (int q = r + 1; q < a; ++q)
        b.link(routers[grp * a + r], routers[grp * a + q], LinkClass::DragonflyLocal, p.local_bw, lat.switch_link);
  if (p.groups > 1) {
    const int per_pair = static_cast<int>(std::max<std::int64_t>(1, ports / (p.groups - 1)));
    std::vector<int> next_port(p.groups, 0);
    for (int i = 0; i < p.groups; ++i)
      for (int j = i + 1; j < p.groups; ++j)
        for (int c = 0; c < per_pair; ++c) {
          const int ri = next_port[i]++ / h, rj = next_port[j]++ / h;
          b.link(routers[i * a + ri], routers[j * a + rj], LinkClass::DragonflyGlobal, p.global_bw, lat.switch_link);
        }
  }
  FabricInfo& f = out.info;
  f.kind = "dragonfly";
  f.groups = p.groups;
  f.routers_per_group = a;
  f.nodes_per_router = p.nodes_per_router;
  f.global_links_per_router = h;
  f.link_bw = p.local_bw;
  f.global_bw = p.global_bw;
  f.nic_bw = p.nic_bw;
  f.latencies = lat;
  return out;
}

}  // namespace shardsim
