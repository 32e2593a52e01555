// tests/sim/simgrid/simgrid_test.cpp — the SimGrid platform and executor: agreement with the analytic executor
// where nothing contends, contention where the fabric is oversubscribed, the platform's routes and
// capacities, refusal of malformed programs.
// One SimGrid Engine per process: every case uses SimgridWorld::instance(), which adds each
// cluster's platform to that Engine the first time it is asked for (in any order, also after runs).
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <numeric>
#include <map>
#include <memory>
#include <string>

#include "sim/step/analytic_executor.hpp"
#include "sim/step/collective_cost.hpp"
#include "sim/step/lowering.hpp"
#include "sim/plan/memory_model.hpp"
#include "sim/plan/plan.hpp"
#include "sim/serving/kv_transfer.hpp"
#include "sim/simgrid/simgrid_executor.hpp"
#include "sim/simgrid/simgrid_platform.hpp"
#include "sim/simgrid/task_graph.hpp"
#include "sim/step/link_traffic.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

// Clusters live for the whole process: platforms keep their own copies, executors keep references.
const Cluster& cluster(const std::string& spec) {
  static std::map<std::string, std::unique_ptr<Cluster>> clusters;
  auto& c = clusters[spec];
  if (!c) c = std::make_unique<Cluster>(load_cluster(spec));
  return *c;
}

struct Both {
  StepTiming analytic, simgrid;
  ContentionReport report;
  double ratio() const { return simgrid.makespan / analytic.makespan; }
};

Both run_both(const Cluster& c, const StepProgram& p) {
  AnalyticExecutor a(c);
  SimgridExecutor s(c);
  Both out;
  out.analytic = a.run(p);
  out.simgrid = s.run(p);
  out.report = s.last_contention();
  return out;
}

// One collective on the given GPUs (ranks = GPUs in order).
StepProgram one_collective(const std::vector<int>& gpus, CollKind kind, double bytes, CollAlgo algo = CollAlgo::Auto) {
  StepProgram p;
  p.rank_gpu = gpus;
  std::vector<int> ranks;
  for (std::size_t r = 0; r < gpus.size(); ++r) ranks.push_back(static_cast<int>(r));
  StepOp op;
  op.type = OpType::Collective;
  op.cls = OpClass::TpComm;
  op.group = p.add_group(ranks);
  op.coll = kind;
  op.algo = algo;
  op.bytes = bytes;
  p.add(op, {});
  return p;
}

// A serving step of `model` under `plan` on `c`: every attention-DP group decodes `decode` sequences
// at `context` tokens and prefills one prompt of `prefill` tokens.
StepProgram lowered(const std::string& model_name, const Cluster& c, const std::string& plan_text, int decode,
                    int context, int prefill, const std::string& routing_spec = "synthetic:seed=7", int replica = 0,
                    std::vector<int> only_layers = {}) {
  const ModelSpec m = load_model(model_name);
  const Plan plan = plan_from_string(plan_text, c.num_gpus(), plan_defaults(m));
  std::unique_ptr<RoutingSource> routing;
  if (m.is_moe()) routing = make_routing(routing_spec, m.routing_shape());
  LoweringOptions opt;
  opt.only_layers = std::move(only_layers);
  Lowering low(plan, m, c, routing.get(), replica, opt);
  ReplicaBatch batch;
  batch.groups.resize(static_cast<std::size_t>(plan.deg.attn_dp));
  std::uint32_t req = 0;
  for (auto& g : batch.groups) {
    for (int s = 0; s < decode; ++s) g.push_back(SeqWork{req++, static_cast<std::uint32_t>(context), 1, context, true, 0});
    if (prefill > 0) g.push_back(SeqWork{req++, 0, prefill, 0, true, 0});
  }
  return low.lower(batch);
}

}  // namespace

