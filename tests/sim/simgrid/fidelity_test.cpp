// tests/sim/simgrid/fidelity_test.cpp — the fidelity tiers over the serving loop: analytic and sampled SimGrid
// agree where nothing contends; the worker pool carries SimGrid steps and survives a dead worker.
#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "sim/step/analytic_executor.hpp"
#include "sim/simgrid/fidelity.hpp"
#include "sim/simgrid/link_report.hpp"
#include "sim/step/schedule_summary.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/plan/plan.hpp"
#include "common/worker_pool.hpp"
#include "tests/cli_runner.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

TEST_CASE("fidelity: sampled SimGrid agrees with analytic on one NVLink node") {
  ModelSpec m = load_model("mixtral-8x7b");
  Cluster c = load_cluster("dgx-h100:1");
  Plan p = plan_from_string("tp=2,ep=2,etp=1,dp=4", 8, plan_defaults(m));
  RequestTrace t = load_request_trace("synthetic:n=40,rate=10,seed=3");
  auto routing = make_routing("synthetic:seed=2", m.routing_shape());
  ServingOptions o;
  FidelityReport ra, rs;
  ServingResult a = serve_at_fidelity(Tier::Analytic, p, m, c, "dgx-h100:1", t, routing.get(), o, nullptr, ra);
  auto runner = make_in_process_runner();
  ServingResult s = serve_at_fidelity(Tier::Simgrid, p, m, c, "dgx-h100:1", t, routing.get(), o, runner.get(), rs, 8);
  CHECK(ra.sampled_steps == 0);
  CHECK(rs.sampled_steps > 0);
  CHECK(rs.failed == 0);
  CHECK(rs.ratio_median == doctest::Approx(1.0).epsilon(0.02));
  Metrics ma = summarize(a, o, 8), ms = summarize(s, o, 8);
  CHECK(ms.tpot_ms.p50 == doctest::Approx(ma.tpot_ms.p50).epsilon(0.02));
  CHECK(ms.completed == ma.completed);
  // The scoring line counts the analytic pass's executions too (pass 2 reuses its steps).
  CHECK(s.breakdown.executed_steps >= a.breakdown.executed_steps);
  CHECK(s.breakdown.executed_chunk_steps >= a.breakdown.executed_chunk_steps);
}

TEST_CASE("fidelity: the full tier runs every step whole in SimGrid, never a folded program") {
  ModelSpec m = load_model("mixtral-8x7b");
  Cluster c = load_cluster("dgx-h100:1");
  Plan p = plan_from_string("tp=2,ep=2,etp=1", 2, plan_defaults(m));
  RequestTrace t = load_request_trace("synthetic:n=3,prompt=fixed:64,output=fixed:4,seed=3");
  auto routing = make_routing("synthetic:seed=2", m.routing_shape());
  ServingOptions o;  // the fast path by default: the full tier must override it
  FidelityReport r;
  auto runner = make_in_process_runner();
  ServingResult s = serve_at_fidelity(Tier::Full, p, m, c, "dgx-h100:1", t, routing.get(), o, runner.get(), r);
  CHECK(r.failed == 0);
  CHECK(r.sampled_steps == s.breakdown.steps);
  CHECK(s.breakdown.layers_lowered == m.layers);
  CHECK(summarize(s, o, 2).completed == 3);
}

TEST_CASE("fidelity: SimGrid steps through the worker pool — a killed worker is a failed evaluation") {
  // A handler that dies on request "die" and otherwise serves SimGrid steps.
  WorkerPool pool(2, [](std::string_view req) -> std::string {
    if (req == "die") ::raise(SIGKILL);
    return simgrid_worker_handler(req);
  });
  CHECK(pool.call("die").status == CallStatus::WorkerDied);
  ModelSpec m = load_model("llama3-70b");
  Cluster c = load_cluster("dgx-h100:1");
  Plan p = plan_from_string("tp=8", 8, plan_defaults(m));
  RequestTrace t = load_request_trace("synthetic:n=12,rate=4,prompt=fixed:256,output=fixed:16,seed=1");
  auto runner = make_pool_runner(pool);
  FidelityReport r;
  ServingOptions o;
  ServingResult s = serve_at_fidelity(Tier::Simgrid, p, m, c, "dgx-h100:1", t, nullptr, o, runner.get(), r, 4);
  CHECK(r.failed == 0);
  CHECK(r.sampled_steps > 0);
  CHECK(pool.restarts() == 1);
  for (const auto& q : s.requests) CHECK(q.completed);
}

