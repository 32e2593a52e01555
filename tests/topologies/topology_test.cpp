// tests/topologies/topology_test.cpp — tests of topologies/: GPU presets, generators, routes, bisection,
// cluster JSON (round trips and every refusal) and the `shardsim topo` command.
//
// Expected numbers are derived by hand in the comments (DGX H100: 8 GPUs per node, NVLink
// 450 GB/s per direction, one 400 Gb/s = 50 GB/s NIC per GPU; leaves of a radix-64 tree use 32
// ports down). No timing assertions here (docs/architecture.md, Conventions: timings are benchmarks).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "tests/cli_runner.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"
#include "topologies/generators.hpp"

using namespace shardsim;

namespace {

template <class F>
std::optional<InputError> error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e;
  }
  return std::nullopt;
}

Cluster from_text(const std::string& text) {
  return cluster_from_json(parse_json(text, "test.json"), "test.json", "test");
}

std::map<LinkClass, int> links_by_class(const Cluster& c) {
  std::map<LinkClass, int> m;
  for (int i = 0; i < c.num_links(); ++i) ++m[c.link(i).cls];
  return m;
}

int count_class(const Cluster& c, const Route& r, LinkClass cls) {
  int n = 0;
  for (int id : r.links) n += c.link(id).cls == cls;
  return n;
}

// Two clusters are the same when vertices, links (order, ends, values) and fabric kind agree.
void check_same(const Cluster& a, const Cluster& b) {
  REQUIRE(a.num_vertices() == b.num_vertices());
  REQUIRE(a.num_links() == b.num_links());
  CHECK(a.name() == b.name());
  CHECK(a.gpu().name == b.gpu().name);
  CHECK(a.gpu().bf16_flops == b.gpu().bf16_flops);
  CHECK(a.gpu().nvlink_bw == b.gpu().nvlink_bw);
  CHECK(a.gpus_per_node() == b.gpus_per_node());
  for (int v = 0; v < a.num_vertices(); ++v) {
    CHECK(a.graph()[v].name == b.graph()[v].name);
    CHECK(a.graph()[v].kind == b.graph()[v].kind);
    CHECK(a.graph()[v].level == b.graph()[v].level);
  }
  for (int i = 0; i < a.num_links(); ++i) {
    CHECK(a.link_ends(i) == b.link_ends(i));
    CHECK(a.link(i).bandwidth == b.link(i).bandwidth);
    CHECK(a.link(i).latency == b.link(i).latency);
    CHECK(a.link(i).cls == b.link(i).cls);
  }
  CHECK(a.bisection_bw() == b.bisection_bw());
  CHECK(a.collective_efficiency().nvlink == b.collective_efficiency().nvlink);
}

}  // namespace

TEST_CASE("topo: GPU presets come from the embedded data file") {
  const GpuSpec& h100 = gpu_preset("H100-SXM-80GB");
  CHECK(h100.bf16_flops == 989e12);
  CHECK(h100.fp8_flops == 1979e12);
  CHECK(h100.hbm_bytes == 81559.0 * 1024 * 1024);  // the driver's figure, not the marketed 80 GB
  CHECK(h100.hbm_bw == 3.35e12);
  CHECK(h100.nvlink_bw == 450e9);
  CHECK(!h100.comment.empty());
  CHECK(gpu_preset("h100").name == "H100-SXM-80GB");  // alias, case-insensitive
  CHECK(gpu_preset("h200-SXM-141gb").hbm_bytes == 143771.0 * 1024 * 1024);
  CHECK(gpu_preset("B200").nvlink_bw == 900e9);
  CHECK(gpu_preset("H800").nvlink_bw == 200e9);  // 400 GB/s total, per direction half
  CHECK(gpu_presets().size() >= 4);
  auto e = error_of([] { gpu_preset("H1000", "x.json", "/gpu"); });
  REQUIRE(e);
  CHECK(e->field() == "/gpu");
  CHECK(e->reason().find("H100-SXM-80GB") != std::string::npos);  // lists the known names
}

