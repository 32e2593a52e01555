// topologies/cluster_io.cpp — cluster JSON files, command-line shorthands, JSON and DOT writers.
//
// Owns: the readers (strict: every key is read or refused, every error carries the source and a
// JSON pointer or shorthand key), the shorthand family table, and the writers. The format is
// documented in docs/cluster-format.md; keep the two in step.
// Units: bytes/s per direction, seconds. Thread-safety: pure functions.
#include "topologies/cluster_io.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "common/text_case.hpp"
#include "topologies/generators.hpp"

namespace shardsim {
namespace {

constexpr LinkClass kAllClasses[] = {LinkClass::NvLink,    LinkClass::NicLink,        LinkClass::LeafSpine,
                                     LinkClass::SpineCore, LinkClass::Torus,          LinkClass::DragonflyLocal,
                                     LinkClass::DragonflyGlobal};

// ---------------------------------------------------------------------------------------------
// Shorthands

enum class FamilyKind { Nodes, Domains, Torus, Dragonfly };

struct ClusterFamily {
  const char* name;
  FamilyKind kind;
  const char* gpu;      // preset name
  int gpus_per_node;
  double nic_bw;        // per GPU, bytes/s per direction
  bool rails;           // rail-optimised by default
  const char* size;     // how the part after ':' is written
};

constexpr ClusterFamily kClusterFamilies[] = {
    {"dgx-h100", FamilyKind::Nodes, "H100-SXM-80GB", 8, 50e9, true, "N"},
    {"dgx-h200", FamilyKind::Nodes, "H200-SXM-141GB", 8, 50e9, true, "N"},
    {"dgx-b200", FamilyKind::Nodes, "B200", 8, 50e9, true, "N"},
    {"hgx-h800", FamilyKind::Nodes, "H800", 8, 50e9, true, "N"},
    {"hgx-b300", FamilyKind::Nodes, "B300", 8, 100e9, true, "N"},  // 8 × ConnectX-8 800 Gb/s
    {"dgx-a100", FamilyKind::Nodes, "A100-SXM-80GB", 8, 25e9, true, "N"},  // 8 × HDR 200 Gb/s
    {"nvl72", FamilyKind::Domains, "GB200", 72, 50e9, false, "R"},
    {"torus", FamilyKind::Torus, "H100-SXM-80GB", 8, 50e9, false, "XxYxZ"},
    {"dragonfly", FamilyKind::Dragonfly, "H100-SXM-80GB", 8, 50e9, false, "G"},
};

const ClusterFamily* find_family(const std::string& spec) {
  auto colon = spec.find(':');
  if (colon == std::string::npos) return nullptr;
  const std::string name = lowercase(spec.substr(0, colon));
  for (const auto& f : kClusterFamilies)
    if (name == f.name) return &f;
  return nullptr;
}

std::string family_list() {
  std::string s;
  for (const auto& f : kClusterFamilies) s += std::string(s.empty() ? "" : ", ") + f.name + ":" + f.size;
  return s;
}

// Key=value options of one shorthand; every key must be taken.
class Options {
 public:
  Options(std::string spec, const std::vector<std::string>& items) : spec_(std::move(spec)) {
    for (const auto& item : items) {
      auto eq = item.find('=');
      if (eq == std::string::npos || eq == 0) throw InputError(spec_, item, "expected KEY=VALUE");
      std::string key = lowercase(item.substr(0, eq));
      if (!values_.emplace(key, item.substr(eq + 1)).second) throw InputError(spec_, key, "given twice");
    }
  }
  // Takes `key` (or its alias) when present.
  bool take(const std::string& key, std::string& value, const char* alias = nullptr) {
    const std::string names[2] = {key, alias ? alias : ""};
    for (const std::string& k : names) {
      if (k.empty()) continue;
      auto it = values_.find(k);
      if (it != values_.end()) {
        value = it->second;
        taken_.insert(k);
        return true;
      }
    }
    return false;
  }
  void finish(const std::string& allowed) const {
    for (const auto& [k, v] : values_)
      if (!taken_.count(k)) throw InputError(spec_, k, "unknown option; this shorthand takes: " + allowed);
  }

 private:
  std::string spec_;
  std::map<std::string, std::string> values_;
  std::set<std::string> taken_;
};

std::int64_t parse_int(const std::string& spec, const std::string& key, const std::string& text, std::int64_t lo,
                       std::int64_t hi) {
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) throw InputError(spec, key, "\"" + text + "\" is far too large");
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty())
    throw InputError(spec, key, "expected an integer, got \"" + text + "\"");
  if (v < lo || v > hi)
    throw InputError(spec, key, "value " + std::to_string(v) + " out of range [" + std::to_string(lo) + ", " +
                                    std::to_string(hi) + "]");
  return v;
}

double spec_double(const std::string& spec, const std::string& key, const std::string& text) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || !std::isfinite(v))
    throw InputError(spec, key, "expected a number, got \"" + text + "\"");
  return v;
}

