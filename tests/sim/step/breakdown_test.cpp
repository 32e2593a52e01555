// tests/sim/step/breakdown_test.cpp — the "where the time goes" breakdown adds up: per step and in total,
// exposed communication ≤ busy communication, the critical path by class sums to the step time,
// no expert all-to-alls without expert parallelism, no pipeline bubble without a pipeline, and
// figures summed over replicas equal the sum of the replicas run on their own.
#include <doctest/doctest.h>

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "sim/step/analytic_executor.hpp"
#include "sim/plan/plan.hpp"
#include "sim/serving/result_json.hpp"
#include "sim/step/schedule_summary.hpp"
#include "sim/serving/serving.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

constexpr double kTol = 1e-12;

double at(const std::array<double, kNumOpClasses>& v, OpClass c) { return v[static_cast<std::size_t>(c)]; }
double sum(const std::array<double, kNumOpClasses>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double comm_classes(const std::array<double, kNumOpClasses>& v) {
  double s = 0;
  for (int i = 0; i < kNumOpClasses; ++i)
    if (is_comm_class(static_cast<OpClass>(i))) s += v[static_cast<std::size_t>(i)];
  return s;
}

struct Case {
  std::string model, cluster, plan;
};

struct Served {
  Plan plan;
  ServingResult result;
  std::vector<StepTiming> steps;  // every executed step
};

Served serve_case(const Case& k, const RequestTrace& trace, int gpus = 0) {
  ModelSpec m = load_model(k.model);
  Cluster c = load_cluster(k.cluster);
  Served s{plan_from_string(k.plan, gpus > 0 ? gpus : c.num_gpus(), plan_defaults(m)), {}, {}};
  std::unique_ptr<RoutingSource> routing;
  if (m.is_moe()) routing = make_routing("synthetic:seed=1", m.routing_shape());
  AnalyticExecutor ex(c);
  ServingOptions o;
  o.on_executed_step = [&s](int, const ReplicaBatch&, const StepTiming& t) { s.steps.push_back(t); };
  s.result = serve(s.plan, m, c, trace, routing.get(), ex, o);
  return s;
}

// Invariants of one step's timing of a replica of plan `d`.
void check_step(const StepTiming& t, const Degrees& d) {
  CHECK(t.makespan > 0);
  CHECK(t.comm_exposed >= 0);
  CHECK(t.comm_exposed <= t.comm_busy + kTol);
  CHECK(sum(t.critical) + t.idle_on_path == doctest::Approx(t.makespan).epsilon(1e-9));
  CHECK(std::accumulate(t.coll_by_kind.begin(), t.coll_by_kind.end(), 0.0) ==
        doctest::Approx(t.comm_busy).epsilon(1e-9).scale(t.makespan));
  CHECK(comm_classes(t.busy) == doctest::Approx(t.comm_busy).epsilon(1e-9).scale(t.makespan));
  CHECK(t.stage_time.size() == static_cast<std::size_t>(d.pp));
  if (d.ep == 1) {
    for (OpClass c : {OpClass::EpDispatch, OpClass::EpCombine}) {
      CHECK(at(t.critical, c) == 0);
      CHECK(at(t.busy, c) == 0);
    }
    CHECK(t.expert_imbalance <= 1e-9 * t.makespan);
  }
}

// Invariants of the run's sums and of what the JSON says about them.
void check_totals(const Served& s) {
  const ServingBreakdown& b = s.result.breakdown;
  const Degrees& d = s.plan.deg;
  REQUIRE(b.steps > 0);
  CHECK(b.comm_exposed <= b.comm_busy + kTol);
  CHECK(sum(b.critical) + b.idle_on_path == doctest::Approx(b.step_time).epsilon(1e-9));
  if (d.ep == 1) CHECK(at(b.critical, OpClass::EpDispatch) + at(b.critical, OpClass::EpCombine) == 0);
  json j = breakdown_to_json(b, d);
  CHECK(j["scope"]["replicas"] == d.dp);
  CHECK(j["scope"]["gpus_per_replica"] == d.pp * d.unit());
  CHECK(j["comm_overlapped_s"].get<double>() >= -kTol);
  CHECK(j["per_gpu"]["comm_exposed_s"].get<double>() <= j["per_gpu"]["comm_busy_s"].get<double>() + kTol);
  CHECK(j["per_replica_mean"]["step_time_s"].get<double>() * d.dp == doctest::Approx(b.step_time));
  CHECK(j["comm_critical_path_s"].get<double>() == doctest::Approx(comm_classes(b.critical)));
  if (d.pp == 1) {
    CHECK(j["pipeline_bubble_s"].get<double>() == 0);
  } else {
    CHECK(j["pipeline_span_s"].get<double>() > 0);
  }
  if (d.ep == 1) {
    CHECK(j["critical_path_s"]["ep_dispatch"].get<double>() == 0);
    CHECK(j["busy_s"]["ep_combine"].get<double>() == 0);
  }
}

}  // namespace

