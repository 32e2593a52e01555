// tests/sim/serving/fast_path_test.cpp — the fast scoring path against the exact one (issue 11's accuracy
// guard), and the mechanisms it is made of: fast-forward (exact given memoisation), folded
// layers, routing of listed layers, cost classes of replicas.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/serving.hpp"
#include "sim/simgrid/wire.hpp"
#include "sim/step/analytic_executor.hpp"
#include "sim/step/lowering.hpp"
#include "tests/fast_path_cases.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

using Case = ReferenceCase;

using Outcome = ReferenceOutcome;

Outcome score(const Case& k, const ServingOptions& base) { return score_reference(k, base); }

ServingOptions exact_options() {
  ServingOptions o;
  o.set_exact();
  return o;
}

double rel(double a, double b) { return std::abs(a / b - 1); }


}  // namespace

TEST_CASE("fast path: fast-forward replays exactly what the memoised loop computes") {
  // Arrival-paced and offline, pipeline engines, on-demand KV with preemptions, reserve policy.
  const std::vector<Case> cases = {
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,dp=4", "synthetic:n=200,seed=4", "synthetic:seed=2", false},
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,pp=2,dp=2", "synthetic:n=200,seed=4", "synthetic:seed=2", true},
      {"llama3-70b", "dgx-h100:1", "tp=4,pp=2,mem_util=0.3", "synthetic:n=150,prompt=fixed:900,output=fixed:700,seed=1", "", true},
      {"llama3-70b", "dgx-h100:1", "tp=8,policy=reserve,max_seqs=64", "synthetic:n=150,seed=5", "", false},
  };
  for (const auto& k : cases) {
    CAPTURE(k.plan);
    ServingOptions on, off;
    off.fast_forward = false;
    Outcome a = score(k, on), b = score(k, off);
    CHECK(a.result.breakdown.forwarded_steps > 0);
    CHECK(b.result.breakdown.forwarded_steps == 0);
    CHECK(a.result.breakdown.steps == b.result.breakdown.steps);
    CHECK(a.result.breakdown.executed_steps == b.result.breakdown.executed_steps);
    CHECK(a.result.breakdown.preemptions == b.result.breakdown.preemptions);
    REQUIRE(a.result.requests.size() == b.result.requests.size());
    double worst = 0;
    for (std::size_t i = 0; i < a.result.requests.size(); ++i) {
      const auto& x = a.result.requests[i];
      const auto& y = b.result.requests[i];
      CHECK(x.completed == y.completed);
      worst = std::max({worst, std::abs(x.first_token - y.first_token), std::abs(x.finish - y.finish)});
    }
    CHECK(worst < 1e-9);  // seconds: only the order of floating-point sums differs
  }
  // The preemption case really preempts (so the pre-allocated KV blocks were exercised).
  Outcome p = score(cases[2], ServingOptions{});
  CHECK(p.result.breakdown.preemptions > 0);
}

TEST_CASE("fast path: within 1% of the exact path on throughput and TPOT and close on TTFT" * doctest::test_suite("heavy")) {
  // The reference set's small cases (tests/fast_path_cases.hpp).
  const std::string ssrt = write_reference_routing_file("fast-path");
  const std::vector<Case> cases = guard_cases(ssrt);
  long mixed = 0;
  for (const auto& k : cases) {
    CAPTURE(k.plan);
    CAPTURE(k.routing);
    Outcome fast = score(k, ServingOptions{}), exact = score(k, exact_options());
    const Metrics &f = fast.metrics, &e = exact.metrics;
    CHECK(f.completed == e.completed);
    CHECK(fast.result.breakdown.executed_steps < exact.result.breakdown.executed_steps);
    CHECK(exact.result.breakdown.interpolated_mixed_steps == 0);
    // Every prompt is prefilled in some executed step, and some steps only decode.
    const auto &xb = exact.result.breakdown, &fb = fast.result.breakdown;
    CHECK(xb.executed_chunk_steps > 0);
    CHECK(xb.executed_chunk_steps < xb.executed_steps);
    CHECK(fb.executed_chunk_steps <= fb.executed_steps);
    CHECK(fb.executed_chunk_steps < xb.executed_chunk_steps);
    mixed += fast.result.breakdown.interpolated_mixed_steps;
    // Over the makespan only offline: an arrival-paced run's makespan is its last request's fate.
    if (k.offline) CHECK(rel(f.output_tok_s, e.output_tok_s) < 0.01);
    CHECK(rel(f.steady_output_tok_s, e.steady_output_tok_s) < 0.01);
    CHECK(rel(f.tpot_ms.p50, e.tpot_ms.p50) < 0.01);
    CHECK(rel(f.tpot_ms.p99, e.tpot_ms.p99) < 0.03);
    // TTFT depends on which step a request arrives in: a step time off by a fraction of a percent
    // moves some requests by a whole step either way. Offline (queueing) TTFT is smooth.
    CHECK(rel(f.ttft_ms.p50, e.ttft_ms.p50) < (k.offline ? 0.01 : 0.05));
    CHECK(rel(f.ttft_ms.p99, e.ttft_ms.p99) < (k.offline ? 0.01 : 0.05));
  }
  CHECK(mixed > 100);  // the guard covers interpolated mixed steps, not only memoised ones
  std::filesystem::remove(ssrt);
}