TEST_CASE("simgrid: a lone ring all-reduce reproduces NCCL's base + 2(p−1)·hop latency + 2(p−1)/p·S/B") {
  const Cluster& c = cluster("dgx-h100:1");
  const double S = 1 << 30;
  StepProgram p = one_collective({0, 1, 2, 3, 4, 5, 6, 7}, CollKind::AllReduce, S, CollAlgo::Ring);
  Both b = run_both(c, p);
  const double B = c.gpu().nvlink_bw * c.collective_efficiency().nvlink;
  // At 1 GiB the Simple protocol wins (NCCL's tuning constants: 8.4 µs base, 3.4 µs per NVLink step).
  const NcclTuning t;
  CHECK(b.analytic.makespan == doctest::Approx((t.base_ring[2] + 14 * t.nvlink_ring[2]) * 1e-6 + 14 * S / (8 * B)).epsilon(1e-9));
  CHECK(b.simgrid.makespan == doctest::Approx(b.analytic.makespan).epsilon(1e-6));
  CHECK(b.report.flows == 14 * 8);
  MESSAGE("ring 8x1GiB: analytic " << b.analytic.makespan << " simgrid " << b.simgrid.makespan);
}

TEST_CASE("simgrid: a collective's flows are the ones the link counter counts (one pattern, scaled to the price)") {
  // Across two nodes (a ring with a channel per local index), and NVLS inside one: per link class
  // the SimGrid graph's bytes are the counter's times one factor (the pattern scaled to the price).
  std::vector<int> sixteen(16);
  std::iota(sixteen.begin(), sixteen.end(), 0);
  struct Case {
    const char* spec;
    std::vector<int> gpus;
    double bytes;
  };
  for (const Case& k : {Case{"dgx-h100:2", sixteen, 64 << 20}, Case{"dgx-h100:1", {0, 1, 2, 3, 4, 5, 6, 7}, 256 << 20}}) {
    CAPTURE(k.spec);
    const Cluster& c = cluster(k.spec);
    const StepProgram p = one_collective(k.gpus, CollKind::AllReduce, k.bytes);
    AnalyticExecutor an(c);
    TaskGraph g(c, SimgridWorld::instance().platform(c), CollectiveModel{}, an);
    g.build(p);
    std::array<double, kNumLinkClasses> graph{};
    for (int d : g.dlink_touched) graph[static_cast<std::size_t>(c.link(d / 2).cls)] += g.dlink_bytes[static_cast<std::size_t>(d)];
    LinkTrafficCounter counter(c);
    const LinkTraffic t = counter.count(p);
    double factor = 0;
    int classes = 0;
    for (std::size_t cls = 0; cls < kNumLinkClasses; ++cls) {
      CHECK((graph[cls] > 0) == (t.bytes[cls] > 0));
      if (!(t.bytes[cls] > 0)) continue;
      ++classes;
      if (factor == 0) factor = graph[cls] / t.bytes[cls];
      CHECK(graph[cls] / t.bytes[cls] == doctest::Approx(factor).epsilon(1e-6));
    }
    CHECK(classes == (k.gpus.size() > 8 ? 2 : 1));
  }
}

