// tests/sim/step/lowering_test.cpp — step programs: hand-computed flops/bytes and collective times,
// and routing that shapes the MoE step.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "sim/step/analytic_executor.hpp"
#include "sim/step/collective_cost.hpp"
#include "sim/step/compute_cost.hpp"
#include "topologies/gpu_spec.hpp"
#include "sim/step/lowering.hpp"
#include "sim/plan/plan.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

ModelSpec tiny(bool moe) {
  ModelSpec m;
  m.name = moe ? "tiny-moe" : "tiny-dense";
  m.layers = 1;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.head_dim = 16;
  m.attention = AttentionKind::GQA;
  m.vocab = 100;
  m.max_positions = 4096;
  if (moe) {
    m.experts = 4;
    m.top_k = 2;
    m.expert_ffn = 32;
  } else {
    m.dense_ffn = 128;
    m.dense_layers = {0};
  }
  return m;
}

// A plan on a cluster, as the lowering tests that compare two ways of pricing a step list them.
struct LoweringCase {
  const char* model;
  const char* cluster;
  const char* plan;
  int gpus;
};

double flops_of(const StepProgram& p, OpClass c) {
  double f = 0;
  for (const auto& op : p.ops)
    if (op.type == OpType::Compute && op.cls == c) f += op.flops;
  return f;
}

}  // namespace

TEST_CASE("all-to-all matrix: sparse entries in (sender, receiver) order, dense round trip") {
  const std::vector<double> dense = {0, 2, -0.0, 0, 0, 5, 7, 0, 0};  // 3×3
  const A2aMatrix m = A2aMatrix::from_dense(dense);
  CHECK(m.members() == 3);
  REQUIRE(m.entries().size() == 4);  // +0.0 is no entry; −0.0 is one
  CHECK(m.entries()[0].from == 0);
  CHECK(m.entries()[0].to == 1);
  CHECK(m.entries()[3].from == 2);
  CHECK(m.entries()[3].to == 0);
  CHECK(m.at(1, 2) == 5);
  CHECK(m.at(2, 2) == 0);
  CHECK(std::signbit(m.at(0, 2)));
  const std::vector<double> back = m.dense();
  CHECK(std::memcmp(back.data(), dense.data(), dense.size() * sizeof(double)) == 0);
  CHECK_THROWS_AS(A2aMatrix::from_dense(std::vector<double>(5, 1.0)), std::invalid_argument);

  A2aMatrix built(3);
  built.push(0, 2, 1);
  CHECK_THROWS_AS(built.push(0, 1, 1), std::logic_error);  // before the last pair
  CHECK_THROWS_AS(built.push(0, 2, 1), std::logic_error);  // the same pair twice
  CHECK_THROWS_AS(built.push(3, 0, 1), std::logic_error);  // outside the group
  built.push(1, 0, 1);
  CHECK(built.entries().size() == 2);

  const A2aMatrix u = A2aMatrix::uniform(4, 3.0);
  CHECK(u.entries().size() == 12);  // every ordered pair but the diagonal
  CHECK(u.at(1, 1) == 0);
  CHECK(u.at(3, 2) == 3.0);
}

TEST_CASE("lowering: flops of one dense layer, worked by hand") {
  ModelSpec m = tiny(false);
  Cluster c = load_cluster("dgx-h100:1");
  Plan plan = plan_from_string("tp=1", 8, {});
  Lowering low(plan, m, c, nullptr);
  ReplicaBatch batch{{{SeqWork{0, 0, 10, 0, true, 0}}}};
  StepProgram p = low.lower(batch);
  CHECK(p.num_ranks() == 1);
  // QKV: 10 tokens × 64 × (4+4+4)·16 outputs × 2 flops.
  CHECK(flops_of(p, OpClass::QkvProj) == doctest::Approx(2.0 * 10 * 64 * 192));
  CHECK(flops_of(p, OpClass::AttnOutProj) == doctest::Approx(2.0 * 10 * 64 * 64));
  // Causal attention over 10 new tokens, no context: Σ_i (i+1) = 55 query-key pairs per head,
  // QK and PV each 2 flops per pair per dim: 2 · 10 · (0 + 11/2) · 4 heads · (16 + 16).
  CHECK(flops_of(p, OpClass::Attention) == doctest::Approx(2.0 * 10 * 5.5 * 4 * 32));
  // SwiGLU: gate+up 2·10·64·128·2, down 2·10·128·64.
  CHECK(flops_of(p, OpClass::DenseFfn) == doctest::Approx(2.0 * 10 * 64 * 256 + 2.0 * 10 * 128 * 64));
  // LM head for the one emitting sequence.
  CHECK(flops_of(p, OpClass::LmHead) == doctest::Approx(2.0 * 64 * 100));
  // One rank: no collectives at all.
  for (const auto& op : p.ops) CHECK(op.type == OpType::Compute);
}

