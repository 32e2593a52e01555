// tests/sim/step/link_traffic_test.cpp — a step's bytes per link class: ring collectives inside a node,
// all-to-all across nodes with and without rail optimisation, worked by hand.
#include <doctest/doctest.h>

#include "sim/step/collective_cost.hpp"
#include "sim/step/link_traffic.hpp"
#include "tests/cli_runner.hpp"
#include "topologies/cluster.hpp"

using namespace shardsim;

namespace {

constexpr auto kNv = static_cast<std::size_t>(LinkClass::NvLink);
constexpr auto kNic = static_cast<std::size_t>(LinkClass::NicLink);
constexpr auto kSpine = static_cast<std::size_t>(LinkClass::LeafSpine);

StepProgram program_on(int gpus) {
  StepProgram p;
  for (int g = 0; g < gpus; ++g) p.rank_gpu.push_back(g);
  return p;
}

// One collective over GPUs 0..gpus−1 (an all-to-all gets a uniform matrix of `bytes` per pair).
StepProgram one_collective(int gpus, CollKind kind, double bytes) {
  StepProgram p = program_on(gpus);
  std::vector<int> all;
  for (int r = 0; r < gpus; ++r) all.push_back(r);
  StepOp op;
  op.type = OpType::Collective;
  op.coll = kind;
  op.group = p.add_group(all);
  op.bytes = bytes;
  if (kind == CollKind::AllToAll) {
    op.matrix = 0;
    p.a2a.push_back(A2aMatrix::from_dense(std::vector<double>(static_cast<std::size_t>(gpus * gpus), bytes)));
  }
  p.add(op, {});
  return p;
}

}  // namespace

TEST_CASE("link traffic: a ring all-reduce inside a node crosses two NVLink links per hop") {
  const Cluster c = load_cluster("dgx-h100:1");
  StepProgram p = one_collective(8, CollKind::AllReduce, 8e6);
  p.ops[0].weight = 3;  // a folded op stands for three layers
  p.ops[0].algo = CollAlgo::Ring;  // (at 8 MB NCCL would take NVLS: below)
  LinkTrafficCounter counter(c);
  const LinkTraffic t = counter.count(p);
  // Each of 8 members sends 2 · 7/8 · 8 MB to the next, over GPU → NVSwitch → GPU: 2 links.
  const double per_member = 2 * 7.0 / 8 * 8e6 * 3;
  CHECK(t.bytes[kNv] == doctest::Approx(8 * per_member * 2));
  CHECK(t.bytes[kNic] == 0);
  // Every GPU's NVLink carries one send out and one receive in: different directions.
  CHECK(t.busiest[kNv] == doctest::Approx(per_member / c.gpu().nvlink_bw));
  CHECK(counter.count(p).bytes[kNv] == doctest::Approx(t.bytes[kNv]));  // nothing carried over between steps
  // The algorithm NCCL picks is the one counted: NVLS, whose GPUs each send S into the switch's
  // reduction and S/p back out as their reduced shard, S(1 + 1/p) per NVLink port and direction.
  p.ops[0].algo = CollAlgo::Auto;
  REQUIRE(collective_time(c, CollKind::AllReduce, {0, 1, 2, 3, 4, 5, 6, 7}, 8e6).algo == CollAlgo::Nvls);
  const LinkTraffic nvls = counter.count(p);
  CHECK(nvls.busiest[kNv] == doctest::Approx(8e6 * (1 + 1.0 / 8) * 3 / c.gpu().nvlink_bw));
}

TEST_CASE("link traffic: a ring over two nodes spreads its node crossings over every NIC, as NCCL's channels do") {
  const Cluster c = load_cluster("dgx-h100:2");
  LinkTrafficCounter counter(c);
  const LinkTraffic t = counter.count(one_collective(16, CollKind::AllReduce, 16e6));
  const double per_member = 2 * 15.0 / 16 * 16e6;  // each GPU sends this much in all
  CHECK(t.bytes[kNic] == doctest::Approx(16 * per_member / 8 * 2));      // 1/8 out of its NIC, into another
  CHECK(t.bytes[kNv] == doctest::Approx(16 * per_member * 7 / 8 * 2));   // 7/8 to the next GPU of its node
  CHECK(t.busiest[kNic] == doctest::Approx(per_member / 8 / 50e9));       // every NIC equally loaded
}

TEST_CASE("link traffic: an all-to-all across nodes stays on the rails of a rail-optimised fabric, not without rails") {
  auto a2a = [](const Cluster& c) {  // 1 MB between every pair (self included, never sent)
    LinkTrafficCounter counter(c);
    return counter.count(one_collective(16, CollKind::AllToAll, 1e6));
  };
  // Two nodes: of each GPU's 15 peers, 7 share its node and 8 are remote (1 on its rail, 7 not).
  const double remote = 16 * 8 * 1e6, local = 16 * 7 * 1e6, off_rail = 16 * 7 * 1e6;
  const LinkTraffic rails = a2a(load_cluster("dgx-h100:2"));
  CHECK(rails.bytes[kNic] == doctest::Approx(2 * remote));          // out of one NIC, into another
  CHECK(rails.bytes[kSpine] == 0);                                  // both nodes under each rail's leaf
  CHECK(rails.bytes[kNv] == doctest::Approx(2 * (local + off_rail)));  // local pairs, and PXN's hop to the receiver's rail
  const LinkTraffic flat = a2a(load_cluster("dgx-h100:2,rails=off,radix=16"));  // one node per leaf
  CHECK(flat.bytes[kNic] == doctest::Approx(2 * remote));
  CHECK(flat.bytes[kSpine] == doctest::Approx(2 * remote));         // up to a spine and down again
  CHECK(flat.bytes[kNv] == doctest::Approx(2 * local));
}