TEST_CASE("fidelity: workers dying on every sample are counted and backed off — the run still completes") {
  WorkerPool pool(2, [](std::string_view) -> std::string {
    ::raise(SIGKILL);
    return "";
  });
  ModelSpec m = load_model("llama3-70b");
  Cluster c = load_cluster("dgx-h100:1");
  Plan p = plan_from_string("tp=8", 8, plan_defaults(m));
  RequestTrace t = load_request_trace("synthetic:n=12,rate=4,prompt=fixed:256,output=fixed:16,seed=1");
  auto runner = make_pool_runner(pool);
  FidelityReport r;
  ServingOptions o;
  ServingResult s = serve_at_fidelity(Tier::Simgrid, p, m, c, "dgx-h100:1", t, nullptr, o, runner.get(), r, 4);
  CHECK(r.sampled_steps > 0);
  CHECK(r.failed == r.sampled_steps);     // every sample failed, and the report says so
  CHECK(r.worker_restarts > 0);
  CHECK(r.worker_restarts < r.sampled_steps + 2);
  CHECK(!r.errors.empty());
  CHECK(r.ratio_median == 1.0);           // no sample: the analytic timing stands
  for (const auto& q : s.requests) CHECK(q.completed);
}

TEST_CASE("fidelity: simgrid-tier JSON is byte-identical at 1 and 2 workers") {
  std::string a = "/tmp/shardsim_w1_" + std::to_string(::getpid()) + ".json";
  std::string b = "/tmp/shardsim_w2_" + std::to_string(::getpid()) + ".json";
  std::string args = "simulate --model qwen3-30b-a3b --cluster dgx-h100:2 --plan tp=1,ep=16,attn_dp=16 --requests 30 "
                     "--fidelity simgrid --samples 6 --seed 5 --json ";
  REQUIRE(test::run_cli(args + a + " --workers 1").exit_code == 0);
  REQUIRE(test::run_cli(args + b + " --workers 2").exit_code == 0);
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  json ja = json::parse(slurp(a)), jb = json::parse(slurp(b));
  ja["provenance"].erase("wall_s");
  jb["provenance"].erase("wall_s");
  CHECK(ja["fidelity"]["simgrid_steps"].get<int>() == 6);
  CHECK(ja.dump() == jb.dump());
  std::remove(a.c_str());
  std::remove(b.c_str());
}

namespace {

// 16-way expert parallelism over two nodes whose leaves serve 4 GPUs each, uplinks 4:1
// oversubscribed: the all-to-alls cross the spine and SimGrid slows them. Offline, so both tiers
// see the same batches and only the step times differ.
struct ContendedRun {
  ModelSpec m = load_model("qwen3-30b-a3b");
  std::string spec = "dgx-h100:2,rails=off,radix=8,oversub=4";
  Cluster c = load_cluster(spec);
  Plan p = plan_from_string("tp=1,attn_dp=16,ep=16", 16, plan_defaults(m));
  RequestTrace t;
  std::unique_ptr<RoutingSource> routing = make_routing("synthetic:seed=2", m.routing_shape());
  ServingOptions o;
  explicit ContendedRun(std::size_t requests) : t(head(load_request_trace("azure-conv"), requests)) { o.offline = true; }
};

}  // namespace