TEST_CASE("fast path: steps routing 32 or more tokens per layer fold onto fewer representatives") {
  // Mixtral: 32 MoE layers onto 16 representatives, 8 for a step routing ≥ 32 tokens per layer;
  // with expert parallelism its tokens are drawn, so the representatives decide the timing.
  const std::string plan = "tp=2,ep=4,attn_dp=4";
  // One request in flight at a time (2 s apart, each done well within): 8 prompt tokens, then 1.
  const Case light{"mixtral-8x7b", "dgx-h100:1", plan,
                   "synthetic:n=12,prompt=fixed:8,output=fixed:12,rate=0.5,arrival=constant,seed=3", "", false};
  // Forty 300-token prompts at once: every prefill step routes windows of 32 tokens per sequence.
  const Case heavy{"mixtral-8x7b", "dgx-h100:1", plan, "synthetic:n=40,prompt=fixed:300,output=fixed:20,seed=3", "", true};
  ServingOptions on, off;
  off.fold_moe_layers_large = 0;
  const Outcome a = score(heavy, on), b = score(heavy, off);
  CHECK(a.result.breakdown.layers_lowered == 16);
  CHECK(a.result.breakdown.large_layers_lowered == 8);
  CHECK(b.result.breakdown.large_layers_lowered == 16);
  CHECK(a.metrics.ttft_ms.p50 != b.metrics.ttft_ms.p50);  // its large steps were lowered otherwise
  // Forty prompts make few steps, each a visible share of TTFT: both folds land within a few
  // percent of the exact path, on either side (+0.9%/−2.4% and −1.1%/+2.8% tok/s / TTFT p50).
  const Outcome ex = score(heavy, exact_options());
  CHECK(rel(a.metrics.output_tok_s, ex.metrics.output_tok_s) < 0.02);
  CHECK(rel(a.metrics.ttft_ms.p50, ex.metrics.ttft_ms.p50) < 0.05);
  const Outcome c = score(light, on), d = score(light, off);
  CHECK(c.metrics.ttft_ms.p50 == d.metrics.ttft_ms.p50);  // no step of it routes 32 tokens
  CHECK(c.metrics.tpot_ms.p50 == d.metrics.tpot_ms.p50);
  CHECK(c.metrics.output_tok_s == d.metrics.output_tok_s);
  // A pipeline of four stages or more runs at its slowest stage's pace: every step, large or not,
  // lowers at least three representatives per stage (24 at least), where a two-stage one halves them.
  for (int pp : {2, 4, 8}) {
    CAPTURE(pp);
    Case staged = heavy;
    staged.plan = "tp=1,pp=" + std::to_string(pp);
    const Outcome e = score(staged, on);
    if (pp >= ServingOptions::kDeepPipeline) {
      CHECK(e.result.breakdown.layers_lowered >= std::max(ServingOptions::kDeepPipelineFold, ServingOptions::kMinFoldPerStage * pp));
      CHECK(e.result.breakdown.large_layers_lowered == e.result.breakdown.layers_lowered);
    } else {
      CHECK(e.result.breakdown.layers_lowered == 16);
      CHECK(e.result.breakdown.large_layers_lowered == 8);
    }
  }
  // The exact path folds nothing.
  const Outcome x = score(light, exact_options());
  CHECK(x.result.breakdown.large_layers_lowered == 32);
  CHECK(x.result.breakdown.layers_lowered == 32);
}

TEST_CASE("fast path: under two-batch overlap every layer is lowered, each with its own routing") {
  // Folding would stretch one layer's two-stream overlap over the layers it stands for (a bias of
  // one fill of w − 1 layers per step, docs/performance-log.md); memoisation and the fits still apply.
  const Case tbo{"mixtral-8x7b", "dgx-h100:1", "tp=1,ep=8,attn_dp=8,two_batch_overlap=on", "synthetic:n=150,seed=8", "", true};
  Case plain = tbo;
  plain.plan = "tp=1,ep=8,attn_dp=8";
  const Outcome f = score(tbo, ServingOptions{}), x = score(tbo, exact_options()), p = score(plain, ServingOptions{});
  CHECK(f.result.breakdown.layers_lowered == 32);
  CHECK(f.result.breakdown.large_layers_lowered == 32);
  CHECK(p.result.breakdown.layers_lowered == 16);  // the same plan without overlap folds
  CHECK(f.result.breakdown.executed_steps < x.result.breakdown.executed_steps);
  CHECK(f.metrics.completed == x.metrics.completed);
  CHECK(rel(f.metrics.output_tok_s, x.metrics.output_tok_s) < 0.01);
  CHECK(rel(f.metrics.tpot_ms.p50, x.metrics.tpot_ms.p50) < 0.01);
  CHECK(rel(f.metrics.ttft_ms.p50, x.metrics.ttft_ms.p50) < 0.01);
}

