// tests/sim/serving/load_control_test.cpp — load control: arrivals at a rate, the closed loop, load sweeps and
// the capacity search (docs/load.md), and `shardsim sweep`.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "optimizers/space/serving_evaluator.hpp"
#include "sim/plan/plan.hpp"
#include "sim/serving/load_sweep.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/serving.hpp"
#include "sim/step/analytic_executor.hpp"
#include "tests/cli_runner.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

// One serving setup whose load can be varied: llama3-70b tp=4,dp=2 on one node (dense: fast).
struct Setup {
  ModelSpec model = load_model("llama3-70b");
  Cluster cluster = load_cluster("dgx-h100:1");
  Plan plan = plan_from_string("tp=4,dp=2", 8, plan_defaults(model));
  RequestTrace trace = load_request_trace("synthetic:n=300,rate=10,prompt=lognormal:600:0.6,output=lognormal:150:0.5,seed=4");
  AnalyticExecutor ex{cluster};

  ServingResult serve_with(const RequestTrace& t, const ServingOptions& o) const {
    return serve(plan, model, cluster, t, nullptr, ex, o);
  }
  Metrics at_rate_metrics(double rate) const {
    ServingOptions o;
    ServingResult r = serve_with(at_rate(trace, rate, Arrival::Poisson, 7), o);
    return summarize(r, o, cluster.num_gpus());
  }
};

std::string slurp_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const Setup& setup() {
  static const Setup s;
  return s;
}

// A scorer whose TTFT p99 is 100 ms × load: the goal p99 TTFT ≤ 1 s is met up to load 10 exactly.
Metrics linear_latency(double load) {
  Metrics m;
  m.requests = m.completed = 100;
  m.ttft_ms.p99 = m.ttft_ms.p90 = m.ttft_ms.p50 = 100 * load;
  m.tpot_ms.p99 = 10;
  m.met_slo = load <= 10 ? 100 : 0;
  m.slo_attainment = m.met_slo / 100.0;
  return m;
}

}  // namespace

TEST_CASE("load control: Poisson arrivals at a rate keep the lengths and scale with the rate") {
  const RequestTrace base = load_request_trace("synthetic:n=20000,rate=3,seed=2");
  RequestTrace a = at_rate(base, 5, Arrival::Poisson, 11);
  RequestTrace b = at_rate(base, 10, Arrival::Poisson, 11);
  REQUIRE(a.requests.size() == base.requests.size());
  CHECK(a.requests.front().arrival_s == 0);
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    CHECK(a.requests[i].prompt_tokens == base.requests[i].prompt_tokens);
    CHECK(a.requests[i].output_tokens == base.requests[i].output_tokens);
    // Common random numbers: the same unit gaps at every rate.
    CHECK(b.requests[i].arrival_s == doctest::Approx(a.requests[i].arrival_s / 2).epsilon(1e-12));
  }
  const RequestTraceStats s = request_trace_stats(a);
  CHECK(s.rate_per_s == doctest::Approx(5).epsilon(0.03));  // 20,000 gaps: ±1.4% at 2σ
  CHECK(at_rate(base, 5, Arrival::Poisson, 12).requests[5].arrival_s != a.requests[5].arrival_s);
  // The trace's own shape, rescaled: gaps keep their ratios.
  RequestTrace c = at_rate(base, 6, Arrival::Trace, 0);
  CHECK(request_trace_stats(c).rate_per_s == doctest::Approx(6).epsilon(1e-9));
  const double g0 = base.requests[2].arrival_s - base.requests[1].arrival_s, g1 = base.requests[3].arrival_s - base.requests[2].arrival_s;
  CHECK((c.requests[2].arrival_s - c.requests[1].arrival_s) * g1 == doctest::Approx((c.requests[3].arrival_s - c.requests[2].arrival_s) * g0));
  CHECK_THROWS_AS(at_rate(base, 0, Arrival::Poisson, 1), InputError);
  CHECK_THROWS_AS(at_rate(base, -3, Arrival::Trace, 1), InputError);
}