TEST_CASE("topo: dgx-h100:2 and dgx-h100:32 vertex and link counts") {
  // dgx-h100:2: 16 GPUs; one NVSwitch per node; 8 rail leaves (one SU, 2 GPUs each); uplinks per
  // leaf = 2 (non-blocking) → 2 spines; leaf-spine links 8 × 2 = 16.
  Cluster c2 = load_cluster("dgx-h100:2");
  CHECK(c2.num_gpus() == 16);
  CHECK(c2.num_nodes() == 2);
  CHECK(c2.gpus_per_node() == 8);
  CHECK(c2.count(VertexKind::NvSwitch) == 2);
  CHECK(c2.count(VertexKind::Switch) == 10);
  CHECK(c2.num_leaves() == 8);
  CHECK(c2.fabric().kind == "fat-tree");
  CHECK(c2.fabric().levels == 2);
  CHECK(c2.fabric().rail_optimized);
  auto m2 = links_by_class(c2);
  CHECK(m2[LinkClass::NvLink] == 16);
  CHECK(m2[LinkClass::NicLink] == 16);
  CHECK(m2[LinkClass::LeafSpine] == 16);
  CHECK(c2.num_links() == 48);

  // dgx-h100:32: 256 GPUs, one full SU: 8 leaves × 32 GPUs, 32 spines, 8 × 32 leaf-spine links.
  Cluster c32 = load_cluster("dgx-h100:32");
  CHECK(c32.num_gpus() == 256);
  CHECK(c32.count(VertexKind::NvSwitch) == 32);
  CHECK(c32.count(VertexKind::Switch) == 40);
  auto m32 = links_by_class(c32);
  CHECK(m32[LinkClass::NvLink] == 256);
  CHECK(m32[LinkClass::NicLink] == 256);
  CHECK(m32[LinkClass::LeafSpine] == 256);
  CHECK(m32.count(LinkClass::SpineCore) == 0);
  CHECK(c32.injection_bw(0) == 50e9);

  // Node / rail / leaf structure: GPU 8·n + r is on rail r, node n, leaf r (one SU).
  CHECK(c32.node_of(77) == 9);
  CHECK(c32.rail_of(77) == 5);
  CHECK(c32.leaf_of(77) == 5);
  CHECK(c32.same_rail(5, 77));
  CHECK(c32.same_leaf(5, 77));
  CHECK(!c32.same_nvlink_domain(5, 77));
}

TEST_CASE("topo: fat-tree level choice and 3-level counts") {
  // 256 nodes = 8 SUs → 64 leaves = radix: still 2 levels. 257 nodes → 72 leaves: 3 levels.
  CHECK(load_cluster("dgx-h100:256").fabric().levels == 2);
  Cluster c = load_cluster("dgx-h100:257");
  CHECK(c.fabric().levels == 3);
  // 3 levels: pods of 32 leaves (4 SUs) → ceil(72 / 32) = 3 pods; 32 spines per pod; cores =
  // 32 groups × 32 = 1024; spine-core links = 3 pods × 32 spines × 32.
  auto m = links_by_class(c);
  CHECK(m[LinkClass::LeafSpine] == 72 * 32);
  CHECK(m[LinkClass::SpineCore] == 3 * 32 * 32);
  auto e = error_of([] { load_cluster("dgx-h100:300,levels=2"); });
  REQUIRE(e);
  CHECK(e->field() == "levels");
}

TEST_CASE("topo: routes inside a node, along a rail, across rails") {
  Cluster c = load_cluster("dgx-h100:64");  // 2 SUs of 32 nodes, 16 leaves, 32 spines
  const Latencies lat;

  // Same node: GPU → NVSwitch → GPU, NVLink only, 450 GB/s.
  Route r = c.route(0, 5);
  CHECK(r.hops() == 2);
  CHECK(r.nvlink_only);
  CHECK(r.bottleneck_bw == 450e9);
  CHECK(r.latency == doctest::Approx(2 * lat.nvlink));
  auto path = c.route_vertices(0, r);
  REQUIRE(path.size() == 3);
  CHECK(c.graph()[path[1]].kind == VertexKind::NvSwitch);

  // Same rail, same SU: GPU → rail leaf → GPU, 2 hops at the NIC's 50 GB/s.
  r = c.route(0, 8 * 7);
  CHECK(r.hops() == 2);
  CHECK(!r.nvlink_only);
  CHECK(r.bottleneck_bw == 50e9);
  CHECK(r.latency == doctest::Approx(2 * lat.nic));
  CHECK(count_class(c, r, LinkClass::NicLink) == 2);

  // Same rail, other SU (node 40): leaf → spine → leaf, 4 hops.
  r = c.route(0, 8 * 40);
  CHECK(r.hops() == 4);
  CHECK(r.bottleneck_bw == 50e9);
  CHECK(count_class(c, r, LinkClass::LeafSpine) == 2);

  // Other rail, other node: through a spine (no forwarding through a GPU), 4 hops.
  r = c.route(0, 8 * 3 + 2);
  CHECK(r.hops() == 4);
  CHECK(count_class(c, r, LinkClass::NvLink) == 0);
  for (auto v : c.route_vertices(0, r)) {
    const auto& info = c.graph()[v];
    if (info.kind == VertexKind::Gpu) CHECK((info.gpu == 0 || info.gpu == 26));
  }

  // Deterministic, symmetric in length, empty for src == dst.
  CHECK(c.route(0, 26).links == r.links);
  CHECK(c.route(26, 0).hops() == 4);
  CHECK(c.route(3, 3).hops() == 0);
  CHECK_THROWS_AS(c.route(0, c.num_gpus()), std::out_of_range);

  // Destination-mod-k: from leaf 0 to the 32 rail-0 GPUs of SU 1, the routes use all 32 spines.
  std::set<int> spines;
  for (int node = 32; node < 64; ++node) {
    auto p = c.route_vertices(0, c.route(0, 8 * node));
    REQUIRE(p.size() == 5);
    spines.insert(static_cast<int>(p[2]));
  }
  CHECK(spines.size() == 32);
}