TEST_CASE("lowering: TP inserts one all-reduce per block — replicated QKV inserts a gather") {
  ModelSpec m = tiny(false);
  Cluster c = load_cluster("dgx-h100:1");
  auto count = [&](const std::string& text, CollKind k) {
    Lowering low(plan_from_string(text, 8, {}), m, c, nullptr);
    StepProgram p = low.lower(ReplicaBatch{{{SeqWork{0, 0, 8, 0, false, 0}}}});
    int n = 0;
    for (const auto& op : p.ops) n += op.type == OpType::Collective && op.coll == k;
    return n;
  };
  // Megatron: embedding (vocab-parallel) + attention out + FFN down = 3 all-reduces.
  CHECK(count("tp=4", CollKind::AllReduce) == 3);
  CHECK(count("tp=4", CollKind::AllGather) == 0);
  // Sequence parallelism: each all-reduce becomes reduce-scatter + all-gather before the next block.
  CHECK(count("tp=4,sp=4", CollKind::AllReduce) == 0);
  CHECK(count("tp=4,sp=4", CollKind::ReduceScatter) == 3);
  CHECK(count("tp=4,sp=4", CollKind::AllGather) == 2);
  // Column-parallel output projection needs the heads gathered first and its output gathered after.
  CHECK(count("tp=4,attn_out=column", CollKind::AllGather) == 2);
  CHECK(count("tp=4,attn_out=column", CollKind::AllReduce) == 2);
}

TEST_CASE("lowering: ring all-reduce and all-to-all on a 2-node cluster, by hand") {
  Cluster c = load_cluster("dgx-h100:2");
  const auto& eff = c.collective_efficiency();
  // GPU 0 and GPU 8: same rail, different nodes: NIC 50 GB/s × network efficiency. NCCL's tuner
  // with one GPU per node: the Simple protocol at 1 GiB, two network steps priced at the tree's
  // network latency, the multi-node ring's "plateau" factor on the latency.
  Route r = c.route(0, 8);
  double B = 50e9 * eff.network, alpha = r.latency + CollectiveModel{}.step_overhead;
  double S = 1 << 30;
  const CollectiveModel cm;
  const NcclTuning& t = cm.nccl;
  CollectiveTime ring = collective_time(c, CollKind::AllReduce, {0, 8}, S, CollAlgo::Ring);
  CHECK(ring.proto == CollProto::Simple);
  CHECK(ring.seconds == doctest::Approx((t.base_ring[2] + 2 * t.net_tree[2]) * t.ring_plateau * 1e-6 + 2 * S / (2 * B)).epsilon(1e-9));
  // 8 GPUs of one node, ring: base + 14 NVLink steps + 2·7/8·S/B_nvlink.
  double Bn = 450e9 * eff.nvlink;
  CollectiveTime r8 = collective_time(c, CollKind::AllReduce, {0, 1, 2, 3, 4, 5, 6, 7}, S, CollAlgo::Ring);
  CHECK(r8.seconds == doctest::Approx((t.base_ring[2] + 14 * t.nvlink_ring[2]) * 1e-6 + 14 * S / (8 * Bn)).epsilon(1e-9));
  // A small all-reduce takes LL, the low-latency protocol: base 6.6 µs + 14 × 0.6 µs and half the bandwidth.
  CollectiveTime small = collective_time(c, CollKind::AllReduce, {0, 1, 2, 3, 4, 5, 6, 7}, 8192, CollAlgo::Ring);
  CHECK(small.proto == CollProto::LL);
  CHECK(small.latency == doctest::Approx((t.base_ring[0] + 14 * t.nvlink_ring[0]) * 1e-6));
  // All-to-all between 2 GPUs of one node and 2 of the other: each sends 1 MB to each peer;
  // NVLink and NIC carry their shares at once, the NIC (2 MB at 45 GB/s) is the bottleneck.
  std::vector<int> g = {0, 1, 8, 9};
  std::vector<double> mat(16, 1e6);
  for (int i = 0; i < 4; ++i) mat[i * 4 + i] = 0;
  const A2aMatrix big = A2aMatrix::from_dense(mat);
  CHECK(all_to_all_call_latency(big, cm) == cm.a2a_call_latency);  // 1 MB a peer: Simple
  double a2a = all_to_all_time(c, g, big);
  CHECK(a2a == doctest::Approx(cm.a2a_call_latency + alpha + 2e6 / B).epsilon(1e-9));
  // 16 KiB a peer or less: NCCL's send/recv takes LL, whose call is 1.8 + 2.8 µs cheaper in its tuner.
  for (double& x : mat) x = x > 0 ? 16384 : 0;
  const A2aMatrix small_a2a = A2aMatrix::from_dense(mat);
  CHECK(all_to_all_call_latency(small_a2a, cm) == doctest::Approx(cm.a2a_call_latency - 4.6e-6));
  CHECK(collective_time(c, CollKind::AllToAll, g, 4 * 16384.0).proto == CollProto::LL);
  for (double& x : mat) x = x > 0 ? 16385 : 0;
  CHECK(all_to_all_call_latency(A2aMatrix::from_dense(mat), cm) == cm.a2a_call_latency);
}