TEST_CASE("simgrid: without contention SimGrid agrees with the analytic executor within 2%") {
  struct Case {
    std::string what;
    const Cluster* c;
    StepProgram p;
  };
  std::vector<Case> cases;
  const Cluster& one = cluster("dgx-h100:1");
  const Cluster& two = cluster("dgx-h100:2");
  cases.push_back({"dense llama3-70b tp=8, decode+prefill", &one, lowered("llama3-70b", one, "tp=8", 32, 1000, 512)});
  cases.push_back({"mixtral-8x7b ep=8 attn_dp=8, decode", &one, lowered("mixtral-8x7b", one, "ep=8,attn_dp=8", 16, 800, 0)});
  cases.push_back({"qwen3-30b-a3b ep=8 attn_dp=8, decode+prefill", &one,
                   lowered("qwen3-30b-a3b", one, "ep=8,attn_dp=8", 16, 800, 256)});
  cases.push_back({"llama3-70b tp=8 dp=2 on 2 nodes, replica 1", &two, lowered("llama3-70b", two, "tp=8,dp=2", 32, 1000, 256, "", 1)});
  cases.push_back({"ring all-reduce 8 GPUs 64 MiB", &one, one_collective({0, 1, 2, 3, 4, 5, 6, 7}, CollKind::AllReduce, 64 << 20, CollAlgo::Ring)});
  cases.push_back({"auto all-reduce 8 GPUs 256 MiB (NVLS)", &one, one_collective({0, 1, 2, 3, 4, 5, 6, 7}, CollKind::AllReduce, 256 << 20)});
  cases.push_back({"auto all-reduce 8 GPUs 64 KiB (ring, LL)", &one, one_collective({0, 1, 2, 3, 4, 5, 6, 7}, CollKind::AllReduce, 64 << 10)});
  std::vector<int> sixteen;
  for (int g = 0; g < 16; ++g) sixteen.push_back(g);
  cases.push_back({"all-to-all 16 GPUs on 2 nodes, uniform 64 MiB", &two, one_collective(sixteen, CollKind::AllToAll, 64 << 20)});
  cases.push_back({"ring all-reduce 16 GPUs on 2 nodes 128 MiB (per-rail flows)", &two, one_collective(sixteen, CollKind::AllReduce, 128 << 20, CollAlgo::Ring)});
  cases.push_back({"auto all-gather 16 GPUs 32 MiB", &two, one_collective(sixteen, CollKind::AllGather, 32 << 20)});
  cases.push_back({"tree all-reduce 16 GPUs 1 MiB", &two, one_collective(sixteen, CollKind::AllReduce, 1 << 20, CollAlgo::Tree)});
  for (const Case& k : cases) {
    CAPTURE(k.what);
    Both b = run_both(*k.c, k.p);
    MESSAGE(k.what << ": analytic " << b.analytic.makespan * 1e3 << " ms, simgrid " << b.simgrid.makespan * 1e3
                   << " ms, ratio " << b.ratio() << ", flows " << b.report.flows << ", wall " << b.report.wall_seconds * 1e3
                   << " ms; " << describe(b.report));
    CHECK(b.ratio() == doctest::Approx(1.0).epsilon(0.02));
  }
}

TEST_CASE("simgrid: an all-to-all-heavy plan is slower on an oversubscribed fat-tree, not on a non-blocking one") {
  // 8 DGX nodes on radix-8 switches: two scalable units of 4 nodes, so half of every GPU's
  // inter-node traffic crosses the spine. Expert parallelism over all 64 GPUs, a prefill-heavy step,
  // uniform routing (skewed routing would add stragglers, a different effect).
  double ratio[2] = {0, 0};
  int k = 0;
  for (const std::string spec : {"dgx-h100:8,radix=8", "dgx-h100:8,oversub=2,radix=8"}) {
    const Cluster& c = cluster(spec);
    StepProgram p = lowered("qwen3-30b-a3b", c, "ep=64,attn_dp=64", 64, 1000, 1024, "uniform", 0, {3, 4});
    Both b = run_both(c, p);
    ratio[k++] = b.ratio();
    MESSAGE(spec << ": analytic " << b.analytic.makespan * 1e3 << " ms, simgrid " << b.simgrid.makespan * 1e3
                 << " ms, ratio " << b.ratio() << ", flows " << b.report.flows << ", wall " << b.report.wall_seconds * 1e3
                 << " ms; " << describe(b.report));
    const int a2a = static_cast<int>(CollKind::AllToAll);
    if (c.fabric().oversubscription > 1) {
      CHECK(b.report.slowdown(a2a) > 1.05);
      const auto cls = static_cast<LinkClass>(b.report.most_loaded_class);
      CHECK((cls == LinkClass::LeafSpine || cls == LinkClass::SpineCore));
    } else {
      CHECK(b.report.slowdown(a2a) == doctest::Approx(1.0).epsilon(0.03));
      CHECK(b.report.most_loaded_class == static_cast<int>(LinkClass::NicLink));
    }
  }
  CHECK(ratio[0] == doctest::Approx(1.0).epsilon(0.03));
  CHECK(ratio[1] > 1.05);
}