TEST_CASE("topo: clusters stay valid when copied and moved") {
  std::vector<Cluster> v;
  v.push_back(load_cluster("dgx-h100:2"));
  v.push_back(load_cluster("torus:2x2,gpus=1"));  // reallocation copies the first one
  {
    Cluster tmp = load_cluster("dgx-h100:4");
    v.push_back(tmp);
  }  // the original is gone
  CHECK(v[0].link(0).bandwidth == 450e9);
  CHECK(v[0].route(0, 1).bottleneck_bw == 450e9);
  CHECK(v[1].link(v[1].num_links() - 1).cls == LinkClass::Torus);
  CHECK(v[2].route(0, 9).hops() == 4);
  CHECK(v[2].bisection_bw() == doctest::Approx(800e9));
}

TEST_CASE("topo: routes are the same when asked from many threads") {
  Cluster c = load_cluster("dgx-h100:16");
  const int n = c.num_gpus();
  std::vector<std::vector<int>> expected;
  for (int d = 0; d < n; ++d) expected.push_back(c.route(d % 7, d).links);
  Cluster fresh = load_cluster("dgx-h100:16");  // empty caches, filled concurrently
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3 * n; ++i) {
        const int d = (i + 37 * t) % n;  // each thread walks the destinations from elsewhere
        if (fresh.route(d % 7, d).links != expected[d]) ++mismatches[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int m : mismatches) CHECK(m == 0);
}

TEST_CASE("topo: bisection bandwidth of fat-trees, with and without oversubscription") {
  // dgx-h100:4 = 32 GPUs; halves = nodes {0,1} and {2,3}. Each half's GPUs leave it only through
  // their own 50 GB/s NICs: 16 × 50e9 = 800e9 per direction. (All 4 nodes sit in one SU, so every
  // rail leaf holds 2 GPUs of each half and same-rail pairs cross inside the leaf; the spines are
  // not needed to reach 800e9, hence 2:1 oversubscription leaves it unchanged.)
  CHECK(load_cluster("dgx-h100:4").bisection_bw() == doctest::Approx(800e9));
  CHECK(load_cluster("dgx-h100:4,oversub=2").bisection_bw() == doctest::Approx(800e9));

  // radix 4 → 2 nodes per SU: the halves are SU 0 and SU 1, and the cut crosses the spines.
  // Non-blocking: each of SU 0's 8 leaves has 2 GPUs and 2 uplinks → 16 × 50e9 = 800e9.
  // 2:1: 1 uplink per leaf → 8 × 50e9 = 400e9, half.
  CHECK(load_cluster("dgx-h100:4,radix=4").bisection_bw() == doctest::Approx(800e9));
  CHECK(load_cluster("dgx-h100:4,radix=4,oversub=2").bisection_bw() == doctest::Approx(400e9));

  // dgx-h100:64 (2-level): halves = SU 0 and SU 1; 256 GPUs × 50e9 = 12.8e12 when non-blocking;
  // 2:1 gives SU 0's 8 leaves 16 uplinks each: 8 × 16 × 50e9 = 6.4e12.
  CHECK(load_cluster("dgx-h100:64").bisection_bw() == doctest::Approx(12.8e12));
  // 8,192 GPUs: the max-flow's integer capacities used to overflow int64 here (UB, right by luck).
  CHECK(load_cluster("dgx-h100:1024").bisection_bw() == doctest::Approx(4096 * 50e9));
  Cluster os = load_cluster("dgx-h100:64,oversub=2");
  CHECK(os.fabric().oversubscription == 2.0);
  CHECK(os.bisection_bw() == doctest::Approx(6.4e12));

  // 1024 GPUs (dgx-h100:128): non-blocking, 512 × 50e9.
  CHECK(load_cluster("dgx-h100:128").bisection_bw() == doctest::Approx(25.6e12));
}

TEST_CASE("topo: nvl72 racks are 72-GPU NVLink domains") {
  Cluster c = load_cluster("nvl72:2");
  CHECK(c.num_gpus() == 144);
  CHECK(c.gpus_per_node() == 72);
  CHECK(c.fabric().kind == "nvlink-domain");
  CHECK(c.gpu().name == "GB200");
  CHECK(c.same_nvlink_domain(0, 71));
  CHECK(!c.same_nvlink_domain(71, 72));
  Route r = c.route(0, 71);
  CHECK(r.nvlink_only);
  CHECK(r.hops() == 2);
  CHECK(r.bottleneck_bw == 900e9);
  r = c.route(0, 72);
  CHECK(!r.nvlink_only);
  CHECK(r.bottleneck_bw == 50e9);
  CHECK(links_by_class(c)[LinkClass::NvLink] == 144);
}