TEST_CASE("collectives: NCCL's choice of algorithm and protocol follows the message size and the node count") {
  const Cluster one = load_cluster("dgx-h100:1");
  const Cluster four = load_cluster("dgx-h100:4");
  std::vector<int> eight, thirty_two;
  for (int g = 0; g < 8; ++g) eight.push_back(g);
  for (int g = 0; g < 32; ++g) thirty_two.push_back(g);
  auto pick = [](const Cluster& c, const std::vector<int>& g, CollKind k, double bytes) { return collective_time(c, k, g, bytes); };
  // Inside a node: LL for small messages, LL128 in the middle, Simple or NVLS when bandwidth rules.
  CHECK(pick(one, eight, CollKind::AllGather, 8 << 10).proto == CollProto::LL);
  CHECK(pick(one, eight, CollKind::AllGather, 16 << 20).proto == CollProto::LL128);
  CHECK(pick(one, eight, CollKind::AllGather, 256 << 20).proto == CollProto::Simple);
  CHECK(pick(one, eight, CollKind::AllReduce, 256 << 20).algo == CollAlgo::Nvls);
  // Across four nodes a 1 MiB all-reduce takes the tree (log2 of the nodes' network steps instead of
  // the ring's 2(n−1)), and each step across nodes costs NCCL's network latency, not the route's.
  const CollectiveTime t = pick(four, thirty_two, CollKind::AllReduce, 1 << 20);
  CHECK(t.algo == CollAlgo::Tree);
  const CollectiveTime ring = collective_time(four, CollKind::AllReduce, thirty_two, 1 << 20, CollAlgo::Ring);
  CHECK(ring.latency > t.latency);
  CHECK(ring.latency > 6 * NcclTuning{}.net_ring[0] * 1e-6);
  // Time grows with the size, whatever is picked.
  double last = 0;
  for (double b = 1024; b <= (1 << 30); b *= 4) {
    const double s = pick(four, thirty_two, CollKind::AllReduce, b).seconds;
    CHECK(s > last);
    last = s;
  }
}

