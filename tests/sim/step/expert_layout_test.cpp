// tests/sim/step/expert_layout_test.cpp — redundant experts (EPLB): the layout, the plan field and its
// checks, and the effect on the slowest EP rank (docs/simulation.md, "Redundant experts").
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "sim/plan/memory_model.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/serving.hpp"
#include "sim/step/analytic_executor.hpp"
#include "sim/step/expert_layout.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

MeasuredLoads loads_of(std::vector<std::vector<double>> per_layer) {
  MeasuredLoads m;
  m.per_layer = std::move(per_layer);
  m.tokens = 100;
  return m;
}

}  // namespace

TEST_CASE("expert layout: contiguous blocks without redundant experts") {
  ExpertLayout c(8, 4);
  CHECK_FALSE(c.balanced());
  CHECK(c.slots() == 8);
  CHECK(c.slots_per_rank() == 2);
  for (int x = 0; x < 8; ++x) {
    CHECK(c.slot_of(3, x, 17) == x);
    CHECK(c.rank_of_slot(x) == x / 2);
  }
}

TEST_CASE("expert layout: hot experts are replicated on distinct ranks and the packing balances, worked by hand") {
  // 4 experts, ep = 2, 2 extra slots; loads 10, 1, 1, 1. Replicas: expert 0 twice (5 + 5; a third
  // would exceed ep), then expert 1 twice (0.5 + 0.5). Packing, heaviest first onto the least
  // loaded rank with room that lacks the expert: rank 0 = {e0, e2, e1}, rank 1 = {e0, e3, e1}:
  // 6.5 each, against 11 and 2 contiguously (max/mean 11/6.5).
  ExpertLayout l(loads_of({{10, 1, 1, 1}}), 2, 2);
  REQUIRE(l.balanced());
  CHECK(l.slots() == 6);
  CHECK(l.slots_per_rank() == 3);
  std::set<int> ranks0 = {l.rank_of_slot(l.slot_of(0, 0, 0)), l.rank_of_slot(l.slot_of(0, 0, 1))};
  CHECK(ranks0 == std::set<int>{0, 1});
  CHECK(l.slot_of(0, 2, 0) == l.slot_of(0, 2, 1));  // one replica: every token to it
  auto [before, after] = l.imbalance(loads_of({{10, 1, 1, 1}}));
  CHECK(before == doctest::Approx(11.0 / 6.5));
  CHECK(after == doctest::Approx(1.0));
  // Every slot is used exactly once.
  std::set<int> slots;
  for (int x = 0; x < 4; ++x)
    for (long t = 0; t < 4; ++t) slots.insert(l.slot_of(0, x, t));
  CHECK(slots.size() == 6);
}

TEST_CASE("expert layout: on a skewed routing, a held-out sample's slowest rank gets lighter") {
  const ModelSpec m = load_model("mixtral-8x7b");
  auto routing = make_routing("synthetic:zipf=1.4,seed=3", m.routing_shape());
  const MeasuredLoads fit = measure_expert_loads(*routing);
  CHECK(fit.tokens == MeasuredLoads::kSampleRequests * MeasuredLoads::kSampleTokens);
  ExpertLayout l(fit, 4, 4);
  auto [before, after] = l.imbalance(measure_expert_loads(*routing, kHeldOutRequests));
  CHECK(before > 1.3);
  CHECK(after < before);
  CHECK(after < 1.15);
}

TEST_CASE("redundant experts: the plan field, its checks and its memory") {
  const ModelSpec m = load_model("mixtral-8x7b");
  const Cluster c = load_cluster("dgx-h100:1");
  Plan p = plan_from_string("tp=1,attn_dp=8,ep=8,redundant_experts=8", 8, plan_defaults(m));
  CHECK(p.redundant_experts == 8);
  CHECK(plan_from_json(plan_to_json(p), "p.json", 8, plan_defaults(m)).redundant_experts == 8);
  CHECK(plan_from_string(plan_to_string(p), 8, plan_defaults(m)).redundant_experts == 8);
  CHECK(check_plan(p, m, c).feasible());
  Plan none = plan_from_string("tp=1,attn_dp=8,ep=8", 8, plan_defaults(m));
  CHECK(plan_memory(p, m, c).worst().weights > plan_memory(none, m, c).worst().weights);
  auto field_of = [&](const std::string& text, const std::string& model = "mixtral-8x7b") {
    const ModelSpec mm = load_model(model);
    PlanCheck chk = check_plan(plan_from_string(text, 8, plan_defaults(mm)), mm, c);
    return chk.violations.empty() ? std::string() : chk.violations.front().field;
  };
  CHECK(field_of("tp=1,attn_dp=8,ep=8,redundant_experts=4") == "/redundant_experts");   // not a multiple of ep
  CHECK(field_of("tp=8,etp=8,redundant_experts=8") == "/redundant_experts");            // ep = 1
  CHECK(field_of("tp=1,attn_dp=8,ep=8,redundant_experts=16") == "/redundant_experts");  // more than the experts
  CHECK(field_of("tp=8,redundant_experts=8", "llama3-70b") == "/redundant_experts");    // dense
  // EP72 for 256 experts (SGLang's decode pool): only with slots rounded up to 288.
  const ModelSpec ds = load_model("deepseek-v3");
  const Cluster nine = load_cluster("dgx-h100:9");
  PlanCheck ep72 = check_plan(plan_from_string("attn_dp=72,ep=72", 72, plan_defaults(ds)), ds, nine);
  REQUIRE(!ep72.feasible());
  CHECK(ep72.violations.front().field == "/degrees/ep");
  CHECK(check_plan(plan_from_string("attn_dp=72,ep=72,redundant_experts=32", 72, plan_defaults(ds)), ds, nine).feasible());
  PlanCheck odd = check_plan(plan_from_string("attn_dp=72,ep=72,redundant_experts=40", 72, plan_defaults(ds)), ds, nine);
  REQUIRE(!odd.feasible());
  CHECK(odd.violations.front().field == "/redundant_experts");
}

TEST_CASE("redundant experts: under skewed routing they cut the slowest EP rank's expert time in prefill") {
  // Prefill-heavy (compute-bound expert GEMMs): the slowest rank's time follows its tokens. In
  // small decode batches the extra slots can cost more than they save: each rank then reads the
  // weights of more active experts (docs/simulation.md, "Redundant experts").
  const ModelSpec m = load_model("mixtral-8x7b");
  const Cluster c = load_cluster("dgx-h100:1");
  auto routing = make_routing("synthetic:zipf=1.4,seed=3", m.routing_shape());
  const RequestTrace t = load_request_trace("synthetic:n=200,rate=50,prompt=lognormal:2000:0.3,output=fixed:4,seed=2");
  AnalyticExecutor ex(c);
  ServingOptions o;
  o.offline = true;
  auto run = [&](int redundant) {
    Plan p = plan_from_string("tp=1,attn_dp=8,ep=8,redundant_experts=" + std::to_string(redundant), 8, plan_defaults(m));
    return serve(p, m, c, t, routing.get(), ex, o);
  };
  ServingResult base = run(0), eplb = run(8);
  CHECK(base.experts.redundant == 0);
  CHECK(eplb.experts.redundant == 8);
  CHECK(eplb.experts.after < eplb.experts.before);
  // Σ over steps of the slowest rank's expert time, and its excess over the mean.
  CHECK(eplb.breakdown.expert_time < base.breakdown.expert_time);
  CHECK(eplb.breakdown.expert_imbalance < base.breakdown.expert_imbalance);
  CHECK(summarize(eplb, o, 8).output_tok_s > summarize(base, o, 8).output_tok_s);
}