bool parse_bool(const std::string& spec, const std::string& key, const std::string& text) {
  const std::string t = lowercase(text);
  if (t == "on" || t == "true" || t == "yes" || t == "1") return true;
  if (t == "off" || t == "false" || t == "no" || t == "0") return false;
  throw InputError(spec, key, "expected on or off, got \"" + text + "\"");
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    auto p = s.find(sep, start);
    out.push_back(s.substr(start, p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

// Parameter name (generators' vocabulary) → shorthand key.
std::string shorthand_field(const std::string& param) {
  static const std::map<std::string, std::string> names = {
      {"nodes", "size"},       {"dims", "size"},           {"groups", "size"},
      {"oversubscription", "oversub"}, {"routers_per_group", "routers"}, {"nodes_per_router", "nodes"},
      {"global_links_per_router", "global"}, {"gpus_per_node", "gpus"}, {"gpu.nvlink_bw", "gpu"}};
  auto it = names.find(param);
  return it == names.end() ? param : it->second;
}

// ---------------------------------------------------------------------------------------------
// JSON helpers

// Parameter name → JSON pointer in a cluster file.
std::string json_field(const std::string& param) {
  if (param == "nodes" || param == "gpus_per_node") return "/" + param;
  if (param.rfind("latencies.", 0) == 0) return "/latencies/" + param.substr(10);
  if (param.rfind("gpu.", 0) == 0) return "/gpu";
  return "/fabric/" + param;
}

double any_number(JsonObject& o, std::string_view key, double fallback) {
  const double big = std::numeric_limits<double>::max();
  return o.number_or(key, fallback, -big, big);
}

int to_int(std::int64_t v) { return static_cast<int>(v); }

Latencies read_latencies(JsonObject& top) {
  Latencies lat;
  if (!top.has("latencies")) return lat;
  JsonObject o = top.object("latencies");
  lat.nvlink = o.number_or("nvlink", lat.nvlink, 0, 1);
  lat.nic = o.number_or("nic", lat.nic, 0, 1);
  lat.switch_link = o.number_or("switch", lat.switch_link, 0, 1);
  o.finish();
  return lat;
}

CollectiveEfficiency read_efficiency(JsonObject& top) {
  CollectiveEfficiency e;
  if (!top.has("collective_efficiency")) return e;
  JsonObject o = top.object("collective_efficiency");
  e.nvlink = o.number_or("nvlink", e.nvlink, 0.01, 1);
  e.network = o.number_or("network", e.network, 0.01, 1);
  o.finish();
  return e;
}

// "calibration": the constants calibrate fitted (CalibrationRecord), each with its sources.
std::vector<CalibrationRecord> read_calibration(JsonObject& top) {
  std::vector<CalibrationRecord> out;
  if (!top.has("calibration")) return out;
  const json& list = top.raw("calibration");
  if (!list.is_array()) top.fail("calibration", "expected an array of calibration records");
  for (std::size_t i = 0; i < list.size(); ++i) {
    JsonObject o(list[i], top.source(), top.pointer("calibration") + "/" + std::to_string(i));
    CalibrationRecord r;
    r.constant = o.name("constant");
    r.kind = o.choice("kind", {"nccl-tests", "kernels", "power"});
    r.value = o.number("value", -1e300, 1e300);
    const json& src = o.raw("sources");
    if (!src.is_array() || src.empty()) o.fail("sources", "expected a non-empty array of file paths");
    for (const json& f : src) {
      if (!f.is_string() || f.get<std::string>().empty()) o.fail("sources", "expected file paths (strings)");
      r.sources.push_back(f.get<std::string>());
    }
    r.rows = static_cast<int>(o.integer_or("rows", 0, 0, 1 << 30));
    r.min_bytes = o.number_or("min_bytes", 0, 0, 1e18);
    r.rms_log_before = o.number_or("rms_log_before", 0, 0, 1e6);
    r.rms_log_after = o.number_or("rms_log_after", 0, 0, 1e6);
    o.finish();
    out.push_back(std::move(r));
  }
  return out;
}

const json& read_array(JsonObject& o, std::string_view key) {
  const json& a = o.raw(key);
  if (!a.is_array()) o.fail(key, "expected an array");
  return a;
}

// A mixed cluster's generated NVLink: each GPU's link to its NVSwitch at its own node's GPU's
// nvlink_bw (the generators drew every node with the first type's). Link lists keep their own.
void give_nodes_their_nvlink(ClusterGraph& g, int gpus_per_node, const std::vector<GpuSpec>& node_gpus) {
  for (auto [it, end] = boost::edges(g); it != end; ++it) {
    LinkInfo& l = g[*it];
    if (l.cls != LinkClass::NvLink) continue;
    const VertexInfo& a = g[boost::source(*it, g)];
    const VertexInfo& b = g[boost::target(*it, g)];
    const int gpu = a.kind == VertexKind::Gpu ? a.gpu : b.kind == VertexKind::Gpu ? b.gpu : -1;
    if (gpu < 0) continue;
    l.bandwidth = node_gpus.at(static_cast<std::size_t>(gpu / gpus_per_node)).nvlink_bw;
  }
}

// "node_gpus": runs of nodes in node order, [{"gpu": preset name or spec object, "nodes": N}, …].
std::vector<GpuSpec> read_node_gpus(JsonObject& top) {
  const json& runs = read_array(top, "node_gpus");
  if (runs.empty()) top.fail("node_gpus", "expected at least one {\"gpu\", \"nodes\"} run");
  std::vector<GpuSpec> out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    JsonObject run(runs[i], top.source(), top.pointer("node_gpus") + "/" + std::to_string(i));
    GpuSpec gpu;
    if (run.has("gpu") && run.raw("gpu").is_string()) gpu = gpu_preset(run.string("gpu"), top.source(), run.pointer("gpu"));
    else if (run.has("gpu") && run.raw("gpu").is_object()) gpu = gpu_spec_from_json(run.object("gpu"));
    else run.fail("gpu", "expected a GPU preset name or a GPU spec object");
    const std::int64_t n = run.integer("nodes", 1, kMaxClusterGpus);
    run.finish();
    if (static_cast<std::int64_t>(out.size()) + n > kMaxClusterGpus) run.fail("nodes", "more nodes than any cluster may have");
    out.insert(out.end(), static_cast<std::size_t>(n), gpu);
  }
  return out;
}

// fabric.kind == "links": GPUs gpu0..gpuN-1 are implicit; other vertices and all links are listed.
GeneratedFabric read_link_list(JsonObject& fab, int nodes, int gpn, const Latencies& lat) {
  const std::string& source = fab.source();
  GeneratedFabric out;  // returned by name (NRVO): the graph is built in place
  ClusterGraph& g = out.graph;
  std::unordered_map<std::string, Vertex> by_name;
  const int n_gpus = nodes * gpn;
  for (int i = 0; i < n_gpus; ++i) {
    VertexInfo v;
    v.kind = VertexKind::Gpu;
    v.name = "gpu" + std::to_string(i);
    v.gpu = i;
    v.node = i / gpn;
    by_name[v.name] = boost::add_vertex(v, g);
  }
  if (fab.has("vertices")) {
    const json& list = read_array(fab, "vertices");
    if (list.size() > (std::size_t{1} << 20)) fab.fail("vertices", "more than 2^20 vertices");
    for (std::size_t i = 0; i < list.size(); ++i) {
      JsonObject o(list[i], source, fab.pointer("vertices") + "/" + std::to_string(i));
      VertexInfo v;
      v.name = o.name("name");
      if (by_name.count(v.name))
        o.fail("name", "duplicate vertex name \"" + v.name + "\"" +
                           (v.name.rfind("gpu", 0) == 0 ? " (gpu0..gpu" + std::to_string(n_gpus - 1) + " are implicit)" : ""));
      const std::string kind = o.choice("kind", {"nvswitch", "nic", "switch"});
      if (kind == "nvswitch") {
        v.kind = VertexKind::NvSwitch;
        v.node = to_int(o.integer("node", 0, nodes - 1));
      } else if (kind == "nic") {
        v.kind = VertexKind::Nic;
        v.gpu = to_int(o.integer("gpu", 0, n_gpus - 1));
        v.node = v.gpu / gpn;
      } else {
        v.kind = VertexKind::Switch;
        v.level = to_int(o.integer_or("level", 1, 1, 8));
      }
      o.finish();
      by_name[v.name] = boost::add_vertex(v, g);
    }
  }
  const json& links = read_array(fab, "links");
  if (links.empty()) fab.fail("links", "empty: at least one link is needed to join the GPUs");
  if (links.size() > (std::size_t{1} << 22)) fab.fail("links", "more than 2^22 links");
  for (std::size_t i = 0; i < links.size(); ++i) {
    JsonObject o(links[i], source, fab.pointer("links") + "/" + std::to_string(i));
    Vertex ends[2];
    const char* keys[2] = {"a", "b"};
    for (int k = 0; k < 2; ++k) {
      const std::string name = o.string(keys[k]);
      auto it = by_name.find(name);
      if (it == by_name.end()) o.fail(keys[k], "unknown vertex \"" + name + "\" (declare it under /fabric/vertices)");
      ends[k] = it->second;
    }
    if (ends[0] == ends[1]) o.fail("b", "a link must join two different vertices");
    LinkInfo l;
    const double big = std::numeric_limits<double>::max();
    l.bandwidth = o.number("bandwidth", -big, big);
    if (!(l.bandwidth > 0)) o.fail("bandwidth", "must be > 0 bytes/s, got " + format_number(l.bandwidth));
    if (l.bandwidth > 1e15) o.fail("bandwidth", "value " + format_number(l.bandwidth) + " is implausibly large (limit 1e15)");
    if (l.bandwidth < 1e6) o.fail("bandwidth", "value " + format_number(l.bandwidth) + " bytes/s is implausibly small (at least 1e6)");
    if (o.has("class")) {
      const std::string cls = o.string("class");
      if (!link_class_from_string(cls, l.cls)) {
        std::string known;
        for (auto c : kAllClasses) known += std::string(known.empty() ? "" : ", ") + to_string(c);
        o.fail("class", "unknown link class \"" + cls + "\", expected one of: " + known);
      }
    } else {
      // Inferred: NVSwitch or GPU-GPU → nvlink; GPU/NIC to anything else → nic; switch-switch by level.
      const VertexInfo& va = g[ends[0]];
      const VertexInfo& vb = g[ends[1]];
      auto is = [&](VertexKind k) { return va.kind == k || vb.kind == k; };
      if (is(VertexKind::NvSwitch) || (va.kind == VertexKind::Gpu && vb.kind == VertexKind::Gpu)) l.cls = LinkClass::NvLink;
      else if (is(VertexKind::Gpu) || is(VertexKind::Nic)) l.cls = LinkClass::NicLink;
      else l.cls = std::max(va.level, vb.level) <= 2 ? LinkClass::LeafSpine : LinkClass::SpineCore;
    }
    const double fallback = l.cls == LinkClass::NvLink ? lat.nvlink : l.cls == LinkClass::NicLink ? lat.nic : lat.switch_link;
    l.latency = o.number_or("latency", fallback, 0, 1);
    o.finish();
    boost::add_edge(ends[0], ends[1], l, g);
  }
  out.info.kind = "links";
  out.info.latencies = lat;
  return out;
}

}  // namespace

bool link_class_from_string(std::string_view s, LinkClass& out) {
  for (auto c : kAllClasses)
    if (s == to_string(c)) {
      out = c;
      return true;
    }
  return false;
}

std::string cluster_shorthand_help() {
  return "Cluster shorthands (FAMILY:SIZE[,KEY=VALUE...]):\n"
         "  dgx-h100:N, dgx-h200:N, dgx-b200:N, hgx-h800:N, hgx-b300:N, dgx-a100:N  N nodes of 8 GPUs (NVSwitch), one\n"
         "      NIC per GPU, rail-optimized fat-tree; keys: oversub=F (leaf down:up, default 1), radix=K (64),\n"
         "      levels=2|3 (automatic), rails=on|off, nic_bw=B (bytes/s per direction, 50e9; 100e9 on hgx-b300), gpu=PRESET\n"
         "  nvl72:R        R racks of 72 GB200 GPUs (gpu=gb300: GB300 NVL72) on one NVLink domain each, fat-tree between racks\n"
         "      (same keys; rails defaults to off)\n"
         "  torus:XxYxZ    torus of nodes (1-3 dims); keys: gpus=8 (per node), link_bw=50e9, nic_bw=50e9, gpu=PRESET\n"
         "  dragonfly:G    G groups; keys: routers=4 (per group), nodes=1 (per router), global=2 (links per router),\n"
         "      gpus=8, local_bw=50e9, global_bw=50e9, nic_bw=50e9, gpu=PRESET\n"
         "  dgx-h100:N+dgx-h200:M[,KEY=VALUE...]  a mixed cluster: node families of one node size joined on one fat-tree,\n"
         "      their nodes in the order written (keys after the last part, as above, without gpu)\n"
         "  Anything else is a cluster JSON file (docs/cluster-format.md).\n";
}

bool is_cluster_shorthand(const std::string& spec) { return find_family(spec) != nullptr; }

namespace {

// The fat-tree keys of a node or domain family's shorthand (oversub, radix, levels, rails, nic_bw).
FatTreeParams fat_tree_keys(Options& opt, const std::string& spec, const ClusterFamily& fam) {
  std::string v;
  FatTreeParams p;
  p.rail_optimized = fam.rails;
  p.nic_bw = fam.nic_bw;
  if (opt.take("oversub", v, "oversubscription")) p.oversubscription = spec_double(spec, "oversub", v);
  if (opt.take("radix", v)) p.radix = to_int(parse_int(spec, "radix", v, 0, 1 << 20));
  if (opt.take("levels", v)) p.levels = to_int(parse_int(spec, "levels", v, 0, 1000));
  if (opt.take("rails", v)) p.rail_optimized = parse_bool(spec, "rails", v);
  if (opt.take("nic_bw", v)) p.nic_bw = spec_double(spec, "nic_bw", v);
  return p;
}

// FAMILY:N '+' FAMILY:N … [',' KEY '=' VALUE …]: node-based families of one node size on one
// fat-tree, their nodes in the order written; the keys (after the last part) are the fat-tree's.
Cluster cluster_from_mixed_shorthand(const std::string& spec) {
  const std::vector<std::string> parts = split(spec, '+');
  std::vector<GpuSpec> node_gpus;
  const ClusterFamily* first = nullptr;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const ClusterFamily* fam = find_family(parts[i]);
    if (!fam) throw InputError(spec, "size", "\"" + parts[i] + "\" is not a node shorthand (FAMILY:N); known: " + family_list());
    if (fam->kind != FamilyKind::Nodes)
      throw InputError(spec, "size", std::string(fam->name) + ": only node families (dgx-h100, dgx-h200, …) can be joined with '+'");
    std::vector<std::string> items = split(parts[i].substr(parts[i].find(':') + 1), ',');
    if (items.size() > 1 && i + 1 < parts.size())
      throw InputError(spec, items[1].substr(0, items[1].find('=')), "options go after the last part, e.g. dgx-h100:2+dgx-h200:2,oversub=2");
    if (first && fam->gpus_per_node != first->gpus_per_node)
      throw InputError(spec, "size", "every part needs the same GPUs per node");
    if (!first) first = fam;
    const std::int64_t n = parse_int(spec, "size", items[0], 1, kMaxClusterGpus);
    if (static_cast<std::int64_t>(node_gpus.size()) + n > kMaxClusterGpus / fam->gpus_per_node)
      throw InputError(spec, "size", "more GPUs than the limit of " + std::to_string(kMaxClusterGpus));
    node_gpus.insert(node_gpus.end(), static_cast<std::size_t>(n), gpu_preset(fam->gpu));
    if (i + 1 == parts.size()) keys.assign(items.begin() + 1, items.end());
  }
  Options opt(spec, keys);
  const FatTreeParams p = fat_tree_keys(opt, spec, *first);
  opt.finish("oversub, radix, levels, rails, nic_bw (a mixed cluster takes its GPUs from its parts)");
  const SpecContext ctx{spec, shorthand_field};
  GeneratedFabric fab = generate_fat_tree(node_gpus[0], to_int(static_cast<std::int64_t>(node_gpus.size())),
                                          first->gpus_per_node, p, Latencies{}, ctx);
  give_nodes_their_nvlink(fab.graph, first->gpus_per_node, node_gpus);
  GpuSpec gpu0 = node_gpus[0];
  return Cluster(spec, spec, std::move(gpu0), first->gpus_per_node, std::move(fab.info), std::move(fab.graph),
                 std::move(node_gpus));
}

}  // namespace