TEST_CASE("collectives: an engine's own all-reduce runs where it allows it and beats NCCL, NCCL elsewhere") {
  const Cluster h100 = load_cluster("dgx-h100:2");
  const Cluster b200 = load_cluster("dgx-b200:1");
  std::vector<int> eight, six, two_nodes;
  for (int g = 0; g < 8; ++g) eight.push_back(g);
  for (int g = 0; g < 6; ++g) six.push_back(g);
  for (int g = 0; g < 16; g += 4) two_nodes.push_back(g);  // GPUs 0, 4 on node 0 and 8, 12 on node 1
  auto t = [](const Cluster& c, const std::vector<int>& g, double bytes, AllReduceKernels k) {
    return collective_time(c, CollKind::AllReduce, g, bytes, CollAlgo::Auto, {}, k);
  };
  // A decode step's all-reduce (one token of a 7,168-wide model, BF16) inside an H100 node:
  // TensorRT-LLM's one-shot, α + 7·S/(η₁·NVLink), instead of NCCL's LL ring.
  const double s = 7168 * 2;
  const CustomAllReduce& k = custom_allreduce(AllReduceKernels::Trtllm);
  const CollectiveTime one = t(h100, eight, s, AllReduceKernels::Trtllm);
  CHECK(one.algo == CollAlgo::OneShot);
  CHECK(one.seconds == doctest::Approx(k.alpha_nvlink4 + 7 * k.per_peer + 7 * s / (k.one_shot_eff * 450e9)));
  const CollectiveTime nccl = t(h100, eight, s, AllReduceKernels::Nccl);
  CHECK(nccl.algo == CollAlgo::Ring);
  CHECK(one.seconds < 0.5 * nccl.seconds);
  // NVLink 5's base latency on a B200.
  CHECK(t(b200, eight, s, AllReduceKernels::Trtllm).latency == doctest::Approx(k.alpha_nvlink5 + 7 * k.per_peer));
  // vLLM's two-shot takes over in the middle; above its 8 MiB workspace NCCL runs.
  CHECK(t(h100, eight, 4 << 20, AllReduceKernels::Vllm).algo == CollAlgo::TwoShot);
  const CollectiveTime big = t(h100, eight, 64 << 20, AllReduceKernels::Vllm);
  CHECK(big.algo != CollAlgo::OneShot);
  CHECK(big.algo != CollAlgo::TwoShot);
  CHECK(big.seconds == t(h100, eight, 64 << 20, AllReduceKernels::Nccl).seconds);
  // Group sizes the engine does not support (TensorRT-LLM's table has 2, 4, 8), and groups across
  // NVLink domains, run NCCL's.
  CHECK(t(h100, six, s, AllReduceKernels::Trtllm).seconds == t(h100, six, s, AllReduceKernels::Nccl).seconds);
  CHECK(t(h100, six, s, AllReduceKernels::Vllm).algo == CollAlgo::OneShot);
  CHECK(t(h100, two_nodes, s, AllReduceKernels::Sglang).seconds == t(h100, two_nodes, s, AllReduceKernels::Nccl).seconds);
  // Other collectives, and forced algorithms, are NCCL's.
  CHECK(collective_time(h100, CollKind::AllGather, eight, s, CollAlgo::Auto, {}, AllReduceKernels::Trtllm).algo == CollAlgo::Ring);
  CHECK(collective_time(h100, CollKind::AllReduce, eight, s, CollAlgo::Tree, {}, AllReduceKernels::Trtllm).algo == CollAlgo::Tree);
}

TEST_CASE("lowering: a step program carries its engine's all-reduce kernels, and a TP decode step is faster with them") {
  const ModelSpec m = tiny(false);
  const Cluster c = load_cluster("dgx-h100:1");
  const Plan nccl = plan_from_string("tp=8,engine=trtllm,allreduce=nccl", 8, {});
  const Plan own = plan_from_string("tp=8,engine=trtllm", 8, {});
  CHECK(own.engine.allreduce == AllReduceKernels::Trtllm);
  CHECK(plan_from_string("tp=8,engine=sglang", 8, {}).engine.allreduce == AllReduceKernels::Sglang);
  CHECK(plan_from_string("tp=8", 8, {}).engine.allreduce == AllReduceKernels::Vllm);
  ReplicaBatch batch;
  batch.groups.resize(1);
  for (int i = 0; i < 4; ++i) batch.groups[0].push_back(SeqWork{i, 1000, 1, 1000, true, 0});
  const Lowering lo_nccl(nccl, m, c, nullptr, 0), lo_own(own, m, c, nullptr, 0);
  const StepProgram a = lo_nccl.lower(batch), b = lo_own.lower(batch);
  CHECK(a.allreduce == AllReduceKernels::Nccl);
  CHECK(b.allreduce == AllReduceKernels::Trtllm);
  const AnalyticExecutor ex(c);
  const StepTiming ta = ex.run(a), tb = ex.run(b);
  const double tp_a = ta.busy[static_cast<std::size_t>(OpClass::TpComm)], tp_b = tb.busy[static_cast<std::size_t>(OpClass::TpComm)];
  CHECK(tp_b < 0.5 * tp_a);
  CHECK(tb.makespan == doctest::Approx(ta.makespan - (tp_a - tp_b)).epsilon(0.02));
}