TEST_CASE("fast path: folded lowering stands for every layer — SimGrid programs are never folded") {
  ModelSpec m = load_model("deepseek-v3");
  Cluster c = load_cluster("dgx-h100:2");
  Plan p = plan_from_string("tp=8,ep=8,pp=2", 16, plan_defaults(m));
  auto routing = make_routing("synthetic:seed=1", m.routing_shape());
  LoweringOptions lo;
  lo.fold_moe_layers = 8;
  Lowering folded(p, m, c, routing.get(), 0, lo), full(p, m, c, routing.get());
  const auto& stages = folded.lowered_layers();
  REQUIRE(stages.size() == 2);
  double weight = 0;
  int moe_reps = 0;
  for (const auto& stage : stages)
    for (const auto& x : stage) {
      weight += x.weight;
      moe_reps += m.is_moe_layer(x.layer) ? 1 : 0;
    }
  CHECK(weight == doctest::Approx(m.layers));
  CHECK(moe_reps == 8);
  ReplicaBatch b;
  b.groups.resize(1);
  for (int q = 0; q < 64; ++q) b.groups[0].push_back(SeqWork{static_cast<std::uint32_t>(q), 700, 1, 700, true, 0});
  StepProgram fp = folded.lower(b), xp = full.lower(b);
  CHECK(fp.ops.size() * 4 < xp.ops.size());
  AnalyticExecutor ex(c);
  StepTiming ft = ex.run(fp), xt = ex.run(xp);
  // Dense layers fold exactly; the MoE representatives sample the routing of the others.
  CHECK(rel(ft.makespan, xt.makespan) < 0.05);
  CHECK_THROWS_AS(encode(fp), std::logic_error);
  CHECK_NOTHROW(encode(xp));
}

TEST_CASE("routing: route_layers gives the listed layers of route_tokens where the chain allows it") {
  RoutingShape shape{6, 16, 2, 1, 1};
  auto uniform = make_routing("uniform", shape);
  auto nochain = make_routing("synthetic:affinity=0,seed=9", shape);
  auto chained = make_routing("synthetic:seed=9", shape);
  const std::vector<int> layers = {1, 4, 5};
  for (const RoutingSource* src : {uniform.get(), nochain.get()}) {
    std::vector<ExpertId> all(7 * shape.ids_per_token()), some(7 * layers.size() * 2);
    src->route_tokens(3, 100, 7, all);
    src->route_layers(3, 100, 7, layers, some);
    for (int i = 0; i < 7; ++i)
      for (std::size_t j = 0; j < layers.size(); ++j)
        for (int q = 0; q < 2; ++q)
          CHECK(some[(i * layers.size() + j) * 2 + q] == all[(static_cast<std::size_t>(i) * 6 + layers[j]) * 2 + q]);
  }
  // With affinity the answer is still a pure function of its arguments, in range and distinct per token.
  std::vector<ExpertId> a(7 * layers.size() * 2), b(a.size());
  chained->route_layers(3, 100, 7, layers, a);
  chained->route_layers(3, 100, 7, layers, b);
  CHECK(a == b);
  for (std::size_t i = 0; i < a.size(); i += 2) {
    CHECK(a[i] < 16);
    CHECK(a[i] != a[i + 1]);
  }
  std::vector<ExpertId> wrong(5);
  CHECK_THROWS_AS(chained->route_layers(3, 100, 7, layers, wrong), std::invalid_argument);
  std::vector<ExpertId> one(2);
  const std::vector<int> descending = {4, 1};
  std::vector<ExpertId> two(4);
  CHECK_THROWS_AS(chained->route_layers(3, 100, 1, descending, two), std::out_of_range);
  const std::vector<int> beyond = {6};
  CHECK_THROWS_AS(chained->route_layers(3, 100, 1, beyond, one), std::out_of_range);
}