Cluster cluster_from_shorthand(const std::string& spec) {
  if (spec.find('+') != std::string::npos) return cluster_from_mixed_shorthand(spec);
  const ClusterFamily* fam = find_family(spec);
  if (!fam) throw InputError(spec, "", "not a cluster shorthand; known: " + family_list());
  const std::vector<std::string> items = split(spec.substr(spec.find(':') + 1), ',');
  const std::string size = items[0];
  if (size.empty()) throw InputError(spec, "size", std::string("missing: expected ") + fam->name + ":" + fam->size);
  Options opt(spec, std::vector<std::string>(items.begin() + 1, items.end()));
  SpecContext ctx{spec, shorthand_field};
  std::string v;

  GpuSpec gpu = gpu_preset(fam->gpu);
  if (opt.take("gpu", v)) gpu = gpu_preset(v, spec, "gpu");
  int gpn = fam->gpus_per_node;
  const Latencies lat;

  // Initialised from the generators' results directly: assigning would copy the graph.
  GeneratedFabric fab = [&]() -> GeneratedFabric {
    switch (fam->kind) {
      case FamilyKind::Nodes:
      case FamilyKind::Domains: {
        const FatTreeParams p = fat_tree_keys(opt, spec, *fam);
        opt.finish("oversub, radix, levels, rails, nic_bw, gpu");
        const std::int64_t n = parse_int(spec, "size", size, 1, std::int64_t{1} << 40);
        if (n * gpn > kMaxClusterGpus)
          throw InputError(spec, "size", std::to_string(n) + " × " + std::to_string(gpn) + " GPUs is more than the limit of " +
                                             std::to_string(kMaxClusterGpus) + " GPUs");
        if (fam->kind == FamilyKind::Nodes) return generate_fat_tree(gpu, to_int(n), gpn, p, lat, ctx);
        return generate_nvlink_domains(gpu, to_int(n), gpn, p, lat, ctx);
      }
      case FamilyKind::Torus: {
        TorusParams p;
        if (opt.take("gpus", v)) gpn = to_int(parse_int(spec, "gpus", v, 1, kMaxClusterGpus));
        if (opt.take("link_bw", v)) p.link_bw = spec_double(spec, "link_bw", v);
        if (opt.take("nic_bw", v)) p.nic_bw = spec_double(spec, "nic_bw", v);
        opt.finish("gpus, link_bw, nic_bw, gpu");
        p.dims.clear();
        for (const auto& d : split(lowercase(size), 'x'))
          p.dims.push_back(to_int(parse_int(spec, "size", d, 1, kMaxClusterGpus)));
        return generate_torus(gpu, gpn, p, lat, ctx);
      }
      case FamilyKind::Dragonfly: {
        DragonflyParams p;
        if (opt.take("gpus", v)) gpn = to_int(parse_int(spec, "gpus", v, 1, kMaxClusterGpus));
        if (opt.take("routers", v)) p.routers_per_group = to_int(parse_int(spec, "routers", v, 1, 1024));
        if (opt.take("nodes", v)) p.nodes_per_router = to_int(parse_int(spec, "nodes", v, 1, 1024));
        if (opt.take("global", v)) p.global_links_per_router = to_int(parse_int(spec, "global", v, 0, 1024));
        if (opt.take("local_bw", v)) p.local_bw = spec_double(spec, "local_bw", v);
        if (opt.take("global_bw", v)) p.global_bw = spec_double(spec, "global_bw", v);
        if (opt.take("nic_bw", v)) p.nic_bw = spec_double(spec, "nic_bw", v);
        opt.finish("routers, nodes, global, gpus, local_bw, global_bw, nic_bw, gpu");
        p.groups = to_int(parse_int(spec, "size", size, 1, kMaxClusterGpus));
        return generate_dragonfly(gpu, gpn, p, lat, ctx);
      }
    }
    throw std::logic_error("unhandled shorthand family");
  }();
  return Cluster(spec, spec, gpu, gpn, std::move(fab.info), std::move(fab.graph));
}