TEST_CASE("load control: a closed loop keeps exactly N requests in flight") {
  const Setup& s = setup();
  for (int n : {1, 6, 40}) {
    for (double think : {0.0, 0.25}) {
      CAPTURE(n);
      CAPTURE(think);
      ServingOptions o;
      o.concurrency = n;
      o.think_time = think;
      ServingResult r = s.serve_with(s.trace, o);
      const auto& q = r.requests;
      for (const auto& x : q) REQUIRE(x.completed);
      // Client c is served by replica c mod dp, and a replica's clients share its requests (those
      // i with (i mod N) mod dp = the replica's) in order: its first ones go at 0, one a client,
      // and the k-th after them when the k-th of its requests finished (+ think) — whichever
      // client sent that one.
      const int dp = s.plan.deg.dp;
      for (int rep = 0; rep < dp; ++rep) {
        std::vector<std::size_t> mine;
        std::vector<double> frees;
        for (std::size_t i = 0; i < q.size(); ++i)
          if (static_cast<int>(i % static_cast<std::size_t>(n)) % dp == rep) {
            mine.push_back(i);
            frees.push_back(q[i].finish + think);
          }
        std::sort(frees.begin(), frees.end());
        std::size_t clients = 0;
        for (int c = rep; c < n; c += dp) ++clients;
        for (std::size_t k = 0; k < mine.size(); ++k)
          CHECK(q[mine[k]].arrival ==
                doctest::Approx(k < clients ? 0.0 : frees[k - clients]).epsilon(1e-12));
      }
      if (think > 0) continue;
      // Without think time, at every moment a request is sent, N are in flight — until a
      // replica's list has run out and the first request after that finishes.
      double cutoff = 1e300;
      for (std::size_t i = q.size() - std::min<std::size_t>(q.size(), static_cast<std::size_t>(n)); i < q.size(); ++i)
        for (const auto& x : q)
          if (x.finish > q[i].arrival) cutoff = std::min(cutoff, x.finish);
      std::size_t checked = 0;
      for (const auto& x : q) {
        if (x.arrival >= cutoff) continue;
        ++checked;
        long in_flight = std::count_if(q.begin(), q.end(), [&](const RequestResult& y) { return y.arrival <= x.arrival && y.finish > x.arrival; });
        CHECK(in_flight == n);
      }
      CHECK(checked >= q.size() / 2);
    }
  }
}

TEST_CASE("load control: a closed loop's throughput grows with clients and its latency with them") {
  const Setup& s = setup();
  double last_tput = 0, last_tpot = 0;
  for (int n : {1, 4, 16, 64}) {
    ServingOptions o;
    o.concurrency = n;
    ServingResult r = s.serve_with(s.trace, o);
    Metrics m = summarize(r, o, 8);
    CAPTURE(n);
    CHECK(m.output_tok_s > last_tput);
    CHECK(m.tpot_ms.p50 >= last_tpot);
    last_tput = m.output_tok_s;
    last_tpot = m.tpot_ms.p50;
  }
}

TEST_CASE("load sweep: throughput is monotone in the offered rate up to saturation") {
  const Setup& s = setup();
  ServingOptions off;
  off.offline = true;
  const Metrics offline = summarize(s.serve_with(s.trace, off), off, 8);
  const double capacity = offline.completed / offline.makespan_s;
  std::vector<double> rates;
  for (double f : {0.1, 0.2, 0.35, 0.5, 0.7, 0.85, 1.0}) rates.push_back(f * capacity);
  SloGoal goal;
  std::vector<LoadPoint> pts = sweep_loads(rates, [&](double r) { return s.at_rate_metrics(r); }, goal, 2);
  REQUIRE(pts.size() == rates.size());
  for (std::size_t i = 1; i < pts.size(); ++i) {
    CAPTURE(pts[i].load);
    CHECK(pts[i].load > pts[i - 1].load);
    CHECK(pts[i].metrics.output_tok_s > pts[i - 1].metrics.output_tok_s);
    CHECK(pts[i].metrics.ttft_ms.p99 >= 0.9 * pts[i - 1].metrics.ttft_ms.p99);
  }
  // The sweep is the same whatever the thread count.
  std::vector<LoadPoint> one = sweep_loads(rates, [&](double r) { return s.at_rate_metrics(r); }, goal, 1);
  for (std::size_t i = 0; i < pts.size(); ++i) CHECK(one[i].metrics.output_tok_s == pts[i].metrics.output_tok_s);
}

