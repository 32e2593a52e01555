// tests/sim/step/batch_routing_test.cpp — the routing window's estimate of a long prompt chunk's unrouted
// tokens against routing every token (sim/step/batch_routing.hpp), the population statistics
// it leans on (RoutingSource::pick_shares, pick_concentration), and the node-level all-to-all
// (node copies, node_level_flows, the lowering's a2a modes, the SMs its normal kernels hold).
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "sim/step/batch_routing.hpp"
#include "sim/step/compute_cost.hpp"
#include "sim/step/expert_layout.hpp"
#include "sim/plan/plan.hpp"
#include "sim/step/lowering.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

// What a layer's routing makes of an EP group: tokens on the busiest rank over the mean, experts
// read (Σ active), total slot tokens, and copies dispatched.
struct Summary {
  double max_over_mean = 0, active = 0, tokens = 0, copies = 0;
};

Summary summarize(const LayerRouting& L, const ExpertLayout& ex) {
  Summary s;
  std::vector<double> rank(static_cast<std::size_t>(ex.ep()), 0);
  for (std::size_t x = 0; x < L.slot_tokens.size(); ++x) {
    rank[static_cast<std::size_t>(ex.rank_of_slot(static_cast<int>(x)))] += L.slot_tokens[x];
    s.active += L.active(x);
    s.tokens += L.slot_tokens[x];
  }
  s.max_over_mean = *std::max_element(rank.begin(), rank.end()) * static_cast<double>(rank.size()) / s.tokens;
  s.copies = std::accumulate(L.dispatch.begin(), L.dispatch.end(), 0.0);
  return s;
}

// One prompt chunk of `tokens` tokens of request `request`, routed with at most `window` tokens.
Summary route_chunk(const RoutingSource& routing, const ExpertLayout& ex, int layer, std::uint32_t request, int tokens,
                    int window) {
  ReplicaBatch batch;
  batch.groups.assign(1, {SeqWork{request, 0, tokens, 0, true, 0}});
  std::vector<LayerRouting> out(1);
  out[0].reset(static_cast<std::size_t>(ex.ep()), static_cast<std::size_t>(ex.slots()));
  const std::vector<int> layers = {layer};
  BatchRoutingContext ctx{&routing, &ex, layers, false, 1, 1, ex.ep()};
  route_batch(ctx, batch, window, out);
  return summarize(out[0], ex);
}

}  // namespace

TEST_CASE("routing population: shares sum to one per layer — concentration tells shared from private picks") {
  const RoutingShape shape{4, 16, 2, 1, 1};
  auto uniform = make_routing("uniform", shape);
  const auto shares = uniform->pick_shares();
  REQUIRE(shares.size() == 4u * 16u);
  for (int l = 0; l < 4; ++l)
    CHECK(std::accumulate(shares.begin() + l * 16, shares.begin() + (l + 1) * 16, 0.0) == doctest::Approx(1.0));
  // Uniform routing: requests differ only as independent draws do.
  CHECK(uniform->pick_concentration() > 1e3);

  // Every token of request r picks experts 2r mod 16 and 2r+1 mod 16 at every layer: a request's
  // picks say everything about its later ones, so the population should weigh under 5% of a window.
  std::vector<std::uint32_t> counts(RoutingSource::kShareRequests, RoutingSource::kShareTokens);
  std::vector<ExpertId> ids;
  for (std::uint32_t r = 0; r < counts.size(); ++r)
    for (int t = 0; t < RoutingSource::kShareTokens; ++t)
      for (int l = 0; l < shape.moe_layers; ++l)
        for (int j = 0; j < shape.top_k; ++j) ids.push_back(static_cast<ExpertId>((2 * r + j) % 16));
  RoutingTraceFile sticky(encode_routing_trace(shape, counts, ids), "sticky");
  CHECK(sticky.pick_concentration() < 0.05 * RoutingSource::kShareTokens * shape.top_k);
}

TEST_CASE("routing window: a long chunk's estimate matches routing all of its tokens") {
  const ModelSpec m = load_model("deepseek-v3");
  auto routing = make_routing("synthetic:seed=4", m.routing_shape());
  for (int ep : {8, 64}) {
    CAPTURE(ep);
    const ExpertLayout ex(m.experts, ep);
    Summary all, est;
    const int chunks = 8;
    for (std::uint32_t r = 100; r < 100 + chunks; ++r) {
      const Summary a = route_chunk(*routing, ex, 20, r, 2048, 0), e = route_chunk(*routing, ex, 20, r, 2048, 32);
      CHECK(e.tokens == doctest::Approx(a.tokens).epsilon(1e-9));  // every token's k picks, routed or expected
      all.max_over_mean += a.max_over_mean / chunks;
      all.active += a.active / chunks;
      all.copies += a.copies / chunks;
      est.max_over_mean += e.max_over_mean / chunks;
      est.active += e.active / chunks;
      est.copies += e.copies / chunks;
    }
    // Scaling the window's counts gave ~63% of the experts active and a far busier busiest rank.
    CHECK(est.active == doctest::Approx(all.active).epsilon(0.03));
    CHECK(est.max_over_mean == doctest::Approx(all.max_over_mean).epsilon(0.05));
    CHECK(est.copies == doctest::Approx(all.copies).epsilon(0.03));
  }
}