TEST_CASE("topo: torus is connected with the expected sizes") {
  // 4×4×4 nodes × 8 GPUs; 64 routers with 3 links each (+1 per dimension): 192 torus links.
  Cluster c = load_cluster("torus:4x4x4");
  CHECK(c.num_gpus() == 512);
  CHECK(c.fabric().kind == "torus");
  CHECK(links_by_class(c)[LinkClass::Torus] == 192);
  // Size-2 dimensions get one link, not two: 2×2×2 → 8 × 3 / 2 = 12.
  Cluster small = load_cluster("torus:2x2x2,gpus=1");
  CHECK(small.num_gpus() == 8);
  CHECK(links_by_class(small)[LinkClass::Torus] == 12);
  // 1 GPU per node, 3×3: every pair routes; the farthest is 2 torus hops + 2 NIC links.
  Cluster t = load_cluster("torus:3x3,gpus=1");
  CHECK(t.num_gpus() == 9);
  int longest = 0;
  for (int a = 0; a < 9; ++a)
    for (int b = 0; b < 9; ++b)
      if (a != b) longest = std::max(longest, t.route(a, b).hops());
  CHECK(longest == 4);
  // 4×4×4: halves are z ∈ {0,1} and {2,3}; the cut crosses 2 planes × 16 links × 50e9.
  CHECK(c.bisection_bw() == doctest::Approx(1.6e12));
}

TEST_CASE("topo: dragonfly is connected with the expected sizes") {
  // 9 groups × 4 routers × 1 node × 8 GPUs = 288; local links 9 × C(4,2) = 54; global: 36 group
  // pairs × floor(4·2 / 8) = 1 link each.
  Cluster c = load_cluster("dragonfly:9");
  CHECK(c.num_gpus() == 288);
  auto m = links_by_class(c);
  CHECK(m[LinkClass::DragonflyLocal] == 54);
  CHECK(m[LinkClass::DragonflyGlobal] == 36);
  // Minimal routes: at most one global hop between any two groups.
  for (int b = 8; b < c.num_gpus(); b += 8) CHECK(count_class(c, c.route(0, b), LinkClass::DragonflyGlobal) <= 1);
  CHECK(count_class(c, c.route(0, 280), LinkClass::DragonflyGlobal) == 1);
  // 10 groups need 9 global ports per group; 4 routers × 2 give 8.
  auto e = error_of([] { load_cluster("dragonfly:10"); });
  REQUIRE(e);
  CHECK(e->field() == "size");
  CHECK(load_cluster("dragonfly:5,routers=2,nodes=2,gpus=4").num_gpus() == 5 * 2 * 2 * 4);
}

TEST_CASE("topo: JSON round trip (parameters and explicit links)") {
  for (const char* spec : {"dgx-h100:4", "dgx-h100:4,oversub=2,radix=8", "nvl72:2", "torus:3x2x2,gpus=2",
                           "dragonfly:5,routers=2,global=2"}) {
    CAPTURE(spec);
    Cluster a = load_cluster(spec);
    for (auto style : {ClusterJsonStyle::Parameters, ClusterJsonStyle::Links}) {
      const std::string text = cluster_to_json(a, style).dump(2);
      Cluster b = from_text(text);
      check_same(a, b);
      if (style == ClusterJsonStyle::Parameters) {
        CHECK(b.fabric().kind == a.fabric().kind);
        CHECK(b.fabric().oversubscription == a.fabric().oversubscription);
      } else {
        CHECK(b.fabric().kind == "links");
      }
      // Writing the re-read cluster again gives the same file.
      CHECK(cluster_to_json(b, style).dump(2) == text);
    }
  }
}