TEST_CASE("lowering: skewed routing makes a longer MoE step than uniform routing") {
  ModelSpec m = tiny(true);
  m.layers = 2;
  m.dense_layers = {};
  m.experts = 16;
  m.top_k = 2;
  m.hidden = 1024;
  m.expert_ffn = 2048;
  m.heads = 8;
  m.kv_heads = 8;
  m.head_dim = 128;
  Cluster c = load_cluster("dgx-h100:1");
  Plan plan = plan_from_string("tp=1,attn_dp=8,ep=8", 8, {});
  AnalyticExecutor ex(c);
  auto run = [&](const std::string& spec) {
    auto routing = make_routing(spec, m.routing_shape());
    Lowering low(plan, m, c, routing.get());
    ReplicaBatch batch;
    batch.groups.resize(8);
    for (int a = 0; a < 8; ++a)
      for (int q = 0; q < 32; ++q)
        batch.groups[a].push_back(SeqWork{static_cast<std::uint32_t>(a * 32 + q), 100, 1, 100, true, 0});
    return ex.run(low.lower(batch));
  };
  StepTiming uniform = run("uniform");
  StepTiming skewed = run("synthetic:zipf=1.5,locality=0,beta=0,seed=3");
  CHECK(skewed.makespan > uniform.makespan);
  CHECK(skewed.expert_imbalance > uniform.expert_imbalance);
  CHECK(skewed.critical[static_cast<int>(OpClass::Experts)] > uniform.critical[static_cast<int>(OpClass::Experts)]);
}

TEST_CASE("lowering: one MoE layer's expert flops and bytes, worked by hand") {
  ModelSpec m = tiny(true);  // 4 experts of width 32, top-2, hidden 64
  Cluster c = load_cluster("dgx-h100:1");
  Plan plan = plan_from_string("tp=1", 8, {});
  // Three tokens of one request pick experts {0,1}, {0,2}, {0,1}: six copies, three active experts.
  RoutingShape shape = m.routing_shape();
  std::vector<std::uint32_t> counts = {3};
  std::vector<ExpertId> ids = {0, 1, 0, 2, 0, 1};
  RoutingTraceFile routing(encode_routing_trace(shape, counts, ids), "hand.ssrt");
  Lowering low(plan, m, c, &routing);
  StepProgram p = low.lower(ReplicaBatch{{{SeqWork{0, 0, 3, 0, false, 0}}}});
  // SwiGLU experts: 6 copies × 2 flops × 64 × 32 × 3 matrices.
  CHECK(flops_of(p, OpClass::Experts) == doctest::Approx(6.0 * 2 * 64 * 32 * 3));
  double bytes = 0;
  for (const auto& op : p.ops)
    if (op.cls == OpClass::Experts) bytes += op.hbm_bytes;
  // Weights of the 3 active experts (3·64·32 bf16 elements each) + activations: gate/up reads 64
  // and writes 2·32 per copy, down reads 32 and writes 64 per copy, 2 bytes each.
  CHECK(bytes == doctest::Approx(3 * 3 * 64 * 32 * 2.0 + 6 * (64 + 64) * 2.0 + 6 * (32 + 64) * 2.0));
  // Router: 3 tokens × 64 × 4 experts × 2.
  CHECK(flops_of(p, OpClass::Router) == doctest::Approx(2.0 * 3 * 64 * 4));
}

TEST_CASE("lowering: shared experts run while the dispatch all-to-all is in flight") {
  ModelSpec m = load_model("deepseek-v3");
  Cluster c = load_cluster("dgx-h100:1");
  Plan plan = plan_from_string("tp=1,attn_dp=8,ep=8", 8, plan_defaults(m));
  auto routing = make_routing("uniform", m.routing_shape());
  Lowering low(plan, m, c, routing.get());
  ReplicaBatch batch;
  batch.groups.resize(8);
  for (int a = 0; a < 8; ++a)
    for (int q = 0; q < 64; ++q) batch.groups[a].push_back(SeqWork{static_cast<std::uint32_t>(a * 64 + q), 500, 1, 500, true, 0});
  StepProgram p = low.lower(batch);
  // In program order the shared experts of a layer come after its dispatch and before its experts.
  int dispatch = -1, shared = -1, experts = -1;
  for (int i = 0; i < static_cast<int>(p.ops.size()); ++i) {
    const StepOp& op = p.ops[static_cast<std::size_t>(i)];
    if (op.layer != 5) continue;
    if (op.cls == OpClass::EpDispatch && dispatch < 0) dispatch = i;
    if (op.cls == OpClass::SharedExperts && shared < 0) shared = i;
    if (op.cls == OpClass::Experts && experts < 0) experts = i;
  }
  REQUIRE(dispatch >= 0);
  CHECK(dispatch < shared);
  CHECK(shared < experts);
  StepTiming t = AnalyticExecutor(c).run(p);
  CHECK(t.comm_exposed < t.comm_busy);  // some communication is hidden under the shared experts
  // Without shared experts nothing overlaps the dispatch in one micro-batch.
  ModelSpec no_shared = m;
  no_shared.shared_experts = 0;
  Lowering low2(plan, no_shared, c, routing.get());
  StepTiming t2 = AnalyticExecutor(c).run(low2.lower(batch));
  CHECK(t2.comm_exposed == doctest::Approx(t2.comm_busy));
}

