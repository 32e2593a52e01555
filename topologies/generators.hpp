// topologies/generators.hpp — building cluster graphs from a few parameters.
//
// Owns: the four generators (node-based fat-tree, large NVLink domains on a fat-tree, 3-D torus,
// dragonfly). Each returns the graph plus the FabricInfo that describes it (including the
// parameters it was given, so cluster_to_json can write them back). The Cluster constructor then
// validates the result.
// Invariants of every generated graph: vertex v < num_gpus is GPU v (node-major: gpu = node ×
// gpus_per_node + local index); then one NvSwitch per node when gpus_per_node > 1 ("nvsw<node>",
// one NvLink link per GPU at the GPU's nvlink_bw); then switches. Every GPU has its own NIC link
// (class NicLink, nic_bw) to a level-1 switch: a fat-tree leaf or a torus/dragonfly router. GPUs
// never need to forward traffic.
// Units: bytes/s per direction, seconds.
// Errors: bad parameters throw InputError(ctx.source, ctx.field(param), reason).
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "topologies/cluster.hpp"

namespace shardsim {

// Where parameters came from, for error messages: the source, and how to name a parameter there
// ("/fabric/radix" in a JSON file, "radix" in a shorthand).
struct SpecContext {
  std::string source;
  std::function<std::string(const std::string& param)> field = [](const std::string& p) { return p; };
  [[noreturn]] void fail(const std::string& param, const std::string& reason) const;
};

// Note: Boost 1.74's adjacency_list has no move constructor (std::move copies, swap copies
// thrice), so generators build `graph` in place and callers pass it on once.
struct GeneratedFabric {
  ClusterGraph graph;
  FabricInfo info;
};

// Rail-optimised (or plain) fat-tree of 2 or 3 levels, all switch ports at nic_bw.
// Leaves use radix/2 ports down. Rail-optimised: a scalable unit (SU) is radix/2 nodes, and each SU
// has one leaf per rail (local GPU index) taking that rail's GPU of every node of the SU — as in a
// DGX SuperPOD. Otherwise leaf i takes GPUs [i·radix/2, (i+1)·radix/2).
// Uplinks per leaf U = ceil(d / oversubscription), d = most GPUs on one leaf; 2 levels: U spines,
// each leaf linked once to each spine (so at most `radix` leaves). 3 levels: pods of radix/2
// leaves (whole SUs when rail-optimised), U spines per pod, each pod-spine s linked to its own
// group of c cores (c = leaves per pod, so spines are non-blocking), each core to one spine per pod
// (so at most `radix` pods). Oversubscription is at the leaf uplinks only.
struct FatTreeParams {
  int levels = 0;                 // 0 = automatic: 2 while leaves <= radix, else 3
  int radix = 64;                 // switch ports (e.g. 64 × 400 Gb/s: NVIDIA Quantum-2 QM9700)
  double oversubscription = 1.0;  // leaf down:up port ratio, >= 1
  bool rail_optimized = true;
  double nic_bw = 50e9;           // 400 Gb/s NDR InfiniBand / 400GbE per GPU
};
GeneratedFabric generate_fat_tree(const GpuSpec& gpu, int nodes, int gpus_per_node, const FatTreeParams& p,
                                  const Latencies& lat, const SpecContext& ctx);

// Large NVLink domains (e.g. GB200 NVL72: 72 GPUs on one NVSwitch fabric per rack) joined by a
// fat-tree as above; FabricInfo.kind = "nvlink-domain". `racks` NVLink domains of `gpus_per_rack`.
GeneratedFabric generate_nvlink_domains(const GpuSpec& gpu, int racks, int gpus_per_rack, const FatTreeParams& p,
                                        const Latencies& lat, const SpecContext& ctx);

// Torus of nodes (1 to 3 dimensions, x fastest: node = x + X·(y + Y·z)), one router per node
// ("rtr<node>", level 1) linked to its ±1 neighbours in each dimension (class Torus, link_bw; a
// dimension of size 2 gets one link, not two; size 1 none); each GPU links to its node's router.
struct TorusParams {
  std::vector<int> dims{4, 4, 4};
  double link_bw = 50e9;          // per torus link, per direction
  double nic_bw = 50e9;           // GPU ↔ router
};
GeneratedFabric generate_torus(const GpuSpec& gpu, int gpus_per_node, const TorusParams& p, const Latencies& lat,
                               const SpecContext& ctx);

// Dragonfly: `groups` groups of `routers_per_group` routers ("g<group>r<i>", level 1), all-to-all
// local links inside a group (DragonflyLocal), `global_links_per_router` global ports per router
// (DragonflyGlobal). Group pairs are joined in lexicographic order, each by
// m = max(1, floor(routers·global / (groups−1))) links, taking each group's global ports router by
// router (the "consecutive" arrangement); needs groups − 1 <= routers·global.
// `nodes_per_router` nodes hang off each router (node n on router n / nodes_per_router).
struct DragonflyParams {
  int groups = 9;
  int routers_per_group = 4;
  int nodes_per_router = 1;
  int global_links_per_router = 2;
  double local_bw = 50e9;
  double global_bw = 50e9;
  double nic_bw = 50e9;
};
GeneratedFabric generate_dragonfly(const GpuSpec& gpu, int gpus_per_node, const DragonflyParams& p,
                                   const Latencies& lat, const SpecContext& ctx);

}  // namespace shardsim