TEST_CASE("topo: command line summary, exports and round trip through a file") {
  const std::string dir = "/tmp/shardsim_topo_test_" + std::to_string(::getpid());
  REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
  auto r = test::run_cli("topo --cluster dgx-h100:4 --json " + dir + "/c.json --dot " + dir + "/c.dot --json-links " +
                         dir + "/l.json");
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("32 GPUs in 4 nodes") != std::string::npos);
  CHECK(r.out.find("bisection   800 GB/s") != std::string::npos);
  CHECK(r.out.find("32 nvlink at 450 GB/s; 32 nic at 50 GB/s; 32 leaf-spine at 50 GB/s") != std::string::npos);
  // Loading the written file prints the same summary, except the "(from …)" on the first line.
  auto again = test::run_cli("topo --cluster " + dir + "/c.json");
  CHECK(again.exit_code == 0);
  CHECK(again.out.substr(again.out.find('\n')) == r.out.substr(r.out.find('\n')));
  check_same(load_cluster("dgx-h100:4"), load_cluster(dir + "/c.json"));
  check_same(load_cluster("dgx-h100:4"), load_cluster(dir + "/l.json"));
  auto edges_in = [](const std::string& path) {
    std::ifstream dot(path);
    int edges = 0;
    for (std::string line; std::getline(dot, line);) edges += line.find(" -- ") != std::string::npos;
    return edges;
  };
  // 32 GPUs: by default one vertex per node, its 8 NIC links merged per leaf (4 nodes × 8 rail
  // leaves) beside the 32 leaf-spine links; every link with --dot-detail gpus.
  CHECK(edges_in(dir + "/c.dot") == 32 + 32);
  CHECK(test::run_cli("topo --cluster dgx-h100:4 --dot-detail gpus --dot " + dir + "/g.dot").exit_code == 0);
  CHECK(edges_in(dir + "/g.dot") == 96);
  auto bad_detail = test::run_cli("topo --cluster dgx-h100:4 --dot-detail racks --dot " + dir + "/b.dot");
  CHECK(bad_detail.exit_code == 2);
  CHECK(bad_detail.err.find("--dot-detail") != std::string::npos);
  CHECK(std::system(("rm -rf " + dir).c_str()) == 0);

  auto route = test::run_cli("topo --cluster dgx-h100:4 --route 3,30");
  CHECK(route.exit_code == 0);
  CHECK(route.out.find("--route 3,30: gpu3 -> gpu30: 4 hops") != std::string::npos);

  auto help = test::run_cli("topo --help");
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("Examples:") != std::string::npos);
  CHECK(help.out.find("dgx-h100:N") != std::string::npos);

  auto bad = test::run_cli("topo --cluster dgx-h100:4 --route 0,99");
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.empty());
  CHECK(bad.err.find("outside 0..31") != std::string::npos);
}

TEST_CASE("topo: cluster JSON files, valid forms") {
  Cluster c = from_text(R"({
    "name": "two-pods", "gpu": "h200", "gpus_per_node": 8, "nodes": 4,
    "fabric": {"kind": "fat-tree", "radix": 4, "oversubscription": 2, "nic_bw": 50e9},
    "latencies": {"nic": 2e-6},
    "collective_efficiency": {"nvlink": 0.8}
  })");
  CHECK(c.name() == "two-pods");
  CHECK(c.gpu().hbm_bytes == 143771.0 * 1024 * 1024);
  CHECK(c.bisection_bw() == doctest::Approx(400e9));
  CHECK(c.route(0, 8).latency == doctest::Approx(4e-6));
  CHECK(c.collective_efficiency().nvlink == 0.8);
  CHECK(c.collective_efficiency().network == 0.9);

  // Inline GPU, explicit links with inferred classes and default latencies: 2 nodes of 2 GPUs.
  Cluster l = from_text(R"({
    "gpu": {"name": "toy", "bf16_flops": 1e14, "fp8_flops": 2e14, "hbm_bytes": 1e10, "hbm_bw": 1e12, "nvlink_bw": 1e11},
    "gpus_per_node": 2, "nodes": 2,
    "fabric": {"kind": "links",
      "vertices": [{"name": "sw", "kind": "switch"}, {"name": "nv0", "kind": "nvswitch", "node": 0}],
      "links": [{"a": "gpu0", "b": "nv0", "bandwidth": 1e11}, {"a": "gpu1", "b": "nv0", "bandwidth": 1e11},
                {"a": "gpu0", "b": "sw", "bandwidth": 1e10}, {"a": "gpu1", "b": "sw", "bandwidth": 1e10},
                {"a": "gpu2", "b": "sw", "bandwidth": 1e10}, {"a": "gpu3", "b": "gpu2", "bandwidth": 3e10}]}
  })");
  CHECK(l.num_gpus() == 4);
  CHECK(l.link(0).cls == LinkClass::NvLink);
  CHECK(l.link(2).cls == LinkClass::NicLink);
  CHECK(l.link(5).cls == LinkClass::NvLink);  // GPU-GPU
  CHECK(l.route(0, 1).nvlink_only);
  // gpu0 → gpu3 must forward through gpu2 (nothing else reaches gpu3).
  Route r = l.route(0, 3);
  CHECK(r.hops() == 3);
  CHECK(r.bottleneck_bw == 1e10);
  CHECK(l.leaf_of(0) == 0);
  CHECK(l.leaf_of(3) == -1);
}