namespace {

// Compares every StepTiming field; `eps` relative (absolute for values near 0: Approx's scale).
void check_same_timing(const StepTiming& x, const StepTiming& y, double eps) {
  CHECK(y.makespan == doctest::Approx(x.makespan).epsilon(eps));
  for (int k = 0; k < kNumOpClasses; ++k) {
    CAPTURE(to_string(static_cast<OpClass>(k)));
    CHECK(y.critical[static_cast<std::size_t>(k)] ==
          doctest::Approx(x.critical[static_cast<std::size_t>(k)]).epsilon(eps).scale(x.makespan));
    CHECK(y.busy[static_cast<std::size_t>(k)] == doctest::Approx(x.busy[static_cast<std::size_t>(k)]).epsilon(eps).scale(x.makespan));
  }
  for (int k = 0; k < 4; ++k)
    CHECK(y.coll_by_kind[static_cast<std::size_t>(k)] ==
          doctest::Approx(x.coll_by_kind[static_cast<std::size_t>(k)]).epsilon(eps).scale(x.makespan));
  CHECK(y.comm_busy == doctest::Approx(x.comm_busy).epsilon(eps).scale(x.makespan));
  CHECK(y.comm_exposed == doctest::Approx(x.comm_exposed).epsilon(eps).scale(x.makespan));
  CHECK(y.expert_time == doctest::Approx(x.expert_time).epsilon(eps).scale(x.makespan));
  CHECK(y.expert_imbalance == doctest::Approx(x.expert_imbalance).epsilon(eps).scale(x.makespan));
  CHECK(y.idle_on_path == doctest::Approx(x.idle_on_path).epsilon(eps).scale(x.makespan));
  REQUIRE(y.stage_time.size() == x.stage_time.size());
  for (std::size_t s = 0; s < x.stage_time.size(); ++s) CHECK(y.stage_time[s] == doctest::Approx(x.stage_time[s]).epsilon(eps));
}

}  // namespace

TEST_CASE("simgrid: the breakdown and timeline match the analytic executor's where nothing contends") {
  const Cluster& c = cluster("dgx-h100:1");
  AnalyticExecutor a(c);
  SimgridExecutor s(c);
  SUBCASE("dense, tensor parallel, two pipeline stages: identical to 1e-6") {
    StepProgram p = lowered("llama3-70b", c, "tp=4,pp=2", 16, 500, 128);
    std::vector<TimelineEvent> ta, ts;
    const StepTiming x = a.run(p, &ta), y = s.run(p, &ts);
    check_same_timing(x, y, 1e-6);
    REQUIRE(ts.size() == ta.size());
    for (std::size_t i = 0; i < ts.size(); ++i) {
      CHECK(ts[i].name == ta[i].name);
      CHECK(ts[i].rank == ta[i].rank);
      CHECK(ts[i].start == doctest::Approx(ta[i].start).epsilon(1e-6).scale(x.makespan));
      CHECK(ts[i].duration == doctest::Approx(ta[i].duration).epsilon(1e-6).scale(x.makespan));
    }
    // The same program again, after another one: the Engine's clock has moved on, the step's
    // results have not, to the last bit (SimgridWorld::kClockOrigin).
    const double clock = SimgridWorld::now();
    s.run(one_collective({0, 3, 5}, CollKind::AllGather, 12345));
    const StepTiming z = s.run(p);
    CHECK(SimgridWorld::now() > clock);
    CHECK(SimgridWorld::deterministic());
    CHECK(z.makespan == y.makespan);
    CHECK(z.critical == y.critical);
    CHECK(z.busy == y.busy);
    // Per kind, SimGrid's durations are the analytic ones (dates are multiples of 2^-36 s, so
    // microsecond operations agree to ~1e-5).
    const ContentionReport& r = s.last_contention();
    CHECK(r.slowdown(static_cast<int>(CollKind::AllReduce)) == doctest::Approx(1.0).epsilon(1e-5));
    CHECK(r.slowdown(kContentionSendSlot) == doctest::Approx(1.0).epsilon(1e-5));
    CHECK(r.ops[kContentionSendSlot] > 0);
    CHECK(r.analytic_makespan == doctest::Approx(x.makespan).epsilon(1e-12));
    CHECK(r.most_loaded_class == static_cast<int>(LinkClass::NvLink));
  }
  SUBCASE("MoE with skewed routing: uneven all-to-alls share NVLink max-min fairly, within 2%") {
    StepProgram p = lowered("mixtral-8x7b", c, "tp=2,ep=4,attn_dp=4", 8, 500, 128);
    const StepTiming x = a.run(p), y = s.run(p);
    check_same_timing(x, y, 0.02);
    const ContentionReport& r = s.last_contention();
    CHECK(r.ops[static_cast<std::size_t>(CollKind::AllToAll)] > 0);
    CHECK(r.slowdown(static_cast<int>(CollKind::AllToAll)) >= 1.0 - 1e-9);
    CHECK(r.slowdown(static_cast<int>(CollKind::AllToAll)) < 1.05);
  }
}

