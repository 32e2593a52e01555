// topologies/cluster_io.hpp — clusters from files and shorthands, and back to JSON / Graphviz.
//
// Owns: the cluster JSON format and the command-line shorthand grammar (both documented in
// docs/cluster-format.md), their strict readers, and the writers (cluster_to_json, to_dot).
// load_cluster(spec) itself is declared in cluster.hpp.
//
// Shorthand grammar:   FAMILY ':' SIZE { ',' KEY '=' VALUE }
//   dgx-h100:N  dgx-h200:N  dgx-b200:N  hgx-h800:N  dgx-a100:N   N nodes of 8 GPUs, fat-tree
//       keys: oversub (oversubscription), radix, levels, rails (on|off), nic_bw, gpu
//   nvl72:R                                                      R racks of 72 GB200 on NVLink
//       keys: as above (rails defaults to off)
//   torus:X[xY[xZ]]     keys: gpus (per node, default 8), link_bw, nic_bw, gpu
//   dragonfly:G         keys: routers, nodes, global, gpus, local_bw, global_bw, nic_bw, gpu
//   dgx-h100:N+dgx-h200:M[,keys]  a mixed cluster: node families joined on one fat-tree, nodes in
//       the order written; the keys of the node families but gpu, after the last part
// Anything else is a JSON file path.
// Errors: InputError(source, field, reason) — a JSON pointer for files ("/fabric/radix"), the key
// for shorthands ("radix", "size" for the part after ':').
// Thread-safety: pure functions (the GPU preset table is immutable).
#pragma once

#include <string>
#include <string_view>

#include "common/json_reader.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

// One paragraph listing the shorthands and their keys, for --help and error messages.
std::string cluster_shorthand_help();
// True when `spec` starts with a known shorthand family followed by ':'.
bool is_cluster_shorthand(const std::string& spec);
Cluster cluster_from_shorthand(const std::string& spec);
// `doc` is a parsed cluster file; `source` names it in errors; `default_name` is used when the
// file has no "name".
Cluster cluster_from_json(const json& doc, const std::string& source, const std::string& default_name);
Cluster load_cluster_file(const std::string& path);

enum class ClusterJsonStyle {
  Parameters,  // generator parameters (kind fat-tree / torus / …): small, editable
  Links,       // every vertex and link (kind "links"): exact, editable link by link
};
// A cluster file that loads back to the same cluster (same vertices, links, values, order).
// Clusters whose fabric is already "links" are always written as links.
json cluster_to_json(const Cluster& c, ClusterJsonStyle style = ClusterJsonStyle::Parameters);

// Graphviz (undirected, one subgraph per NVLink domain, links coloured by class).
// Graphviz DOT of the cluster. Per GPU: every GPU, NIC and NVSwitch and every link. Per node: one
// vertex per NVLink domain, its links to the fabric merged per switch and class ("8 × nic 50
// GB/s"), switches and switch links as they are — readable at hundreds of GPUs.
enum class DotDetail { Gpus, Nodes };
std::string to_dot(const Cluster& c, DotDetail detail = DotDetail::Gpus);

// "nvlink" → LinkClass::NvLink, … (names of to_string(LinkClass)); false when unknown.
bool link_class_from_string(std::string_view s, LinkClass& out);

}  // namespace shardsim