TEST_CASE("topo: cluster JSON files, every refusal names the field") {
  const std::string base = R"("gpu": "H100-SXM-80GB", "gpus_per_node": 8)";
  struct Case {
    std::string text, field, reason;
  };
  const std::vector<Case> cases = {
      // malformed
      {"{\"gpu\": \"h100\",\n \"nodes\": }", "line 2, column 11", "malformed JSON"},
      // unknown keys, at top level and inside the fabric
      {"{" + base + R"(, "nodes": 2, "fabric": {"kind": "fat-tree", "radixx": 8}})", "/fabric/radixx", "unknown key"},
      {"{" + base + R"(, "nodes": 2, "nodez": 3, "fabric": {"kind": "fat-tree"}})", "/nodez", "unknown key"},
      // wrong types
      {"{" + base + R"(, "nodes": "four", "fabric": {"kind": "fat-tree"}})", "/nodes", "expected an integer"},
      {"{" + base + R"(, "nodes": 2, "fabric": {"kind": "fat-tree", "rail_optimized": "yes"}})",
       "/fabric/rail_optimized", "expected true or false"},
      {"{" + base + R"(, "nodes": 2, "fabric": {"kind": "mesh"}})", "/fabric/kind", "unknown value"},
      // sizes
      {"{" + base + R"(, "nodes": 0, "fabric": {"kind": "fat-tree"}})", "/nodes", "out of range"},
      {"{" + base + R"(, "nodes": 1000000000, "fabric": {"kind": "fat-tree"}})", "/nodes", "out of range"},
      {"{" + base + R"(, "nodes": 10000, "fabric": {"kind": "fat-tree"}})", "/nodes", "limit of 65536"},
      {"{" + base + R"(, "nodes": 2, "fabric": {"kind": "fat-tree", "nic_bw": -5e10}})", "/fabric/nic_bw", "> 0"},
      {"{" + base + R"(, "nodes": 2, "fabric": {"kind": "fat-tree", "oversubscription": 0.5}})",
       "/fabric/oversubscription", "[1, 64]"},
      {"{" + base + R"(, "fabric": {"kind": "torus", "dims": [4, 0]}})", "/fabric/dims/1", "out of range"},
      {"{" + base + R"(, "nodes": 3, "fabric": {"kind": "torus", "dims": [2, 2]}})", "/nodes", "disagrees"},
      // GPU
      {R"({"gpu": "Z100", "gpus_per_node": 8, "nodes": 1, "fabric": {"kind": "fat-tree"}})", "/gpu",
       "unknown GPU preset"},
      {R"({"gpu": {"name": "x", "bf16_flops": 1e14}, "gpus_per_node": 8, "nodes": 1, "fabric": {"kind": "fat-tree"}})",
       "/gpu/fp8_flops", "missing"},
      // explicit link lists
      {R"({"gpu": "h100", "gpus_per_node": 1, "nodes": 4, "fabric": {"kind": "links",
          "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": 1e9}, {"a": "gpu2", "b": "gpu3", "bandwidth": 1e9}]}})",
       "/fabric/links", "not connected"},
      {R"({"gpu": "h100", "gpus_per_node": 1, "nodes": 2, "fabric": {"kind": "links",
          "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": -1}]}})",
       "/fabric/links/0/bandwidth", "> 0"},
      {R"({"gpu": "h100", "gpus_per_node": 1, "nodes": 2, "fabric": {"kind": "links",
          "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": 1e9}, {"a": "gpu1", "b": "spine9", "bandwidth": 1e9}]}})",
       "/fabric/links/1/b", "unknown vertex \"spine9\""},
      {R"({"gpu": "h100", "gpus_per_node": 1, "nodes": 2, "fabric": {"kind": "links",
          "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": 1e9, "class": "pcie"}]}})",
       "/fabric/links/0/class", "unknown link class"},
      {R"({"gpu": "h100", "gpus_per_node": 1, "nodes": 2, "fabric": {"kind": "links",
          "vertices": [{"name": "gpu1", "kind": "switch"}], "links": []}})",
       "/fabric/vertices/0/name", "duplicate vertex name"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    auto e = error_of([&] { from_text(c.text); });
    REQUIRE(e);
    CHECK(e->source() == "test.json");
    CHECK(e->field() == c.field);
    CHECK(e->reason().find(c.reason) != std::string::npos);
  }
}

TEST_CASE("topo: shorthand refusals name the key") {
  struct Case {
    std::string spec, field, reason;
  };
  const std::vector<Case> cases = {
      {"dgx-h100:0", "size", "out of range"},
      {"dgx-h100:", "size", "missing"},
      {"dgx-h100:four", "size", "expected an integer"},
      {"dgx-h100:1000000000", "size", "limit of 65536"},
      {"dgx-h100:99999999999999999999999", "size", "far too large"},
      {"dgx-h100:4,foo=1", "foo", "unknown option"},
      {"dgx-h100:4,oversub", "oversub", "KEY=VALUE"},
      {"dgx-h100:4,oversub=0.5", "oversub", "[1, 64]"},
      {"dgx-h100:4,radix=7", "radix", "even"},
      {"dgx-h100:4,nic_bw=-1", "nic_bw", "> 0"},
      {"dgx-h100:4,gpu=Z100", "gpu", "unknown GPU preset"},
      {"dgx-h100:4,rails=maybe", "rails", "on or off"},
      {"torus:4x0x4", "size", "out of range"},
      {"torus:2x2x2x2", "size", "1 to 3 dimensions"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.spec);
    auto e = error_of([&] { load_cluster(c.spec); });
    REQUIRE(e);
    CHECK(e->source() == c.spec);
    CHECK(e->field() == c.field);
    CHECK(e->reason().find(c.reason) != std::string::npos);
  }
  auto e = error_of([] { load_cluster("bogus:3"); });
  REQUIRE(e);
  CHECK(e->reason().find("unknown cluster shorthand \"bogus\"") != std::string::npos);
  e = error_of([] { load_cluster("no-such-cluster.json"); });
  REQUIRE(e);
  CHECK(e->reason().find("cannot open") != std::string::npos);
}