TEST_CASE("breakdown: exposed ≤ busy communication, the critical path sums to the step, no EP or bubble where none") {
  const RequestTrace trace = load_request_trace("synthetic:n=24,rate=40,prompt=lognormal:300:0.5,output=fixed:12,seed=7");
  const std::vector<Case> cases = {
      {"llama3-70b", "dgx-h100:1", "tp=8"},                         // dense TP
      {"llama3-70b", "dgx-h100:2", "tp=8,pp=2"},                    // TP + PP
      {"llama3-70b", "dgx-h100:1", "tp=4,dp=2"},                    // dense, dp > 1
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,dp=4"},                  // MoE, ep = 1, dp > 1
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,attn_dp=2,ep=1,dp=2"},   // MoE, ep = 1 across attention groups
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,ep=4,attn_dp=4"},        // MoE, EP with expert TP… and attention DP
      {"qwen3-30b-a3b", "dgx-h100:1", "tp=1,ep=8,attn_dp=8"},       // MoE, EP = attention DP
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,pp=2,ep=2,dp=2"},        // MoE, EP + PP, dp > 1
  };
  for (const auto& k : cases) {
    CAPTURE(k.model);
    CAPTURE(k.plan);
    Served s = serve_case(k, trace);
    REQUIRE(!s.steps.empty());
    for (const auto& t : s.steps) check_step(t, s.plan.deg);
    check_totals(s);
  }
}

TEST_CASE("breakdown: expert all-to-alls appear with expert parallelism, and only then") {
  const RequestTrace trace = load_request_trace("synthetic:n=8,rate=20,prompt=fixed:256,output=fixed:8,seed=3");
  Served ep = serve_case({"mixtral-8x7b", "dgx-h100:1", "tp=2,ep=4,attn_dp=4"}, trace);
  CHECK(at(ep.result.breakdown.busy, OpClass::EpDispatch) > 0);
  CHECK(at(ep.result.breakdown.busy, OpClass::EpCombine) > 0);
  // ep = 1 across attention groups still moves tokens between groups: expert-TP traffic.
  Served across = serve_case({"mixtral-8x7b", "dgx-h100:1", "tp=2,attn_dp=2,ep=1,dp=2"}, trace);
  CHECK(at(across.result.breakdown.busy, OpClass::EpDispatch) == 0);
  CHECK(at(across.result.breakdown.busy, OpClass::EtpComm) > 0);
}

TEST_CASE("breakdown: exposed communication is per GPU, net of that GPU's compute") {
  // Two ranks: compute on rank 1 [0, 1], then a collective on both [1, 3] (rank 0 computes
  // [0, 2] meanwhile), then compute on rank 0 [3, 4]. Rank 0's communication is hidden for
  // [1, 2] and exposed for [2, 3]; rank 1's is exposed for all of [1, 3].
  StepProgram p;
  p.rank_gpu = {0, 1};
  const int g = p.add_group({0, 1});
  auto compute = [&](int rank, std::initializer_list<int> after) {
    StepOp op;
    op.type = OpType::Compute;
    op.cls = OpClass::Attention;
    op.rank = rank;
    return p.add(op, after);
  };
  const int c0 = compute(0, {}), c1 = compute(1, {});
  StepOp coll;
  coll.type = OpType::Collective;
  coll.cls = OpClass::TpComm;
  coll.group = g;
  coll.bytes = 1;
  const int x = p.add(coll, {c1});
  const int c2 = compute(0, {x});
  const std::vector<double> start = {0, 0, 1, 3}, end = {2, 1, 3, 4};
  const std::vector<int> pred = {-1, -1, c1, x};
  (void)c0;
  (void)c2;
  StepTiming t = summarize_schedule(p, start, end, pred, nullptr);
  CHECK(t.makespan == doctest::Approx(4));
  CHECK(t.comm_busy == doctest::Approx(2));            // both ranks: 2 s of collective
  CHECK(t.comm_exposed == doctest::Approx((1 + 2) / 2.0));
  CHECK(at(t.critical, OpClass::TpComm) == doctest::Approx(2));
  CHECK(at(t.critical, OpClass::Attention) == doctest::Approx(2));
  CHECK(t.idle_on_path == doctest::Approx(0));
}

TEST_CASE("breakdown: sums over replicas equal the replicas run on their own") {
  const RequestTrace trace = load_request_trace("synthetic:n=16,rate=30,prompt=lognormal:400:0.5,output=fixed:10,seed=11");
  Served both = serve_case({"llama3-70b", "dgx-h100:1", "tp=4,dp=2"}, trace);
  const ServingBreakdown& b = both.result.breakdown;
  ServingBreakdown alone;
  for (int rep = 0; rep < 2; ++rep) {
    RequestTrace mine{trace.source, {}};
    for (std::size_t i = 0; i < trace.requests.size(); ++i)
      if (both.result.requests[i].replica == rep) mine.requests.push_back(trace.requests[i]);
    REQUIRE(!mine.requests.empty());
    Served one = serve_case({"llama3-70b", "dgx-h100:1", "tp=4"}, mine, 4);
    REQUIRE(one.plan.deg.dp == 1);
    const ServingBreakdown& o = one.result.breakdown;
    alone.steps += o.steps;
    alone.step_time += o.step_time;
    alone.comm_busy += o.comm_busy;
    alone.comm_exposed += o.comm_exposed;
    for (std::size_t i = 0; i < o.critical.size(); ++i) alone.critical[i] += o.critical[i];
  }
  CHECK(b.steps == alone.steps);
  CHECK(b.step_time == doctest::Approx(alone.step_time).epsilon(1e-9));
  CHECK(b.comm_busy == doctest::Approx(alone.comm_busy).epsilon(1e-9));
  CHECK(b.comm_exposed == doctest::Approx(alone.comm_exposed).epsilon(1e-9));
  CHECK(sum(b.critical) == doctest::Approx(sum(alone.critical)).epsilon(1e-9));
  // The JSON's per-replica and per-GPU means are the sums ÷ replicas.
  json j = breakdown_to_json(b, both.plan.deg);
  CHECK(j["per_replica_mean"]["step_time_s"].get<double>() == doctest::Approx(alone.step_time / 2));
  CHECK(j["per_gpu"]["comm_busy_s"].get<double>() == doctest::Approx(alone.comm_busy / 2));
}