TEST_CASE("fidelity: the simgrid tier charges contention to communication, not to compute") {
  ContendedRun w(30);
  auto& [m, spec, c, p, t, routing, o] = w;
  FidelityReport ra, rs;
  ServingResult a = serve_at_fidelity(Tier::Analytic, p, m, c, spec, t, routing.get(), o, nullptr, ra);
  auto runner = make_in_process_runner();
  ServingResult s = serve_at_fidelity(Tier::Simgrid, p, m, c, spec, t, routing.get(), o, runner.get(), rs, 4);
  REQUIRE(rs.failed == 0);
  REQUIRE(rs.ratio_median > 1.001);
  double compute_a = 0, compute_s = 0, comm_a = 0, comm_s = 0;
  for (int i = 0; i < kNumOpClasses; ++i) {
    const auto k = static_cast<std::size_t>(i);
    (is_comm_class(static_cast<OpClass>(i)) ? comm_a : compute_a) += a.breakdown.critical[k];
    (is_comm_class(static_cast<OpClass>(i)) ? comm_s : compute_s) += s.breakdown.critical[k];
  }
  CHECK(s.breakdown.steps == a.breakdown.steps);
  CHECK(compute_s == doctest::Approx(compute_a).epsilon(1e-9));
  CHECK(comm_s > comm_a);
  // The critical path still adds up to the (longer) step time.
  CHECK(compute_s + comm_s + s.breakdown.idle_on_path == doctest::Approx(s.breakdown.step_time).epsilon(1e-6));
  CHECK(s.breakdown.step_time - a.breakdown.step_time == doctest::Approx(comm_s - comm_a).epsilon(1e-6));
}

TEST_CASE("fidelity: the simgrid tier's contention figure weighs each sample by the run time it stands for") {
  // Two samples: all-to-all 1.0× (a decode step, 9 of the run's 10 steps) and 2.0× with sends
  // 3.0× (a large step, 1 of 10). Per sample alike the all-to-all would read 1.5×; over the run
  // it is 1.1×, the sends (weighed by the all-to-all slot they share) 1.2×.
  RunWeightedSlowdown w({{1, 1, 1, 1.0, 1.0}, {1, 1, 1, 2.0, 3.0}});
  const std::array<double, 4> a2a{0, 0, 0, 1e-3};
  w.add(0, a2a, 9);
  w.add(1, a2a);
  CHECK(w.slowdown(3, 0) == doctest::Approx(1.1));
  CHECK(w.slowdown(4, 0) == doctest::Approx(1.2));
  // No all-reduce time in any step: the fallback (the samples' own figure) stands.
  CHECK(w.slowdown(0, 1.7) == 1.7);
  // Time-weighted, not step-counted: one large step of ten times the time tips it.
  RunWeightedSlowdown v({{1, 1, 1, 1.0, 1.0}, {1, 1, 1, 2.0, 1.0}});
  v.add(0, a2a, 9);
  v.add(1, {0, 0, 0, 9e-3});
  CHECK(v.slowdown(3, 0) == doctest::Approx(1.5));
}

TEST_CASE("fidelity: per-link loads of the SimGrid steps, every link direction listed, busiest first") {
  ContendedRun w(20);
  auto& [m, spec, c, p, t, routing, o] = w;
  FidelityReport rs;
  auto runner = make_in_process_runner();
  serve_at_fidelity(Tier::Simgrid, p, m, c, spec, t, routing.get(), o, runner.get(), rs, 4);
  REQUIRE(rs.failed == 0);
  REQUIRE(!rs.links.empty());
  CHECK(rs.simgrid_seconds > 0);
  double leaf_spine = 0;
  for (const auto& l : rs.links) {
    CHECK(l.bytes > 0);
    CHECK(l.steps >= 1);
    CHECK(l.steps <= rs.sampled_steps);
    CHECK(l.peak <= 1.0 + 1e-9);  // a direction cannot be busier than its step
    CHECK(l.peak * rs.simgrid_seconds >= l.busy_seconds / l.steps - 1e-12);
    if (c.link(l.dlink / 2).cls == LinkClass::LeafSpine) leaf_spine += l.bytes;
  }
  CHECK(leaf_spine > 0);  // 16-way EP over two leaves crosses the spine
  const std::string csv = links_csv(rs, c);
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  CHECK(line == "link,direction,class,from,to,bandwidth_gb_s,bytes,utilization_mean,utilization_peak,steps");
  long rows = 0, idle = 0;
  double last = 2;
  while (std::getline(in, line)) {
    ++rows;
    idle += line.substr(line.rfind(',') + 1) == "0";
    const double mean = std::stod(line.substr(line.rfind(',', line.rfind(',', line.rfind(',') - 1) - 1) + 1));
    CHECK(mean <= last);  // busiest first
    last = mean;
  }
  CHECK(rows == 2L * c.num_links());
  CHECK(idle == rows - static_cast<long>(rs.links.size()));  // the directions that carried nothing are listed too
}
