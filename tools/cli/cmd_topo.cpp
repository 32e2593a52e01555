// tools/cli/cmd_topo.cpp — `shardsim topo`: load a cluster, print its summary, export it.
//
// Owns: the summary layout (GPU, sizes, fabric, vertex/link counts, injection and bisection
// bandwidth, example routes) and the --dot / --json / --json-links / --route options.
// Output files are written all-or-nothing (write_file_atomically); bad input throws InputError.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "common/output_file.hpp"
#include "tools/cli/commands.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"

namespace shardsim::cli {
namespace {

struct TopoOptions {
  std::string cluster;
  std::string dot;
  std::string dot_detail = "auto";
  std::string json;
  std::string json_links;
  std::vector<std::string> routes;
};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// 450e9 → "450 GB/s", 1.2e12 → "1.2 TB/s".
std::string rate(double bytes_per_s) {
  if (bytes_per_s >= 1e12) return format_number(bytes_per_s / 1e12) + " TB/s";
  return format_number(bytes_per_s / 1e9) + " GB/s";
}

std::string micros(double s) { return fixed(s * 1e6, 2) + " us"; }

std::string describe_route(const Cluster& c, int a, int b) {
  const Route r = c.route(a, b);
  std::ostringstream out;
  out << "gpu" << a << " -> gpu" << b << ": " << r.hops() << " hops, bottleneck " << rate(r.bottleneck_bw)
      << ", latency " << micros(r.latency) << (r.nvlink_only ? ", NVLink only" : "") << "\n      ";
  const auto path = c.route_vertices(a, r);
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (i) out << " -[" << to_string(c.link(r.links[i - 1]).cls) << "]- ";
    out << c.graph()[path[i]].name;
  }
  return out.str();
}

int parse_gpu(const Cluster& c, const std::string& text, const std::string& arg) {
  std::size_t used = 0;
  long v = -1;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty())
    throw InputError("--route", arg, "expected two GPU ids A,B, got \"" + text + "\"");
  if (v < 0 || v >= c.num_gpus())
    throw InputError("--route", arg, "GPU " + text + " outside 0.." + std::to_string(c.num_gpus() - 1));
  return static_cast<int>(v);
}

void print_summary(const Cluster& c, const TopoOptions& opt) {
  const FabricInfo& f = c.fabric();
  std::ostringstream out;
  out << "cluster     " << c.name() << "  (from " << c.source() << ")\n";
  for (const GpuSpec& g : c.gpu_types())
    out << "gpu         " << g.name << ": " << format_number(g.bf16_flops / 1e12) << " TFLOP/s bf16, "
        << format_number(g.fp8_flops / 1e12) << " TFLOP/s fp8, " << format_number(g.hbm_bytes / 1e9) << " GB HBM at "
        << rate(g.hbm_bw) << ", NVLink " << rate(g.nvlink_bw) << " per direction\n";
  out << "size        " << (c.mixed() ? c.gpus_text() : std::to_string(c.num_gpus())) << " GPUs in " << c.num_nodes() << " nodes, " << c.gpus_per_node()
      << " GPUs per NVLink domain\n";
  out << "fabric      " << f.kind;
  if (f.kind == "fat-tree" || f.kind == "nvlink-domain") {
    out << ", " << f.levels << " levels, radix " << f.radix << ", " << (f.rail_optimized ? "rail-optimized" : "not rail-optimized")
        << ", oversubscription " << format_number(f.oversubscription) << ":1";
    if (f.requested_oversubscription != f.oversubscription)
      out << " (asked " << format_number(f.requested_oversubscription) << ":1; uplinks are whole ports)";
    out << ", NIC " << rate(f.nic_bw) << " per GPU";
  } else if (f.kind == "torus") {
    out << " ";
    for (std::size_t i = 0; i < f.torus_dims.size(); ++i) out << (i ? "x" : "") << f.torus_dims[i];
    out << " nodes, links " << rate(f.link_bw) << ", NIC " << rate(f.nic_bw) << " per GPU";
  } else if (f.kind == "dragonfly") {
    out << ", " << f.groups << " groups x " << f.routers_per_group << " routers, " << f.nodes_per_router
        << " node(s) per router, " << f.global_links_per_router << " global links per router, local "
        << rate(f.link_bw) << ", global " << rate(f.global_bw) << ", NIC " << rate(f.nic_bw) << " per GPU";
  }
  out << "\n";

  // Vertices by kind (switches by level), links by class with their bandwidths.
  std::map<int, int> switches_by_level;
  for (std::size_t v = 0; v < boost::num_vertices(c.graph()); ++v)
    if (c.graph()[v].kind == VertexKind::Switch) ++switches_by_level[c.graph()[v].level];
  out << "vertices    " << c.num_vertices() << ": " << c.count(VertexKind::Gpu) << " gpu, " << c.count(VertexKind::NvSwitch)
      << " nvswitch, " << c.count(VertexKind::Nic) << " nic, " << c.count(VertexKind::Switch) << " switch";
  if (!switches_by_level.empty()) {
    out << " (";
    bool first = true;
    for (auto [level, n] : switches_by_level) {
      out << (first ? "" : ", ") << n << " at level " << level;
      first = false;
    }
    out << ")";
  }
  out << "\n";
  struct ClassStats {
    int count = 0;
    double lo = 0, hi = 0;
  };
  std::map<int, ClassStats> by_class;
  for (int id = 0; id < c.num_links(); ++id) {
    const LinkInfo& l = c.link(id);
    ClassStats& s = by_class[static_cast<int>(l.cls)];
    s.lo = s.count ? std::min(s.lo, l.bandwidth) : l.bandwidth;
    s.hi = s.count ? std::max(s.hi, l.bandwidth) : l.bandwidth;
    ++s.count;
  }
  out << "links       " << c.num_links() << ":";
  bool first = true;
  for (auto [cls, s] : by_class) {
    out << (first ? " " : "; ") << s.count << " " << to_string(static_cast<LinkClass>(cls)) << " at "
        << (s.lo == s.hi ? rate(s.lo) : rate(s.lo) + " to " + rate(s.hi));
    first = false;
  }
  out << " (per direction)\n";
  out << "injection   " << rate(c.injection_bw(0)) << " per GPU into the network (gpu0)\n";
  const double bis = c.bisection_bw();
  out << "bisection   " << rate(bis) << " per direction between GPUs [0, " << c.num_gpus() / 2 << ") and ["
      << c.num_gpus() / 2 << ", " << c.num_gpus() << "), " << rate(c.num_gpus() >= 2 ? bis / (c.num_gpus() / 2) : 0)
      << " per GPU of a half\n";
  out << "efficiency  collectives reach " << format_number(f.efficiency.nvlink) << " of NVLink and "
      << format_number(f.efficiency.network) << " of network bandwidth\n";

  // Example routes: same node, same rail in the next node, another rail in the next node, and the
  // same rail in the last node (farthest in id order).
  out << "routes\n";
  const int gpn = c.gpus_per_node(), n = c.num_gpus();
  std::vector<std::pair<std::string, std::pair<int, int>>> examples;
  if (gpn > 1) examples.push_back({"same node", {0, 1}});
  if (c.num_nodes() > 1) {
    examples.push_back({"same rail, next node", {0, gpn}});
    if (gpn > 1) examples.push_back({"other rail, next node", {0, gpn + 1}});
    if (c.num_nodes() > 2) examples.push_back({"same rail, last node", {0, n - gpn}});
  }
  for (const auto& arg : opt.routes) {
    auto comma = arg.find(',');
    if (comma == std::string::npos) throw InputError("--route", arg, "expected two GPU ids A,B");
    examples.push_back({"--route " + arg, {parse_gpu(c, arg.substr(0, comma), arg), parse_gpu(c, arg.substr(comma + 1), arg)}});
  }
  for (const auto& [label, ab] : examples) out << "  " << label << ": " << describe_route(c, ab.first, ab.second) << "\n";
  std::cout << out.str();
}