TEST_CASE("capacity search: brackets the highest load that meets the goal") {
  SloGoal goal;
  goal.kind = SloGoal::Kind::Percentile;
  goal.value = 99;
  goal.ttft_s = 1.0;
  goal.tpot_s = 0.2;
  // Hand-checkable: TTFT p99 = 100 ms × load ≤ 1000 ms ⇔ load ≤ 10.
  CapacityResult r = max_load_meeting(linear_latency, 1, 64, goal, 0.01);
  CHECK(r.bound == CapacityResult::Bound::Found);
  CHECK(r.max_meeting <= 10);
  CHECK(r.min_failing > 10);
  CHECK(r.min_failing <= r.max_meeting * 1.01);
  // Whole numbers (client counts): 10 meets, 11 does not.
  CapacityResult c = max_load_meeting(linear_latency, 1, 64, goal, 0.01, 16, true);
  CHECK(c.max_meeting == 10);
  CHECK(c.min_failing == 11);
  // The range expands upwards while its top meets the goal (here from 2 to 4, 8, 16).
  CapacityResult e = max_load_meeting(linear_latency, 1, 2, goal, 0.01, 16, false, {}, 1000);
  CHECK(e.bound == CapacityResult::Bound::Found);
  CHECK(e.max_meeting == doctest::Approx(10).epsilon(0.011));
  CHECK(max_load_meeting(linear_latency, 1, 8, goal).bound == CapacityResult::Bound::AllMeet);
  CHECK(max_load_meeting(linear_latency, 12, 64, goal).bound == CapacityResult::Bound::NoneMeet);
  // Known points are not scored again.
  int calls = 0;
  auto counting = [&](double load) { ++calls; return linear_latency(load); };
  std::vector<LoadPoint> known = {{8, linear_latency(8), true}, {16, linear_latency(16), false}};
  CapacityResult k = max_load_meeting(counting, 8, 16, goal, 0.01, 16, true, known);
  CHECK(k.max_meeting == 10);
  CHECK(calls == static_cast<int>(k.probes.size()));
  for (const auto& p : k.probes) CHECK((p.load != 8 && p.load != 16));
  // Attainment goal: 90% of requests within both bounds.
  SloGoal att = parse_slo_goal("attain=0.9", 1.0, 0.2, "test");
  CHECK(att.kind == SloGoal::Kind::Attainment);
  CHECK(max_load_meeting(linear_latency, 1, 64, att, 0.01, 16, true).max_meeting == 10);
  CHECK_THROWS_AS(parse_slo_goal("p95", 1, 1, "t"), InputError);
  CHECK_THROWS_AS(parse_slo_goal("attain=0", 1, 1, "t"), InputError);
  CHECK_THROWS_AS(parse_slo_goal("attain=1.5", 1, 1, "t"), InputError);
}

TEST_CASE("capacity search on the serving loop: the rate found meets the goal and 5% more misses it") {
  const Setup& s = setup();
  SloGoal goal = parse_slo_goal("p99", 1.0, 0.2, "test");
  auto score = [&](double r) { return s.at_rate_metrics(r); };
  CapacityResult r = max_load_meeting(score, 0.5, 2, goal, 0.01, 20, false, {}, 1000);
  REQUIRE(r.bound == CapacityResult::Bound::Found);
  CHECK(goal.met(score(r.max_meeting)));
  CHECK_FALSE(goal.met(score(r.min_failing)));
  CHECK(r.min_failing <= r.max_meeting * 1.011);
}

