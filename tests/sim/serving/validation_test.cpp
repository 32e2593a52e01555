// tests/sim/serving/validation_test.cpp — the validation table's bounds: calibration rows within ±5%, check
// rows within their targets unless a known cause is stated — and a stated cause only where the row
// really misses, so that a model that improves forces the table (and docs/validation.md) to say so.
#include <doctest/doctest.h>

#include <set>

#include "sim/simgrid/fidelity.hpp"
#include "sim/simgrid/simgrid_executor.hpp"
#include "sim/step/analytic_executor.hpp"
#include "sim/serving/validation.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"

using namespace shardsim;

namespace {

const std::vector<ValidationRow>& rows() {
  static const std::vector<ValidationRow> r =
      run_validation([](const Cluster& c) { return std::make_unique<AnalyticExecutor>(c); });
  return r;
}

}  // namespace

TEST_CASE("validation: every row is inside its target or carries the cause of its miss" * doctest::test_suite("heavy")) {
  for (const auto& r : rows()) {
    INFO(r.name << ": published " << r.published << ", simulated " << r.simulated << " (" << 100 * r.error() << "%)");
    if (r.known_miss.empty()) CHECK(r.within());
    else CHECK_FALSE(r.within());  // a fixed row must lose its excuse
    // Targets: calibration ±5%, a trace's statistics ±5%, end-to-end throughput ±10%, cross-node
    // expert all-to-alls ±20% (issue 43), energy per token and what it divides ±15%, a single engine
    // iteration's time ±15% (issue 42's p50 target), the rest ±25%.
    CHECK(r.tolerance == doctest::Approx(r.role == RowRole::Calibration           ? 0.05
                                         : r.group == "workloads"                ? 0.05
                                         : r.group == "end-to-end throughput"    ? 0.10
                                         : r.group == "expert all-to-all"        ? 0.20
                                         : r.group == "energy"                   ? 0.15
                                         : r.group == "engine steps"             ? 0.15
                                                                                 : 0.25));
    CHECK_FALSE(r.source.empty());
    if (r.role == RowRole::Calibration) CHECK_FALSE(r.sets.empty());
    else CHECK(r.sets.empty());
  }
}

TEST_CASE("validation: the check set covers MoE throughput and server latency and collective curves" * doctest::test_suite("heavy")) {
  // A curve = one collective kind on one group size, checked at several message sizes.
  int checks = 0, moe = 0;
  std::set<std::string> curves;  // "8×H100 all-reduce", "32×H100 (4 nodes) all-reduce", …
  for (const auto& r : rows()) {
    if (r.role != RowRole::Check) continue;
    ++checks;
    if (r.group == "end-to-end throughput" && r.name.find("Mixtral") != std::string::npos) ++moe;
    if (r.group == "collectives") curves.insert(r.name.substr(0, r.name.rfind(' ', r.name.rfind(' ') - 1)));
  }
  CHECK(checks >= 8);
  CHECK(moe >= 3);
  int server_runs = 0;
  for (const auto& r : rows())
    if (r.group == "server latency" && r.name.find("TPOT p99") != std::string::npos) ++server_runs;
  CHECK(server_runs >= 2);
  int closed_loop = 0;  // a published concurrency sweep: throughput, TTFT and ITL at each client count
  for (const auto& r : rows())
    if (r.role == RowRole::Check && r.setup.find("closed loop") != std::string::npos) ++closed_loop;
  CHECK(closed_loop >= 3 * 8);
  CHECK(curves.size() >= 2);
}

TEST_CASE("validation: the SimGrid column serves end-to-end rows at the simgrid tier and agrees where nothing contends") {
  // No row has contention (one collective alone, one NVLink domain, or EP traffic priced alike),
  // so the simgrid tier must land on the analytic figures; a column that ran folded step programs
  // whole in SimGrid (one layer standing for 80) was 10–30× too fast and passed unnoticed.
  ValidationOptions o;
  o.request_scale = 0.05;
  const auto analytic = run_validation([](const Cluster& c) { return std::make_unique<AnalyticExecutor>(c); }, o);
  const auto runner = make_in_process_runner();
  o.serve = [&runner](const Plan& plan, const ModelSpec& model, const Cluster& cluster, const std::string& spec,
                      const RequestTrace& trace, const RoutingSource* routing, const ServingOptions& so) {
    FidelityReport report;
    ServingResult r = serve_at_fidelity(Tier::Simgrid, plan, model, cluster, spec, trace, routing, so, runner.get(), report, 4);
    CHECK(report.sampled_steps > 0);
    CHECK(report.failed == 0);
    return r;
  };
  const auto simgrid = run_validation([](const Cluster& c) { return std::make_unique<SimgridExecutor>(c); }, o);
  REQUIRE(simgrid.size() == analytic.size());
  for (std::size_t i = 0; i < simgrid.size(); ++i) {
    INFO(analytic[i].name << ": analytic " << analytic[i].simulated << ", simgrid " << simgrid[i].simulated);
    CHECK(simgrid[i].simulated == doctest::Approx(analytic[i].simulated).epsilon(0.01));
  }
}

TEST_CASE("validation: the error summary is |error| per metric and scope over the end-to-end check rows (issue 42)") {
  auto row = [](const char* metric, double err, const char* gpu, int nodes, RowRole role = RowRole::Check) {
    ValidationRow r;
    r.published = 100;
    r.simulated = 100 * (1 + err);
    r.role = role;
    r.metric = metric;
    r.gpu = gpu;
    r.nodes = nodes;
    return r;
  };
  std::vector<ValidationRow> rows = {row("throughput", -0.02, "H100", 1), row("throughput", 0.30, "H100", 9),
                                     row("throughput", 0.05, "H200", 1),  row("throughput", -0.10, "H100", 1),
                                     row("TTFT p99", -0.5, "H100", 1),    row("throughput", 0.9, "H100", 1, RowRole::Calibration)};
  ValidationRow collective;  // not an end-to-end row: no metric
  collective.published = 1;
  collective.simulated = 3;
  rows.push_back(collective);
  const std::vector<ErrorSummary> s = summarize_errors(rows);
  auto find = [&](const std::string& metric, const std::string& scope) -> const ErrorSummary& {
    for (const auto& x : s)
      if (x.metric == metric && x.scope == scope) return x;
    FAIL("no summary for " << metric << " / " << scope);
    return s.front();
  };
  const ErrorSummary& all = find("throughput", "all");  // |error| 0.02 0.05 0.10 0.30; the calibration row is not counted
  CHECK(all.rows == 4);
  CHECK(all.median == doctest::Approx(0.075));
  CHECK(all.p90 == doctest::Approx(0.30));  // nearest rank: the 4th of 4
  CHECK(all.max == doctest::Approx(0.30));
  CHECK(find("throughput", "single-node").rows == 3);
  CHECK(find("throughput", "single-node").median == doctest::Approx(0.05));
  CHECK(find("throughput", "multi-node").max == doctest::Approx(0.30));
  CHECK(find("throughput", "H200").rows == 1);
  CHECK(find("TTFT p99", "all").median == doctest::Approx(0.5));
  for (const auto& x : s) CHECK_FALSE((x.scope == "multi-node" && x.metric == "TTFT p99"));  // no rows, no line
}