TEST_CASE("routing window: sequences the window covers are routed exactly") {
  const ModelSpec m = load_model("deepseek-v3");
  auto routing = make_routing("synthetic:seed=4", m.routing_shape());
  const ExpertLayout ex(m.experts, 16);
  const Summary a = route_chunk(*routing, ex, 7, 3, 24, 0), w = route_chunk(*routing, ex, 7, 3, 24, 32);
  CHECK(w.active == a.active);
  CHECK(w.max_over_mean == a.max_over_mean);
  CHECK(w.copies == a.copies);
  CHECK(a.tokens == 24.0 * m.top_k);
}

namespace {

// One sequence per attention group of 32 prompting 512 tokens, and `decoders` per group decoding
// on a 300-token context: the node-level tests' two kinds of step.
struct PromptAndDecode {
  ReplicaBatch prompt, decode;
  explicit PromptAndDecode(int decoders) {
    prompt.groups.resize(32);
    decode.groups.resize(32);
    for (std::uint32_t a = 0; a < 32; ++a) {
      prompt.groups[a].push_back(SeqWork{a, 0, 512, 0, true, 0});
      for (int d = 0; d < decoders; ++d)
        decode.groups[a].push_back(SeqWork{100 * static_cast<std::uint32_t>(d + 1) + a, 300, 1, 300, true, 0});
    }
  }
};

// Unit ranks laid out as `nodes` nodes of `rails` GPUs, rank = node · rails + rail.
UnitNodes grid(int nodes, int rails) {
  UnitNodes un;
  un.nodes = nodes;
  un.rails = rails;
  for (int u = 0; u < nodes * rails; ++u) {
    un.node.push_back(u / rails);
    un.rail.push_back(u % rails);
    un.at.push_back(u);
  }
  return un;
}

// Copies a long chunk sends to each node at least once: the window's estimate or every token routed.
double node_copies_of_chunk(const RoutingSource& routing, const ExpertLayout& ex, const UnitNodes& un, std::uint32_t request,
                            int tokens, int window) {
  ReplicaBatch batch;
  batch.groups.assign(1, {SeqWork{request, 0, tokens, 0, true, 0}});
  std::vector<LayerRouting> out(1);
  out[0].reset(static_cast<std::size_t>(ex.ep()), static_cast<std::size_t>(ex.slots()), static_cast<std::size_t>(un.nodes));
  const std::vector<int> layers = {20};
  BatchRoutingContext ctx{&routing, &ex, layers, false, 1, 1, ex.ep(), &un};
  route_batch(ctx, batch, window, out);
  return std::accumulate(out[0].node_copies.begin(), out[0].node_copies.end(), 0.0);
}

}  // namespace

TEST_CASE("node-level all-to-all: one RDMA copy per token and node to the sender's rail there, then NVLink forwards") {
  // Two nodes of two GPUs: rank 0 (node 0, rail 0) sends 3 copies to rank 1 (its own node), 2 to
  // rank 2 (node 1, rail 0) and 5 to rank 3 (node 1, rail 1); 6 of its tokens reach node 1.
  const UnitNodes un = grid(2, 2);
  const std::size_t U = 4;
  std::vector<double> copies(U * U, 0.0), node_copies(U * 2, 0.0), flow;
  copies[0 * U + 1] = 3;
  copies[0 * U + 2] = 2;
  copies[0 * U + 3] = 5;
  node_copies[0 * 2 + 1] = 6;
  node_copies[0 * 2 + 0] = 3;  // its own node: no RDMA
  node_level_flows(U, un, copies, node_copies, flow);
  CHECK(flow[0 * U + 1] == 3);  // own node: NVLink, as before
  CHECK(flow[0 * U + 2] == 6);  // RDMA: one copy per token reaching node 1, to rank 2 (rail 0 there)
  CHECK(flow[0 * U + 3] == 0);  // nothing straight to rank 3 …
  CHECK(flow[2 * U + 3] == 5);  // … rank 2 forwards its 5 copies over NVLink
  CHECK(std::accumulate(flow.begin(), flow.end(), 0.0) == 14);
  // A node without a rank on the sender's rail gets its copies directly (no forwarding there).
  UnitNodes partial = un;
  partial.at[1 * 2 + 0] = -1;
  node_level_flows(U, partial, copies, node_copies, flow);
  CHECK(flow[0 * U + 2] == 2);
  CHECK(flow[0 * U + 3] == 5);
}