TEST_CASE("topo: Cluster refuses inconsistent graphs built in code") {
  SpecContext ctx{"code"};
  GeneratedFabric f = generate_fat_tree(gpu_preset("h100"), 2, 8, FatTreeParams{}, Latencies{}, ctx);
  auto e = error_of([&] { Cluster("x", "code", gpu_preset("h100"), 3, f.info, f.graph); });
  REQUIRE(e);
  CHECK(e->field() == "/gpus_per_node");  // 3 does not divide 16
  ClusterGraph g = f.graph;
  boost::add_vertex(VertexInfo{VertexKind::Switch, "lonely", -1, -1, 1}, g);
  e = error_of([&] { Cluster("x", "code", gpu_preset("h100"), 8, f.info, g); });
  REQUIRE(e);
  CHECK(e->reason().find("lonely cannot reach gpu0") != std::string::npos);
}

TEST_CASE("topology: DOT per node merges each domain's fabric links and keeps every one of them counted") {
  const Cluster c = load_cluster("dgx-h100:8,oversub=2");
  const std::string dot = to_dot(c, DotDetail::Nodes);
  const std::string full = to_dot(c, DotDetail::Gpus);
  auto vertices = [](const std::string& d) {
    int n = 0;
    for (std::size_t at = d.find("[shape="); at != std::string::npos; at = d.find("[shape=", at + 1)) ++n;
    return n;
  };
  int switches = 0;
  for (std::size_t v = 0; v < boost::num_vertices(c.graph()); ++v) switches += c.graph()[v].kind == VertexKind::Switch;
  CHECK(vertices(dot) == c.num_nodes() + switches);         // one per domain, plus the fabric's switches
  CHECK(vertices(full) >= c.num_gpus() + c.num_nodes() + switches);
  CHECK(dot.find("\"gpu") == std::string::npos);           // no GPU vertices
  int nodes = 0, nic_links = 0;
  for (std::size_t at = dot.find("shape=box3d"); at != std::string::npos; at = dot.find("shape=box3d", at + 1)) ++nodes;
  CHECK(nodes == c.num_nodes());
  // Every NIC link of the cluster appears once, inside a merged edge's count ("2 × nic …" or "nic …").
  std::istringstream lines(dot);
  for (std::string l; std::getline(lines, l);) {
    auto lab = l.find("label=\"");
    if (l.find(" -- ") == std::string::npos || lab == std::string::npos) continue;
    std::string text = l.substr(lab + 7);
    int count = 1;
    if (auto x = text.find(" × "); x != std::string::npos && x == text.find(' ')) count = std::stoi(text.substr(0, x));
    if (text.find("nic ") != std::string::npos) nic_links += count;
  }
  int expected = 0;
  for (int id = 0; id < c.num_links(); ++id) expected += c.link(id).cls == LinkClass::NicLink;
  CHECK(nic_links == expected);
}

TEST_CASE("topo: a route found from the layers near its destination is the whole tree's route") {
  // route() explores only the breadth-first layers up to the source's when GPUs reach each other
  // through switches (GPU pairs of a replica then cost what is near them, not one whole-fabric tree
  // per destination GPU); every route must be the one the destination's whole tree gives.
  for (const char* spec : {"dgx-h100:4", "dgx-h100:8,oversub=2", "dgx-h100:16,rails=off,radix=16", "nvl72:2",
                           "dragonfly:4", "torus:2x2"}) {
    CAPTURE(spec);
    // Two loads: a cluster's whole trees, once built, serve its route() too.
    const Cluster c = load_cluster(spec), w = load_cluster(spec);
    const int n = c.num_gpus();
    for (int s = 0; s < n; s += std::max(1, n / 37))
      for (int d = 0; d < n; d += std::max(1, n / 41)) {
        const Route near = c.route(s, d), whole = w.route_from_whole_tree(s, d);
        CAPTURE(s);
        CAPTURE(d);
        CHECK(near.links == whole.links);
        CHECK(near.bottleneck_bw == whole.bottleneck_bw);
        CHECK(near.latency == whole.latency);
        CHECK(near.nvlink_only == whole.nvlink_only);
      }
  }
}