TEST_CASE("simgrid: a uniform all-to-all on two nodes keeps every NIC busy for the whole transfer") {
  const Cluster& c = cluster("dgx-h100:2");
  std::vector<int> gpus;
  for (int g = 0; g < 16; ++g) gpus.push_back(g);
  SimgridExecutor s(c);
  StepTiming t = s.run(one_collective(gpus, CollKind::AllToAll, 256 << 20));
  const ContentionReport& r = s.last_contention();
  const LinkClassLoad& nic = r.by_class[static_cast<std::size_t>(LinkClass::NicLink)];
  // Every GPU sends and receives 8/16 of its buffer over its NIC: 32 link-directions, equally loaded.
  CHECK(nic.links_used == 32);
  CHECK(nic.bytes == doctest::Approx(16 * 8 * 256.0 * (1 << 20) / 16.0 * 2).epsilon(1e-6));
  CHECK(nic.utilization == doctest::Approx(1.0).epsilon(0.02));
  CHECK(r.most_loaded_class == static_cast<int>(LinkClass::NicLink));
  // PXN: per destination GPU one network flow per other node; NVLink legs to the proxies.
  CHECK(r.flows == 16 /* network: 16 destinations × 1 other node */ + 16 * 7 /* NVLink */);
  CHECK(t.makespan > 0);
}

TEST_CASE("simgrid: platforms follow the cluster's routes and capacities, are shared, and can be added after runs") {
  SimgridWorld& w = SimgridWorld::instance();
  const Cluster& c = cluster("dgx-h100:2");
  SimgridPlatform& p = w.platform(c);
  const Cluster copy = load_cluster("dgx-h100:2");  // another object, same content
  CHECK(&w.platform(copy) == &p);
  CHECK(p.cluster().num_gpus() == 16);
  for (int id = 0; id < c.num_links(); ++id) {
    const LinkInfo& l = c.link(id);
    const double eff = l.cls == LinkClass::NvLink ? c.collective_efficiency().nvlink : c.collective_efficiency().network;
    CHECK(p.capacity(id) == doctest::Approx(l.bandwidth * eff));
  }
  for (auto [a, b] : {std::pair{0, 1}, std::pair{0, 8}, std::pair{3, 12}, std::pair{15, 0}}) {
    CAPTURE(a);
    CAPTURE(b);
    const Route r = c.route(a, b);
    const SimgridRoute& s = p.route(a, b);
    REQUIRE(s.dlinks.size() == r.links.size());
    for (std::size_t k = 0; k < r.links.size(); ++k) CHECK(s.dlinks[k] / 2 == r.links[k]);
    CHECK(s.latency == doctest::Approx(r.latency));
    CHECK(s.nvlink_only == r.nvlink_only);
    const double eff = r.nvlink_only ? c.collective_efficiency().nvlink : c.collective_efficiency().network;
    CHECK(s.bandwidth == doctest::Approx(r.bottleneck_bw * eff));
    // The reverse route uses the same links in the other direction.
    const SimgridRoute& back = p.route(b, a);
    REQUIRE(back.dlinks.size() == s.dlinks.size());
    CHECK((back.dlinks.front() ^ 1) == s.dlinks.back());
  }
  // A cluster never seen before, after a run: built on demand (SimGrid seals its root zone at the
  // first run; platform zones hang beside it), and it runs.
  SimgridExecutor(c).run(one_collective({0, 9}, CollKind::AllReduce, 1 << 20));
  const Cluster& late = cluster("dgx-h100:3,oversub=2");
  const std::size_t before = w.num_platforms();
  SimgridExecutor s(late);
  CHECK(w.num_platforms() == before + 1);
  StepTiming t = s.run(one_collective({0, 8, 16}, CollKind::AllReduce, 1 << 20, CollAlgo::Ring));
  CHECK(t.makespan == doctest::Approx(collective_time(late, CollKind::AllReduce, {0, 8, 16}, 1 << 20, CollAlgo::Ring).seconds)
                          .epsilon(1e-6));
}