Cluster cluster_from_json(const json& doc, const std::string& source, const std::string& default_name) {
  JsonObject top(doc, source);
  const std::string name = top.name_or("name", default_name);
  GpuSpec gpu;
  std::vector<GpuSpec> node_gpus;
  if (top.has("node_gpus")) {
    if (top.has("gpu")) top.fail("gpu", "give either \"gpu\" (every node) or \"node_gpus\" (per node), not both");
    node_gpus = read_node_gpus(top);
    gpu = node_gpus[0];
  } else if (!top.has("gpu")) top.fail("gpu", "missing, expected a GPU preset name or a GPU spec object (or \"node_gpus\")");
  else if (top.raw("gpu").is_string()) gpu = gpu_preset(top.string("gpu"), source, top.pointer("gpu"));
  else if (top.raw("gpu").is_object()) gpu = gpu_spec_from_json(top.object("gpu"));
  else top.fail("gpu", "expected a GPU preset name or a GPU spec object");
  const int gpn = to_int(top.integer("gpus_per_node", 1, kMaxClusterGpus));
  const Latencies lat = read_latencies(top);
  CollectiveEfficiency eff = read_efficiency(top);
  std::vector<CalibrationRecord> calibration = read_calibration(top);
  JsonObject fab = top.object("fabric");
  const std::string kind = fab.choice("kind", {"fat-tree", "nvlink-domain", "torus", "dragonfly", "links"});
  SpecContext ctx{source, json_field};

  // Torus and dragonfly derive the node count (a given "nodes" must agree); the others need it.
  const std::int64_t nodes_given = top.has("nodes") ? top.integer("nodes", 1, kMaxClusterGpus) : 0;
  top.finish();
  auto read_nodes = [&]() {
    if (nodes_given == 0) top.fail("nodes", "missing, expected an integer (nodes = NVLink domains)");
    if (nodes_given * gpn > kMaxClusterGpus)
      top.fail("nodes", std::to_string(nodes_given) + " nodes × " + std::to_string(gpn) + " GPUs = " +
                            std::to_string(nodes_given * gpn) + " GPUs is more than the limit of " +
                            std::to_string(kMaxClusterGpus));
    return to_int(nodes_given);
  };
  auto check_nodes = [&](const ClusterGraph& g) {
    if (nodes_given == 0) return;
    std::size_t n_gpus = 0;
    for (std::size_t v = 0; v < boost::num_vertices(g); ++v) n_gpus += g[v].kind == VertexKind::Gpu;
    if (static_cast<std::size_t>(nodes_given * gpn) != n_gpus)
      top.fail("nodes", std::to_string(nodes_given) + " disagrees with the fabric, which has " +
                            std::to_string(n_gpus / gpn) + " nodes (leave \"nodes\" out for " + kind + ")");
  };

  // Initialised from the generators' results directly: assigning would copy the graph.
  GeneratedFabric out = [&]() -> GeneratedFabric {
    if (kind == "fat-tree" || kind == "nvlink-domain") {
      const int nodes = read_nodes();
      FatTreeParams p;
      p.levels = to_int(fab.integer_or("levels", 0, 0, 1000));
      p.radix = to_int(fab.integer_or("radix", p.radix, 0, 1 << 20));
      p.oversubscription = any_number(fab, "oversubscription", p.oversubscription);
      p.rail_optimized = fab.boolean_or("rail_optimized", kind == "fat-tree");
      p.nic_bw = any_number(fab, "nic_bw", p.nic_bw);
      fab.finish();
      if (kind == "fat-tree") return generate_fat_tree(gpu, nodes, gpn, p, lat, ctx);
      return generate_nvlink_domains(gpu, nodes, gpn, p, lat, ctx);
    } else if (kind == "torus") {
      TorusParams p;
      std::vector<std::int64_t> dims = fab.integer_array("dims", 1, kMaxClusterGpus);
      p.dims.assign(dims.begin(), dims.end());
      p.link_bw = any_number(fab, "link_bw", p.link_bw);
      p.nic_bw = any_number(fab, "nic_bw", p.nic_bw);
      fab.finish();
      GeneratedFabric t = generate_torus(gpu, gpn, p, lat, ctx);
      check_nodes(t.graph);
      return t;
    } else if (kind == "dragonfly") {
      DragonflyParams p;
      p.groups = to_int(fab.integer("groups", 1, kMaxClusterGpus));
      p.routers_per_group = to_int(fab.integer_or("routers_per_group", p.routers_per_group, 1, 1024));
      p.nodes_per_router = to_int(fab.integer_or("nodes_per_router", p.nodes_per_router, 1, 1024));
      p.global_links_per_router = to_int(fab.integer_or("global_links_per_router", p.global_links_per_router, 0, 1024));
      p.local_bw = any_number(fab, "local_bw", p.local_bw);
      p.global_bw = any_number(fab, "global_bw", p.global_bw);
      p.nic_bw = any_number(fab, "nic_bw", p.nic_bw);
      fab.finish();
      GeneratedFabric d = generate_dragonfly(gpu, gpn, p, lat, ctx);
      check_nodes(d.graph);
      return d;
    } else {
      const int nodes = read_nodes();
      GeneratedFabric l = read_link_list(fab, nodes, gpn, lat);
      fab.finish();
      return l;
    }
  }();
  out.info.efficiency = eff;
  if (!node_gpus.empty()) {
    std::size_t n_gpus = 0;
    for (std::size_t v = 0; v < boost::num_vertices(out.graph); ++v) n_gpus += out.graph[v].kind == VertexKind::Gpu;
    if (node_gpus.size() * static_cast<std::size_t>(gpn) != n_gpus)
      top.fail("node_gpus", "its runs hold " + std::to_string(node_gpus.size()) + " nodes, the fabric " +
                                std::to_string(n_gpus / static_cast<std::size_t>(gpn)));
    if (kind != "links") give_nodes_their_nvlink(out.graph, gpn, node_gpus);
  }
  Cluster cluster(name, source, gpu, gpn, std::move(out.info), std::move(out.graph), std::move(node_gpus));
  cluster.set_calibration(std::move(calibration));
  return cluster;
}

