// tests/sim/step/batch_routing_test.cpp — the routing window's estimate of a long prompt chunk's unrouted
// tokens against routing every token (sim/step/batch_routing.hpp), and the population statistics
// it leans on (RoutingSource::pick_shares, pick_concentration).
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "sim/step/batch_routing.hpp"
#include "sim/step/expert_layout.hpp"
#include "sim/step/lowering.hpp"
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
  batch.groups.assign(1, {SeqWork{request, 0, tokens, 0, true}});
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