void run(const TopoOptions& opt) {
  const Cluster c = load_cluster(opt.cluster);
  // Validate --route before writing anything.
  for (const auto& arg : opt.routes) {
    auto comma = arg.find(',');
    if (comma == std::string::npos) throw InputError("--route", arg, "expected two GPU ids A,B");
    parse_gpu(c, arg.substr(0, comma), arg);
    parse_gpu(c, arg.substr(comma + 1), arg);
  }
  if (opt.dot_detail != "auto" && opt.dot_detail != "gpus" && opt.dot_detail != "nodes")
    throw InputError("--dot-detail", opt.dot_detail, "expected auto, gpus or nodes");
  const bool per_node = opt.dot_detail == "nodes" || (opt.dot_detail == "auto" && c.num_gpus() > 16);
  if (!opt.dot.empty()) write_file_atomically(opt.dot, to_dot(c, per_node ? DotDetail::Nodes : DotDetail::Gpus));
  if (!opt.json.empty()) write_file_atomically(opt.json, json_text(cluster_to_json(c, ClusterJsonStyle::Parameters), 2) + "\n");
  if (!opt.json_links.empty())
    write_file_atomically(opt.json_links, json_text(cluster_to_json(c, ClusterJsonStyle::Links), 2) + "\n");
  print_summary(c, opt);
}

}  // namespace

void add_topo_command(CLI::App& app) {
  auto opt = std::make_shared<TopoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "topo",
      "Load a cluster (shorthand or JSON file) and print its GPUs, fabric, link counts, injection and bisection "
      "bandwidth and example routes; optionally export it.\n\n" +
          cluster_shorthand_help() +
          "\nExamples:\n"
          "  shardsim topo --cluster dgx-h100:32\n"
          "  shardsim topo --cluster dgx-h100:64,oversub=2 --route 0,300\n"
          "  shardsim topo --cluster nvl72:4 --dot nvl72.dot\n"
          "  shardsim topo --cluster torus:4x4x4,gpus=1\n"
          "  shardsim topo --cluster dragonfly:9,routers=4,global=2\n"
          "  shardsim topo --cluster dgx-h100:4 --json my-cluster.json   # then edit it and\n"
          "  shardsim topo --cluster my-cluster.json\n");
  cmd->add_option("--cluster", opt->cluster, "cluster shorthand (e.g. dgx-h100:32) or JSON file")->required();
  cmd->add_option("--dot", opt->dot, "write the graph as Graphviz DOT to FILE");
  cmd->add_option("--dot-detail", opt->dot_detail,
                  "auto (one vertex per node above 16 GPUs) | gpus (every GPU, NIC and link) | nodes")
      ->capture_default_str();
  cmd->add_option("--json", opt->json, "write the cluster as a JSON file (generator parameters) to FILE");
  cmd->add_option("--json-links", opt->json_links, "write the cluster as an explicit vertex/link list JSON file to FILE");
  cmd->add_option("--route", opt->routes, "also show the route between GPUs A,B (repeatable)");
  cmd->callback([opt] { run(*opt); });
}

}  // namespace shardsim::cli