Cluster load_cluster_file(const std::string& path) {
  const std::string text = read_text_file(path);
  const json doc = parse_json(text, path);
  return cluster_from_json(doc, path, std::filesystem::path(path).stem().string());
}

Cluster load_cluster(const std::string& spec) {
  if (spec.empty()) throw InputError("--cluster", "", "empty cluster spec; " + cluster_shorthand_help());
  if (is_cluster_shorthand(spec)) return cluster_from_shorthand(spec);
  std::error_code ec;
  const bool looks_like_path = spec.find('/') != std::string::npos || spec.find('.') != std::string::npos;
  if (!std::filesystem::exists(spec, ec) && !looks_like_path) {
    const auto colon = spec.find(':');
    throw InputError(spec, "",
                     (colon == std::string::npos ? std::string("no such file, and not a cluster shorthand")
                                                 : "unknown cluster shorthand \"" + spec.substr(0, colon) + "\"") +
                         "; known: " + family_list() + ", or a cluster JSON file");
  }
  return load_cluster_file(spec);
}

// ---------------------------------------------------------------------------------------------
// Writers

json cluster_to_json(const Cluster& c, ClusterJsonStyle style) {
  const FabricInfo& f = c.fabric();
  json j = json::object();
  j["name"] = c.name();
  if (!c.mixed()) {
    j["gpu"] = gpu_spec_to_json(c.gpu());
  } else {
    json runs = json::array();
    for (int n = 0; n < c.num_nodes(); ++n) {
      const int t = c.node_types()[static_cast<std::size_t>(n)];
      if (n > 0 && c.node_types()[static_cast<std::size_t>(n - 1)] == t) {
        runs.back()["nodes"] = runs.back()["nodes"].get<int>() + 1;
        continue;
      }
      runs.push_back({{"gpu", gpu_spec_to_json(c.gpu_types()[static_cast<std::size_t>(t)])}, {"nodes", 1}});
    }
    j["node_gpus"] = std::move(runs);
  }
  j["gpus_per_node"] = c.gpus_per_node();
  j["latencies"] = {{"nvlink", f.latencies.nvlink}, {"nic", f.latencies.nic}, {"switch", f.latencies.switch_link}};
  j["collective_efficiency"] = {{"nvlink", f.efficiency.nvlink}, {"network", f.efficiency.network}};
  if (!c.calibration().empty()) {
    json records = json::array();
    for (const CalibrationRecord& r : c.calibration()) {
      json o = {{"constant", r.constant}, {"kind", r.kind}, {"value", r.value}, {"sources", r.sources}, {"rows", r.rows}};
      if (r.min_bytes > 0) o["min_bytes"] = r.min_bytes;
      o["rms_log_before"] = r.rms_log_before;
      o["rms_log_after"] = r.rms_log_after;
      records.push_back(std::move(o));
    }
    j["calibration"] = std::move(records);
  }
  json fab = json::object();
  const bool links = style == ClusterJsonStyle::Links || f.kind == "links" ||
                     (f.kind != "fat-tree" && f.kind != "nvlink-domain" && f.kind != "torus" && f.kind != "dragonfly");
  if (links) {
    j["nodes"] = c.num_nodes();
    fab["kind"] = "links";
    const ClusterGraph& g = c.graph();
    json vertices = json::array();
    for (std::size_t v = 0; v < boost::num_vertices(g); ++v) {
      const VertexInfo& info = g[v];
      if (info.kind == VertexKind::Gpu) continue;  // implicit gpu0..gpuN-1
      json o = {{"name", info.name}, {"kind", to_string(info.kind)}};
      if (info.kind == VertexKind::NvSwitch) o["node"] = info.node;
      if (info.kind == VertexKind::Nic) o["gpu"] = info.gpu;
      if (info.kind == VertexKind::Switch) o["level"] = info.level;
      vertices.push_back(std::move(o));
    }
    json list = json::array();
    for (int id = 0; id < c.num_links(); ++id) {
      const LinkInfo& l = c.link(id);
      auto [a, b] = c.link_ends(id);
      list.push_back({{"a", g[a].name},
                      {"b", g[b].name},
                      {"bandwidth", l.bandwidth},
                      {"latency", l.latency},
                      {"class", to_string(l.cls)}});
    }
    fab["vertices"] = std::move(vertices);
    fab["links"] = std::move(list);
  } else if (f.kind == "fat-tree" || f.kind == "nvlink-domain") {
    j["nodes"] = c.num_nodes();
    fab = {{"kind", f.kind},
           {"levels", f.levels},
           {"radix", f.radix},
           {"oversubscription", f.requested_oversubscription},
           {"rail_optimized", f.rail_optimized},
           {"nic_bw", f.nic_bw}};
  } else if (f.kind == "torus") {
    fab = {{"kind", "torus"}, {"dims", f.torus_dims}, {"link_bw", f.link_bw}, {"nic_bw", f.nic_bw}};
  } else {
    fab = {{"kind", "dragonfly"},
           {"groups", f.groups},
           {"routers_per_group", f.routers_per_group},
           {"nodes_per_router", f.nodes_per_router},
           {"global_links_per_router", f.global_links_per_router},
           {"local_bw", f.link_bw},
           {"global_bw", f.global_bw},
           {"nic_bw", f.nic_bw}};
  }
  j["fabric"] = std::move(fab);
  return j;
}