TEST_CASE("node-level all-to-all: the window's estimate of a chunk's node copies matches routing every token") {
  const ModelSpec m = load_model("deepseek-v3");
  auto routing = make_routing("synthetic:seed=4", m.routing_shape());
  const ExpertLayout ex(m.experts, 32);
  const UnitNodes un = grid(4, 8);
  double all = 0, est = 0;
  for (std::uint32_t r = 100; r < 108; ++r) {
    all += node_copies_of_chunk(*routing, ex, un, r, 2048, 0);
    est += node_copies_of_chunk(*routing, ex, un, r, 2048, 32);
  }
  CHECK(all > 8 * 2048);       // tokens reach more than one node …
  CHECK(all < 8 * 2048 * 4.0);  // … and fewer than all four
  CHECK(est == doctest::Approx(all).epsilon(0.03));
}

TEST_CASE("node-level all-to-all: a2a=auto runs prompt steps node-level and decode steps per rank") {
  const ModelSpec m = load_model("deepseek-v3");
  const Cluster c = load_cluster("dgx-h100:4");
  auto routing = make_routing("synthetic:seed=4", m.routing_shape());
  auto inter_node = [&](const std::string& a2a, const ReplicaBatch& batch) {
    const Plan plan = plan_from_string("attn_dp=32,ep=32,a2a=" + a2a, 32, plan_defaults(m));
    LoweringOptions lo;
    lo.fold_moe_layers = 4;
    const Lowering low(plan, m, c, routing.get(), 0, lo);
    const StepProgram p = low.lower(batch);
    double bytes = 0;
    for (const StepOp& op : p.ops) {
      if (op.type != OpType::Collective || op.coll != CollKind::AllToAll || op.matrix < 0) continue;
      const std::vector<int>& g = p.groups[static_cast<std::size_t>(op.group)];
      for (const A2aMatrix::Entry& x : p.a2a[static_cast<std::size_t>(op.matrix)].entries())
        if (c.node_of(p.rank_gpu[static_cast<std::size_t>(g[x.from])]) != c.node_of(p.rank_gpu[static_cast<std::size_t>(g[x.to])]))
          bytes += x.bytes * op.weight;
    }
    return bytes;
  };
  const PromptAndDecode steps(1);
  const ReplicaBatch &prompt = steps.prompt, &decode = steps.decode;
  const double rank_prompt = inter_node("per-rank", prompt), node_prompt = inter_node("per-node", prompt);
  CHECK(node_prompt < 0.75 * rank_prompt);  // DeepSeek-V3 over 4 nodes: ~7.5 ranks, ~4 nodes a token
  CHECK(inter_node("auto", prompt) == node_prompt);
  CHECK(inter_node("auto", decode) == inter_node("per-rank", decode));
  CHECK(inter_node("per-node", decode) < inter_node("per-rank", decode));
}

TEST_CASE("node-level all-to-all: DeepEP's normal kernels hold comm_sms of the SMs while two-batch overlap computes beside them") {
  const ModelSpec m = load_model("deepseek-v3");
  const Cluster c = load_cluster("dgx-h100:4");
  auto routing = make_routing("synthetic:seed=4", m.routing_shape());
  const PromptAndDecode steps(2);
  const ReplicaBatch &prompt = steps.prompt, &decode = steps.decode;
  auto share = [&](const std::string& extra, const ReplicaBatch& batch) {
    const Plan plan = plan_from_string("attn_dp=32,ep=32" + extra, 32, plan_defaults(m));
    LoweringOptions lo;
    lo.fold_moe_layers = 4;
    const Lowering low(plan, m, c, routing.get(), 0, lo);
    StepProgram attention;
    low.lower_attention(batch, attention);
    const double s = low.lower(batch).compute_share;
    CHECK(attention.compute_share == s);  // the attention estimator prices it as inside the step
    return s;
  };
  // Prompt steps on the normal kernels, split in two micro-batches: 20 of the H100's 132 SMs held.
  CHECK(share(",a2a=auto,two_batch_overlap=on", prompt) == doctest::Approx(112.0 / 132));
  CHECK(share(",a2a=auto,two_batch_overlap=on,comm_sms=32", prompt) == doctest::Approx(100.0 / 132));
  // Nothing held: without the overlap (the kernels run alone), on the low-latency kernels (decode
  // steps under auto, or per-rank: hook-based, no SMs), or with comm_sms=0.
  CHECK(share(",a2a=auto", prompt) == 1);
  CHECK(share(",a2a=auto,two_batch_overlap=on", decode) == 1);
  CHECK(share(",a2a=per-rank,two_batch_overlap=on", prompt) == 1);
  CHECK(share(",a2a=auto,two_batch_overlap=on,comm_sms=0", prompt) == 1);
  // The share slows compute-bound kernels only: a GEMM's flop time, not a memory-bound kernel's.
  const GpuSpec& h100 = c.gpu();
  CHECK(compute_time(h100, ComputeKind::Gemm, 4096, 1e12, 1e8, Dtype::BF16, {}, 0.5) >
        1.9 * compute_time(h100, ComputeKind::Gemm, 4096, 1e12, 1e8, Dtype::BF16));
  CHECK(compute_time(h100, ComputeKind::Memory, 1, 0, 1e9, Dtype::BF16, {}, 0.5) ==
        compute_time(h100, ComputeKind::Memory, 1, 0, 1e9, Dtype::BF16));
}