TEST_CASE("shardsim sweep: a table, the capacity and the output set, and bad load values exit 2") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("shardsim_sweep_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto r = test::run_cli("sweep --model llama3-70b --cluster dgx-h100:1 --plan tp=4,dp=2 --requests 120 --points 3 "
                         "--trace synthetic:n=120,rate=5,seed=3 --out " + dir.string());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("max rate meeting the goal") != std::string::npos);
  json j = json::parse(slurp_file(dir / "sweep.json"));
  CHECK(j["points"].size() == 3);
  CHECK(j["capacity"]["unit"] == "req/s");
  const std::string csv = slurp_file(dir / "sweep.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 3 + static_cast<long>(j["capacity"]["probes"].size()));
  fs::remove_all(dir);
  for (const char* bad : {"simulate --rate 0 --requests 2", "simulate --rate -2 --requests 2", "simulate --concurrency 0 --requests 2",
                          "simulate --offline --rate 3 --requests 2", "simulate --rate 3 --concurrency 4 --requests 2",
                          "simulate --arrivals trace --requests 2", "simulate --think-time 5 --requests 2",
                          "sweep --rates 0,2 --requests 2", "sweep --clients 1.5 --requests 2", "sweep --goal p95 --requests 2",
                          "sweep --rate 3 --requests 2", "sweep --rates 1 --clients 2 --requests 2"}) {
    CAPTURE(bad);
    auto b = test::run_cli(bad);
    CHECK(b.exit_code == 2);
    CHECK(std::count(b.err.begin(), b.err.end(), '\n') == 1);
  }
}

TEST_CASE("search objectives: the drain within a TPOT bound and the highest rate within the SLO" * doctest::test_suite("heavy")) {
  const Setup& s = setup();
  EvaluatorInputs in;
  in.model = &s.model;
  in.cluster = &s.cluster;
  in.trace = &s.trace;
  in.serving.offline = true;
  in.objective = Objective::Drain;
  const Score plain = ServingEvaluator(in).evaluate(s.plan);
  REQUIRE(plain.feasible);
  // A loose TPOT bound changes nothing; one below the plan's TPOT p99 makes it infeasible, naming /slo.
  in.objective = Objective::DrainTpot;
  in.goal = parse_slo_goal("p99", 2.0, 10.0, "test");
  const Score loose = ServingEvaluator(in).evaluate(s.plan);
  CHECK(loose.feasible);
  CHECK(loose.objective == plain.objective);
  in.goal = parse_slo_goal("p99", 2.0, 0.001, "test");
  const Score tight = ServingEvaluator(in).evaluate(s.plan);
  CHECK_FALSE(tight.feasible);
  CHECK(tight.reason.rfind("/slo", 0) == 0);
  CHECK(tight.violation > 0);
  // Capacity: a rate that meets the goal, at most the saturated rate, bracketed within 4% by a rate
  // that misses it — each re-run here on the sample the evaluator drew.
  in.objective = Objective::Capacity;
  in.goal = parse_slo_goal("p99", 1.0, 0.2, "test");
  in.seed = 7;
  const ServingEvaluator ev(in);
  const Score rate = ev.evaluate(s.plan);
  REQUIRE(rate.feasible);
  const SloCapacity c = ev.capacity(s.plan);
  CHECK(c.rate == rate.objective);
  CHECK(c.rate <= c.saturated.request_s);
  REQUIRE(c.min_failing > 0);
  CHECK(c.min_failing <= c.rate * 1.04 * 1.0001);
  const RequestTrace sample =
      capacity_sample(s.trace, c.verdict_requests(), 7, true);
  // Meets: all the run's requests, and those that arrived in its second half, meet the goal.
  auto meets = [&](double r) {
    ServingOptions o;
    const RequestTrace t = at_rate(sample, r, Arrival::Poisson, 7);
    ServingResult run = s.serve_with(t, o);
    const bool whole = in.goal.met(summarize(run, o, 1));
    const double half = t.requests[t.requests.size() / 2].arrival_s;
    std::vector<RequestResult> late;
    for (const auto& q : run.requests)
      if (q.arrival >= half) late.push_back(q);
    run.requests = late;
    return whole && in.goal.met(summarize(run, o, 1));
  };
  CHECK(meets(c.rate));
  CHECK_FALSE(meets(c.min_failing));
}
