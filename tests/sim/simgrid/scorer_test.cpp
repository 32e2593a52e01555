// tests/sim/simgrid/scorer_test.cpp — the scoring front door: a tier with its worker pool when it
// needs one, and the same runs as the tier's own serve_at_fidelity.
#include <doctest/doctest.h>

#include "sim/serving/metrics.hpp"
#include "sim/simgrid/scorer.hpp"
#include "sim/plan/plan.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

TEST_CASE("scorer: the analytic tier forks no worker, the simgrid tier owns a pool and samples steps in it") {
  const ModelSpec m = load_model("mixtral-8x7b");
  const Cluster c = load_cluster("dgx-h100:1");
  const std::string spec = "dgx-h100:1";
  const Plan p = plan_from_string("tp=2,ep=2,etp=1,dp=4", 8, plan_defaults(m));
  const RequestTrace t = load_request_trace("synthetic:n=30,rate=10,seed=3");
  const auto routing = make_routing("synthetic:seed=2", m.routing_shape());
  const ServingOptions o;
  const ServeScenario s{m, c, spec, p, t, routing.get(), o};

  const Scorer analytic(Tier::Analytic, 2);
  CHECK(analytic.pool() == nullptr);
  CHECK(analytic.runner() == nullptr);
  FidelityReport ra, direct_report;
  const ServingResult a = analytic.serve(s, ra);
  const ServingResult direct = serve_at_fidelity(Tier::Analytic, p, m, c, spec, t, routing.get(), o, nullptr, direct_report);
  CHECK(ra.tier == Tier::Analytic);
  CHECK(a.makespan == direct.makespan);  // the front door adds nothing to the run
  CHECK(summarize(a, o, 8).output_tok_s == summarize(direct, o, 8).output_tok_s);

  const Scorer sampled(Tier::Simgrid, 1, 4);
  REQUIRE(sampled.pool() != nullptr);
  REQUIRE(sampled.runner() != nullptr);
  FidelityReport rs, rq;
  sampled.serve(s, rs);
  CHECK(rs.tier == Tier::Simgrid);
  CHECK(rs.sampled_steps > 0);
  CHECK(rs.sampled_steps <= 4 * 4);  // `samples` reaches the tier (a few strata per step kind)
  CHECK(rs.failed == 0);
  // Another tier through the same scorer: the quick analytic pass a sweep makes.
  const ServingResult quick = sampled.serve(s, rq, Tier::Analytic);
  CHECK(rq.sampled_steps == 0);
  CHECK(quick.makespan == direct.makespan);
}