TEST_CASE("link traffic: simulate reports bytes per class and says why an idle spine cannot matter") {
  auto run = [](const std::string& cluster) {
    return test::run_cli("simulate --model qwen3-30b-a3b --cluster " + cluster +
                         " --plan tp=1,ep=16,attn_dp=16 --requests 40 --offline --fidelity analytic");
  };
  const auto rails = run("dgx-h100:2");
  REQUIRE(rails.exit_code == 0);
  CHECK(rails.out.find("links          by class") != std::string::npos);
  CHECK(rails.out.find("the spine carried nothing") != std::string::npos);
  CHECK(rails.out.find("a rail leaf serves 2 nodes") != std::string::npos);
  const auto flat = run("dgx-h100:2,rails=off,radix=16");
  REQUIRE(flat.exit_code == 0);
  CHECK(flat.out.find("the spine carried nothing") == std::string::npos);
  const auto spine_line = flat.out.find("  leaf-spine");
  REQUIRE(spine_line != std::string::npos);
  CHECK(flat.out.compare(spine_line, 21, "  leaf-spine      0 B") != 0);  // it carries the inter-node bytes
}

TEST_CASE("link traffic: an all-to-all the executors route receive-side is counted receive-side") {
  // Every GPU of node 0 sends 64 MB to GPU 8 (node 1, rail 0), which sends nothing back: send-side
  // (PXN) would pour 7 × 64 MB through GPU 8's one NIC; receive-side forwarding sends each along
  // its own rail to node 1 and over NVLink to GPU 8, so the NICs share it and NVLink carries it.
  const Cluster c = load_cluster("dgx-h100:2");
  StepProgram p = one_collective(16, CollKind::AllToAll, 0);
  std::vector<double> dense = p.a2a[0].dense();
  for (int src = 0; src < 8; ++src) dense[static_cast<std::size_t>(src * 16 + 8)] = 64e6;
  const A2aMatrix& m = p.a2a[0] = A2aMatrix::from_dense(dense);
  std::vector<int> gpus(16);
  for (int g = 0; g < 16; ++g) gpus[static_cast<std::size_t>(g)] = g;
  REQUIRE(all_to_all_routing(c, gpus, m) == A2aRouting::ReceiveSide);
  LinkTrafficCounter counter(c);
  const LinkTraffic t = counter.count(p);
  // Each of the 8 senders' 64 MB crosses a NIC up and a NIC down on its own rail: 8 × 2 NIC hops.
  CHECK(t.bytes[kNic] == doctest::Approx(8 * 2 * 64e6));
  // The busiest NIC direction carries one sender's bytes, not eight (send side: 8 × 64 MB into GPU 8).
  CHECK(t.busiest[kNic] == doctest::Approx(64e6 / c.injection_bw(8)));
  // Seven of them are forwarded over node 1's NVLink (rail 0's arrives at GPU 8 itself); send side
  // would move the same bytes over node 0's NVLink instead.
  CHECK(t.bytes[kNv] == doctest::Approx(7 * 2 * 64e6));
}

TEST_CASE("link traffic: the route table holds the pairs a counter routed, grown as new GPUs come, with the same counts") {
  // Issue 40, finding 12: a GPUs × GPUs table per counter was 17.9 GB at 65,536 GPUs. The table
  // now indexes only the GPUs routed between, growing (16, 32, 64, …) as they come.
  const Cluster c = load_cluster("dgx-h100:16");
  auto shifted = [](StepProgram p, int by) {  // the same program on GPUs `by`…
    for (int& g : p.rank_gpu) g += by;
    return p;
  };
  const StepProgram small = one_collective(16, CollKind::AllToAll, 1e6);
  const StepProgram wide = shifted(one_collective(64, CollKind::AllToAll, 1e6), 64);
  LinkTrafficCounter fresh_small(c), fresh_wide(c), reused(c);
  const LinkTraffic a = fresh_small.count(small), b = fresh_wide.count(wide);
  const LinkTraffic a1 = reused.count(small);  // 16 GPUs: the first table
  const LinkTraffic b1 = reused.count(wide);   // 64 more: grown twice, the first 16's routes moved
  const LinkTraffic a2 = reused.count(small);  // the moved routes still give the same bytes
  for (std::size_t k = 0; k < kNumLinkClasses; ++k) {
    CAPTURE(k);
    CHECK(a1.bytes[k] == a.bytes[k]);
    CHECK(a2.bytes[k] == a.bytes[k]);
    CHECK(b1.bytes[k] == b.bytes[k]);
    CHECK(a2.busiest[k] == a.busiest[k]);
  }
  CHECK(a.bytes[kNic] > 0);  // the small program crosses nodes too: routes with NIC hops were moved
}