namespace {

std::string dot_id(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

const char* dot_colour(LinkClass c) {
  switch (c) {
    case LinkClass::NvLink: return "#1a9641";
    case LinkClass::NicLink: return "#2b83ba";
    case LinkClass::LeafSpine: return "#fdae61";
    case LinkClass::SpineCore: return "#d7191c";
    case LinkClass::Torus: return "#5e3c99";
    case LinkClass::DragonflyLocal: return "#80cdc1";
    case LinkClass::DragonflyGlobal: return "#e66101";
  }
  return "black";
}

}  // namespace

namespace {

// One vertex per NVLink domain; links to the fabric merged per (node, switch, class, bandwidth).
std::string to_dot_nodes(const Cluster& c) {
  const ClusterGraph& g = c.graph();
  std::ostringstream out;
  out << "// " << c.name() << ": " << (c.mixed() ? c.gpus_text() : std::to_string(c.num_gpus()) + " " + c.gpu().name) << " GPUs in " << c.num_nodes()
      << " NVLink domains, fabric " << c.fabric().kind << "; one vertex per domain. Render with: sfdp -Tsvg.\n";
  out << "graph " << dot_id(c.name()) << " {\n  graph [overlap=false];\n  node [fontsize=10];\n";
  auto group = [&](std::size_t v) {
    const VertexInfo& info = g[v];
    return info.kind != VertexKind::Switch && info.node >= 0 ? "node " + std::to_string(info.node) : info.name;
  };
  for (int n = 0; n < c.num_nodes(); ++n)
    out << "  " << dot_id("node " + std::to_string(n)) << " [shape=box3d, style=filled, fillcolor=\"#b8e186\", label=\"node " << n
        << "\\n" << c.gpus_per_node() << " × " << c.node_gpu(n).name << "\\nNVLink " << format_number(c.node_gpu(n).nvlink_bw / 1e9)
        << " GB/s per GPU\"];\n";
  for (std::size_t v = 0; v < boost::num_vertices(g); ++v)
    if (g[v].kind == VertexKind::Switch)
      out << "  " << dot_id(g[v].name) << " [shape=ellipse, style=filled, fillcolor=\"#fee090\"];\n";
  std::map<std::tuple<std::string, std::string, int, double>, int> merged;  // (a, b, class, bandwidth) → links
  for (int id = 0; id < c.num_links(); ++id) {
    auto [a, b] = c.link_ends(id);
    std::string ga = group(a), gb = group(b);
    if (ga == gb) continue;  // inside a domain
    if (gb < ga) std::swap(ga, gb);
    merged[{ga, gb, static_cast<int>(c.link(id).cls), c.link(id).bandwidth}]++;
  }
  for (const auto& [k, count] : merged) {
    const auto& [a, b, cls, bw] = k;
    const char* name = to_string(static_cast<LinkClass>(cls));
    out << "  " << dot_id(a) << " -- " << dot_id(b) << " [color=\"" << dot_colour(static_cast<LinkClass>(cls)) << "\", label=\""
        << (count > 1 ? std::to_string(count) + " × " : "") << name << " " << format_number(bw / 1e9) << " GB/s\"];\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace

std::string to_dot(const Cluster& c, DotDetail detail) {
  if (detail == DotDetail::Nodes) return to_dot_nodes(c);
  const ClusterGraph& g = c.graph();
  std::ostringstream out;
  out << "// " << c.name() << ": " << (c.mixed() ? c.gpus_text() : std::to_string(c.num_gpus()) + " " + c.gpu().name) << " GPUs, fabric " << c.fabric().kind
      << ". Render with: dot -Tsvg (small clusters) or sfdp -Tsvg.\n";
  out << "graph " << dot_id(c.name()) << " {\n  graph [overlap=false];\n  node [fontsize=10];\n";
  // One subgraph per NVLink domain: its GPUs, NVSwitch and NICs.
  std::vector<std::vector<std::size_t>> members(static_cast<std::size_t>(c.num_nodes()));
  std::vector<std::size_t> others;
  for (std::size_t v = 0; v < boost::num_vertices(g); ++v) {
    const VertexInfo& info = g[v];
    if (info.kind != VertexKind::Switch && info.node >= 0 && info.node < c.num_nodes())
      members[static_cast<std::size_t>(info.node)].push_back(v);
    else
      others.push_back(v);
  }
  auto vertex_line = [&](std::size_t v) {
    const VertexInfo& info = g[v];
    out << "    " << dot_id(info.name) << " [";
    switch (info.kind) {
      case VertexKind::Gpu: out << "shape=box, style=filled, fillcolor=\"#b8e186\""; break;
      case VertexKind::NvSwitch: out << "shape=hexagon, style=filled, fillcolor=\"#a6dba0\""; break;
      case VertexKind::Nic: out << "shape=box, style=rounded"; break;
      case VertexKind::Switch: out << "shape=ellipse, style=filled, fillcolor=\"#fee090\""; break;
    }
    out << "];\n";
  };
  for (std::size_t n = 0; n < members.size(); ++n) {
    if (members[n].empty()) continue;
    out << "  subgraph \"cluster_node" << n << "\" {\n    label=\"node " << n << "\";\n";
    for (auto v : members[n]) vertex_line(v);
    out << "  }\n";
  }
  for (auto v : others) vertex_line(v);
  for (int id = 0; id < c.num_links(); ++id) {
    const LinkInfo& l = c.link(id);
    auto [a, b] = c.link_ends(id);
    out << "  " << dot_id(g[a].name) << " -- " << dot_id(g[b].name) << " [color=\"" << dot_colour(l.cls)
        << "\", tooltip=\"" << to_string(l.cls) << " " << format_number(l.bandwidth / 1e9) << " GB/s\"];\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace shardsim