TEST_CASE("simgrid: malformed programs are refused before anything runs") {
  const Cluster& c = cluster("dgx-h100:1");
  SimgridExecutor s(c);
  StepProgram p = one_collective({0, 1}, CollKind::AllReduce, 1e6);
  p.rank_gpu[1] = 8;  // dgx-h100:1 has GPUs 0..7
  CHECK_THROWS_AS(s.run(p), std::invalid_argument);
  StepProgram q = one_collective({0, 1, 2}, CollKind::AllToAll, 1e6);
  q.ops[0].matrix = 0;
  q.a2a.push_back(A2aMatrix::from_dense(std::vector<double>(4, 1.0)));  // 2×2 for a group of 3
  CHECK_THROWS_AS(s.run(q), std::invalid_argument);
  StepProgram r = one_collective({0, 1}, CollKind::AllReduce, 1e6);
  r.rank_gpu[1] = 0;  // two ranks on one GPU
  CHECK_THROWS_AS(s.run(r), std::invalid_argument);
  StepProgram d = one_collective({0, 1}, CollKind::AllReduce, 1e6);
  d.deps.push_back(0);  // operation 0 depending on itself
  d.ops[0].dep_end = 1;
  CHECK_THROWS_AS(s.run(d), std::invalid_argument);
  // A folded program (one layer standing for several) would run its layer once: refused.
  StepProgram f = one_collective({0, 1}, CollKind::AllReduce, 1e6);
  f.ops[0].weight = 80;
  CHECK_THROWS_AS(s.run(f), std::logic_error);
  // The executor is still usable afterwards.
  CHECK(s.run(one_collective({0, 1}, CollKind::AllReduce, 1e6)).makespan > 0);
}

TEST_CASE("simgrid: release times hold operations back as in the analytic executor") {
  // Two sends out of GPU 0 to two nodes: the second is released after the first has ended, a
  // third (to node 1 again) is released while the second still runs and queues behind it.
  const Cluster& c = cluster("dgx-h100:3");
  StepProgram p;
  p.rank_gpu = {0, 8, 16};
  auto send = [&](int to, double bytes, double at) {
    StepOp op;
    op.type = OpType::Send;
    op.cls = OpClass::PipelineP2p;
    op.rank = 0;
    op.peer = to;
    op.bytes = bytes;
    op.not_before = at;
    return p.add(op, {});
  };
  send(1, 50e6, 0.010);
  send(2, 50e6, 0.050);
  send(1, 50e6, 0.0505);
  AnalyticExecutor a(c);
  SimgridExecutor s(c);
  std::vector<TimelineEvent> ta;
  a.run(p, &ta);
  s.run(p);
  const std::vector<double>& ends = s.last_op_ends();
  REQUIRE(ends.size() == 3);
  const double alone = a.op_time(p, p.ops[0]);
  REQUIRE(alone > 1e-3);  // 50 MB over a 400 Gb/s NIC: about a millisecond
  CHECK(ta[0].start == doctest::Approx(0.010));
  CHECK(ends[0] == doctest::Approx(0.010 + alone).epsilon(0.02));
  CHECK(ends[1] == doctest::Approx(0.050 + alone).epsilon(0.02));
  CHECK(ends[2] == doctest::Approx(0.050 + 2 * alone).epsilon(0.02));  // queued on GPU 0's stream
  CHECK(ta[4].start == doctest::Approx(0.050 + alone));
}