TEST_CASE("lowering: one kernel per TP group times a step as one kernel per rank does, with fewer operations") {
  const LoweringCase cases[] = {
      {"llama3-70b", "dgx-h100:1", "tp=4,dp=2", 8},                        // dense
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,ep=4,attn_dp=4", 8},            // TP inside attention-DP, EP
      {"mixtral-8x7b", "dgx-h100:1", "tp=4,etp=2,ep=2,pp=2", 8},           // expert-TP groups, two stages
      {"deepseek-v3", "dgx-h100:2", "tp=8,ep=16,attn_dp=2", 16},           // MLA, shared experts, uneven groups
  };
  for (const LoweringCase& k : cases) {
    CAPTURE(k.plan);
    const ModelSpec m = load_model(k.model);
    const Cluster c = load_cluster(k.cluster);
    const Plan plan = plan_from_string(k.plan, k.gpus, plan_defaults(m));
    auto routing = m.is_moe() ? make_routing("synthetic:seed=4", m.routing_shape()) : nullptr;
    LoweringOptions per_rank, grouped;
    per_rank.fold_moe_layers = grouped.fold_moe_layers = 8;
    grouped.group_compute = true;
    const Lowering a(plan, m, c, routing.get(), 0, per_rank), b(plan, m, c, routing.get(), 0, grouped);
    ReplicaBatch batch;
    batch.groups.resize(static_cast<std::size_t>(plan.deg.attn_dp));
    std::uint32_t req = 0;
    for (std::size_t g = 0; g < batch.groups.size(); ++g) {
      for (int q = 0; q < 5 + 3 * static_cast<int>(g); ++q)  // groups of different sizes and contexts
        batch.groups[g].push_back(SeqWork{req++, 300, 1, 300 + 50 * q, true, 0});
      batch.groups[g].push_back(SeqWork{req++, 0, 200, 0, false, 0});  // a prompt chunk
    }
    const StepProgram pa = a.lower(batch), pb = b.lower(batch);
    CHECK(pb.ops.size() < pa.ops.size());
    AnalyticExecutor ex(c);
    const StepTiming ta = ex.run(pa), tb = ex.run(pb);
    auto same = [](double x, double y) { return std::abs(x - y) <= 1e-12 * std::max(1.0, std::abs(x)); };
    CHECK(same(ta.makespan, tb.makespan));
    for (int i = 0; i < kNumOpClasses; ++i) {
      CAPTURE(i);
      CHECK(same(ta.critical[i], tb.critical[i]));
      CHECK(same(ta.busy[i], tb.busy[i]));
    }
    CHECK(same(ta.comm_busy, tb.comm_busy));
    CHECK(same(ta.comm_exposed, tb.comm_exposed));
    CHECK(same(ta.expert_time, tb.expert_time));
    CHECK(same(ta.expert_imbalance, tb.expert_imbalance));
    CHECK(same(ta.idle_on_path, tb.idle_on_path));
    // The attention estimate the fast path swaps in is the same too.
    StepProgram qa, qb;
    a.lower_attention(batch, qa);
    b.lower_attention(batch, qb);
    CHECK(same(ex.run(qa).makespan, ex.run(qb).makespan));
  }
}