TEST_CASE("topo: a mixed cluster gives each node its own GPU type, NVLink included, and round-trips") {
  const Cluster c = load_cluster("dgx-h100:2+dgx-b200:1,oversub=2");
  REQUIRE(c.mixed());
  CHECK(c.num_gpus() == 24);
  CHECK(c.gpu().name == "H100-SXM-80GB");
  CHECK(c.gpu_of(15).name == "H100-SXM-80GB");
  CHECK(c.gpu_of(16).name == "B200");
  CHECK(c.node_gpu(2).name == "B200");
  CHECK(c.gpu_type_of(23) == 1);
  CHECK(c.gpu_types().size() == 2);
  CHECK(c.gpus_text() == "16 × H100-SXM-80GB + 8 × B200");
  CHECK(c.fabric().requested_oversubscription == 2);
  // NVLink inside each node at that node's GPU's rate: 450 GB/s per direction on H100, 900 on B200.
  CHECK(c.route(0, 1).bottleneck_bw == doctest::Approx(450e9));
  CHECK(c.route(16, 17).bottleneck_bw == doctest::Approx(900e9));
  CHECK(c.route(0, 16).bottleneck_bw == doctest::Approx(50e9));  // across nodes: the NICs
  CHECK_THROWS_AS(c.gpu_of(24), std::out_of_range);
  CHECK_FALSE(load_cluster("dgx-h100:2").mixed());
  // Written and read back (parameters and links), every link and the types are the same.
  for (auto style : {ClusterJsonStyle::Parameters, ClusterJsonStyle::Links}) {
    const json j = cluster_to_json(c, style);
    CHECK_FALSE(j.contains("gpu"));
    REQUIRE(j.contains("node_gpus"));
    CHECK(j["node_gpus"].size() == 2);
    CHECK(j["node_gpus"][0]["nodes"] == 2);
    const Cluster back = cluster_from_json(j, "mixed.json", "mixed");
    check_same(c, back);
    REQUIRE(back.mixed());
    CHECK(back.gpu_of(16) == c.gpu_of(16));
    CHECK(back.node_types() == c.node_types());
  }
  // A cluster file naming its runs by preset.
  const Cluster f = from_text(R"({"node_gpus": [{"gpu": "H200-SXM-141GB", "nodes": 1}, {"gpu": "H100-SXM-80GB", "nodes": 3}],
      "gpus_per_node": 8, "nodes": 4, "fabric": {"kind": "fat-tree"}})");
  CHECK(f.gpu().name == "H200-SXM-141GB");
  CHECK(f.gpu_of(8).name == "H100-SXM-80GB");
  CHECK(f.gpus_text() == "8 × H200-SXM-141GB + 24 × H100-SXM-80GB");
}

TEST_CASE("topo: mixed-cluster refusals name the field") {
  struct Case {
    std::string spec, field, reason;
  };
  const std::vector<Case> cases = {
      {"dgx-h100:1,oversub=2+dgx-h200:1", "oversub", "after the last part"},
      {"dgx-h100:1+nvl72:1", "size", "only node families"},
      {"dgx-h100:1+dgx-h200:1,gpu=B200", "gpu", "unknown option"},
      {"dgx-h100:1+bogus:1", "size", "not a node shorthand"},
      {"dgx-h100:1+dgx-h200:0", "size", "out of range"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.spec);
    auto e = error_of([&] { load_cluster(c.spec); });
    REQUIRE(e);
    CHECK(e->field() == c.field);
    CHECK(e->reason().find(c.reason) != std::string::npos);
  }
  auto both = error_of([] {
    from_text(R"({"gpu": "H100-SXM-80GB", "node_gpus": [{"gpu": "H200-SXM-141GB", "nodes": 2}], "gpus_per_node": 8,
                  "nodes": 2, "fabric": {"kind": "fat-tree"}})");
  });
  REQUIRE(both);
  CHECK(both->field() == "/gpu");
  auto short_runs = error_of([] {
    from_text(R"({"node_gpus": [{"gpu": "H200-SXM-141GB", "nodes": 1}], "gpus_per_node": 8, "nodes": 2,
                  "fabric": {"kind": "fat-tree"}})");
  });
  REQUIRE(short_runs);
  CHECK(short_runs->field() == "/node_gpus");
  CHECK(short_runs->reason().find("1 nodes, the fabric 2") != std::string::npos);
  auto bad_gpu = error_of([] {
    from_text(R"({"node_gpus": [{"gpu": "Z100", "nodes": 2}], "gpus_per_node": 8, "nodes": 2, "fabric": {"kind": "fat-tree"}})");
  });
  REQUIRE(bad_gpu);
  CHECK(bad_gpu->field() == "/node_gpus/0/gpu");
}