TEST_CASE("simgrid: KV transfers between pools share an oversubscribed spine, the analytic timer does not see it") {
  // Prefill pool on the first scalable unit (nodes 0–3), decode pool on the second (nodes 4–7):
  // four hand-overs at once, each 8 GPU-to-GPU flows, all 32 across the 2:1 oversubscribed spine.
  const Cluster& c = cluster("dgx-h100:8,oversub=2,radix=8");
  const ModelSpec m = load_model("mixtral-8x7b");
  const Plan p = plan_from_string("prefill:tp=8,dp=4/decode:tp=8,dp=4", c.num_gpus(), plan_defaults(m));
  std::vector<KvHandoff> hs;
  for (int i = 0; i < 4; ++i) hs.push_back(KvHandoff{i, i, i, 0, 8000, 0.001});
  KvTransferProgram t = kv_transfer_program(p, plan_memory(p.decode(), m, c), hs);
  REQUIRE(t.program.ops.size() == 32);
  const std::vector<double> analytic = handoff_arrivals(t, analytic_transfer_timer(c)(t.program), hs.size());
  SimgridExecutor s(c);
  s.run(t.program);
  const std::vector<double> simgrid = handoff_arrivals(t, s.last_op_ends(), hs.size());
  AnalyticExecutor a(c);
  const double alone = a.op_time(t.program, t.program.ops[0]);
  for (std::size_t i = 0; i < hs.size(); ++i) {
    CHECK(analytic[i] == doctest::Approx(0.001 + alone));  // distinct GPUs: nothing queues
    CHECK(simgrid[i] - 0.001 > 1.5 * alone);                // half the spine for every flow
  }
}

TEST_CASE("simgrid: an all-to-all into one hot GPU is forwarded on the receive side, in both executors") {
  // Every GPU of node 0 sends 64 MB to GPU 8 (node 1, rail 0). Send-side PXN would push all 512 MB
  // through rail 0's NICs; receive-side forwarding sends each GPU's bytes on its own rail and fans
  // them in over node 1's NVLink.
  const Cluster& c = cluster("dgx-h100:2");
  const double B = 64e6;
  std::vector<int> gpus(16);
  std::iota(gpus.begin(), gpus.end(), 0);
  A2aMatrix hot(16);
  for (std::uint32_t i = 0; i < 8; ++i) hot.push(i, 8, B);
  const A2aMatrix uniform = A2aMatrix::uniform(16, B / 16);
  CollectiveModel m;
  CHECK(all_to_all_routing(c, gpus, hot, m) == A2aRouting::ReceiveSide);
  CHECK(all_to_all_routing(c, gpus, uniform, m) == A2aRouting::SendSide);
  const double nic = c.injection_bw(0) * c.collective_efficiency().network;
  const double nv = c.gpu().nvlink_bw * m.a2a_nvlink_efficiency;
  const double t = all_to_all_time(c, gpus, hot, m);
  CHECK(t < 8 * B / nic);                                     // what send-side PXN would take at least
  CHECK(t > std::max(B / nic, 7 * B / nv));                   // one rail each, 7 forwarded over NVLink
  CHECK(t < std::max(B / nic, 7 * B / nv) * 1.05 + 1e-4);
  StepProgram p;
  p.rank_gpu = gpus;
  std::vector<int> ranks(16);
  std::iota(ranks.begin(), ranks.end(), 0);
  StepOp op;
  op.type = OpType::Collective;
  op.cls = OpClass::EpDispatch;
  op.coll = CollKind::AllToAll;
  op.group = p.add_group(ranks);
  p.a2a.push_back(hot);
  op.matrix = 0;
  p.add(op, {});
  Both b = run_both(c, p);
  CHECK(b.analytic.makespan == doctest::Approx(t));
  CHECK(b.ratio() == doctest::Approx(1.0).epsilon(0.03));
}