TEST_CASE("routing: route_layers over a step's spans answers each span as alone, every layer as route_tokens") {
  // Group-limited (4 of 8 groups), chained layers, locality: every path of the synthetic draw.
  RoutingShape shape{7, 32, 3, 8, 4};
  auto chained = make_routing("synthetic:seed=5,locality=0.5", shape);
  auto uniform = make_routing("uniform", shape);
  const std::vector<RoutingSource::TokenSpan> spans = {{3, 100, 5}, {9, 0, 1}, {3, 7, 2}, {40, 12, 6}};
  std::size_t tokens = 0;
  for (const auto& s : spans) tokens += s.count;
  for (const RoutingSource* src : {chained.get(), uniform.get()}) {
    for (const std::vector<int>& layers : {std::vector<int>{1, 4, 5}, std::vector<int>{0, 1, 2, 3, 4, 5, 6}}) {
      const std::size_t per = layers.size() * 3;
      std::vector<ExpertId> batch(tokens * per);
      src->route_layers(spans, layers, batch);
      std::size_t at = 0;
      for (const auto& s : spans) {
        std::vector<ExpertId> alone(s.count * per);
        src->route_layers(s.request, s.first, s.count, layers, alone);
        CHECK(std::equal(alone.begin(), alone.end(), batch.begin() + static_cast<std::ptrdiff_t>(at)));
        if (layers.size() == 7) {  // every layer listed: the chain is never truncated
          std::vector<ExpertId> whole(s.count * shape.ids_per_token());
          src->route_tokens(s.request, s.first, s.count, whole);
          CHECK(alone == whole);
        }
        at += alone.size();
      }
    }
  }
  std::vector<ExpertId> short_out(3);
  const std::vector<int> one_layer = {2};
  CHECK_THROWS_AS(chained->route_layers(spans, one_layer, short_out), std::invalid_argument);
}

TEST_CASE("fast path: replicas with the same costs share step timings, results unchanged") {
  // dp = 4 on four nodes: every replica is one node, so all four share one cost class. With
  // memoisation by shape the shared cache executes fewer steps than four private ones would.
  Case k{"mixtral-8x7b", "dgx-h100:4", "tp=8,dp=4", "synthetic:n=200,seed=4", "synthetic:seed=2", false};
  Outcome shared = score(k, ServingOptions{});
  ServingOptions no_memo;
  no_memo.shape_buckets_per_octave = 0;
  Outcome every = score(k, no_memo);
  CHECK(shared.result.breakdown.executed_steps * 4 < every.result.breakdown.executed_steps);
  CHECK(rel(shared.metrics.output_tok_s, every.metrics.output_tok_s) < 0.01);
  CHECK(rel(shared.metrics.tpot_ms.p50, every.metrics.tpot_ms.p50) < 0.01);
  // Identical requests offline give every replica the same steps: replicas 1–3 find all of theirs
  // in replica 0's entries, so four replicas execute what one replica on its own would.
  const std::string same = "synthetic:n=160,prompt=fixed:500,output=fixed:120,seed=4";
  Outcome four = score(Case{"mixtral-8x7b", "dgx-h100:4", "tp=8,dp=4", same, "synthetic:seed=2", true}, ServingOptions{});
  Outcome one = score(Case{"mixtral-8x7b", "dgx-h100:1", "tp=8", "synthetic:n=40,prompt=fixed:500,output=fixed:120,seed=4",
                           "synthetic:seed=2", true},
                      ServingOptions{});
  CHECK(four.result.breakdown.steps == 4 * one.result.breakdown.steps);
  CHECK(four.result.breakdown.executed_steps == one.result.breakdown.executed_steps);
}

TEST_CASE("fast path: a cost-class memo gives the serving run's own answer, for one cluster only") {
  ModelSpec m = load_model("mixtral-8x7b");
  Cluster c = load_cluster("dgx-h100:4");
  Plan p = plan_from_string("tp=8,dp=4", c.num_gpus(), plan_defaults(m));
  RequestTrace t = load_request_trace("synthetic:n=120,seed=4");
  auto routing = make_routing("synthetic:seed=2", m.routing_shape());
  AnalyticExecutor ex(c);
  ServingOptions memo;
  memo.cost_classes = std::make_shared<CostClassMemo>();
  CHECK(memo.cost_classes->classes(p, c) == std::vector<int>{0, 0, 0, 0});  // four nodes alike
  const ServingResult fresh = serve(p, m, c, t, routing.get(), ex, ServingOptions{});
  for (int round = 0; round < 2; ++round) {  // the second from the memo
    const ServingResult r = serve(p, m, c, t, routing.get(), ex, memo);
    CHECK(r.makespan == fresh.makespan);
    CHECK(r.breakdown.executed_steps == fresh.breakdown.executed_steps);
  }
  const Cluster other = load_cluster("dgx-h100:4");
  CHECK_THROWS_AS(memo.cost_classes->classes(p, other), std::logic_error);
}