TEST_CASE("lowering: the attention priced at once equals its program run by the executor, to the bit") {
  // Lowering::price_attention stands for lower_attention() + AnalyticExecutor::run in the serving
  // loop; per rank or grouped, with stages, attention-DP groups of different sizes, and a
  // two-batch-overlap step whose node-level all-to-alls leave the kernels part of the GPU.
  const LoweringCase cases[] = {
      {"llama3-70b", "dgx-h100:1", "tp=4,pp=2", 8},
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,ep=4,attn_dp=4", 8},
      {"deepseek-v3", "dgx-h100:2", "tp=8,ep=16,attn_dp=2", 16},
      {"deepseek-v3", "dgx-h100:4", "tp=1,ep=32,attn_dp=32,two_batch_overlap=on,a2a=per-node", 32},
  };
  for (const LoweringCase& k : cases) {
    const ModelSpec m = load_model(k.model);
    const Cluster c = load_cluster(k.cluster);
    const Plan plan = plan_from_string(k.plan, k.gpus, plan_defaults(m));
    auto routing = m.is_moe() ? make_routing("synthetic:seed=4", m.routing_shape()) : nullptr;
    AnalyticExecutor ex(c);
    for (bool group : {false, true}) {
      CAPTURE(k.plan);
      CAPTURE(group);
      LoweringOptions o;
      o.fold_moe_layers = 8;
      o.group_compute = group;
      const Lowering lo(plan, m, c, routing.get(), 0, o);
      ReplicaBatch batch;
      batch.groups.resize(static_cast<std::size_t>(plan.deg.attn_dp));
      std::uint32_t req = 0;
      for (std::size_t g = 0; g < batch.groups.size(); ++g) {
        for (int q = 0; q < 3 + 2 * static_cast<int>(g % 5); ++q) batch.groups[g].push_back(SeqWork{req++, 300, 1, 300 + 70 * q, true, 0});
        if (g % 2 == 0) batch.groups[g].push_back(SeqWork{req++, 0, 700, 0, false, 0});  // prompt chunks in some groups
      }
      StepProgram p;
      lo.lower_attention(batch, p);
      const StepTiming t = ex.run(p);
      double critical = 0;
      for (double st : t.stage_time) critical += st;
      const AttentionCost a = lo.price_attention(batch, ex);
      CHECK(critical > 0);
      if (plan.engine.two_batch_overlap) CHECK(p.compute_share < 1);  // the case it exercises
      CHECK(a.critical == critical);
      CHECK(a.busy == t.busy[static_cast<std::size_t>(OpClass::Attention)]);
      CHECK(a.tensor_work == t.tensor_work);
      CHECK(a.hbm_work == t.hbm_work);
    }
  }
}

TEST_CASE("lowering: prompt attention runs in FP8 on an FP8 KV cache, MLA's and decode attention in BF16") {
  Cluster c = load_cluster("dgx-h100:1");
  auto attention_math = [&](const ModelSpec& m, const char* plan_text, bool decode) {
    Plan plan = plan_from_string(plan_text, 8, plan_defaults(m));
    Lowering low(plan, m, c, nullptr);
    ReplicaBatch batch{{{decode ? SeqWork{0, 4096, 1, 4096, true, 0} : SeqWork{0, 0, 4096, 0, true, 0}}}};
    StepProgram p = low.lower(batch);
    std::vector<Dtype> seen;
    for (const auto& op : p.ops)
      if (op.type == OpType::Compute && op.cls == OpClass::Attention) seen.push_back(op.math);
    REQUIRE(!seen.empty());
    for (Dtype d : seen) CHECK(d == seen.front());
    return seen.front();
  };
  const ModelSpec llama = load_model("llama3-70b"), deepseek = load_model("deepseek-v3");
  CHECK(attention_math(llama, "tp=8,kv=fp8", false) == Dtype::FP8);
  CHECK(attention_math(llama, "tp=8,kv=bf16", false) == Dtype::BF16);
  CHECK(attention_math(llama, "tp=8,kv=fp8", true) == Dtype::BF16);
  CHECK(attention_math(deepseek, "tp=8,ep=8,kv=fp8", false) == Dtype::BF16);
  // And the FP8 curve is the faster one at a long prompt (TensorRT-LLM's table: 1.34× at 8K tokens).
  const GpuSpec& h100 = gpu_preset("H100-SXM-80GB");
  const double s = 8192, flops = s * (s + 1) * 64 * 256;
  const double bf16 = compute_time(h100, ComputeKind::PrefillAttention, s, flops, 0, Dtype::BF16);
  const double fp8 = compute_time(h100, ComputeKind::PrefillAttention, s, flops, 0, Dtype::FP8);
  CHECK(bf16 / fp8 == doctest::Approx(2165.35 / 1616.12).epsilon(0.05));
}
