// tests/sim/serving/measured_run_test.cpp — a user's measured run (the engines' benchmark result files) read as
// its load and measurements, replayed, and reported as check rows (issue 45 item 1).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <unistd.h>

#include "common/input_error.hpp"
#include "sim/plan/plan.hpp"
#include "sim/serving/arrivals.hpp"
#include "sim/serving/host_cost_fit.hpp"
#include "sim/serving/measured_run.hpp"
#include "sim/serving/serving.hpp"
#include "sim/step/analytic_executor.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "tests/cli_runner.hpp"

using namespace shardsim;

namespace {

std::string field_of(const std::string& text) {
  try {
    read_measured_run(text, "run.json");
  } catch (const InputError& e) {
    CHECK(e.source() == "run.json");
    return e.field();
  }
  return "(none)";
}

}  // namespace

TEST_CASE("measured run: vLLM's detailed result gives each request's lengths, the rate and the figures") {
  const std::string vllm = R"({"backend": "vllm", "num_prompts": 3, "request_rate": 2.5, "burstiness": 1.0, "max_concurrency": null,
    "completed": 3, "total_input_tokens": 600, "total_output_tokens": 60, "output_throughput": 120.5,
    "median_ttft_ms": 40, "p99_ttft_ms": 90, "mean_ttft_ms": 50, "median_tpot_ms": 12, "p99_tpot_ms": 15, "mean_tpot_ms": 12.5,
    "input_lens": [100, 200, 300], "output_lens": [10, 20, 30], "ttfts": [0.04, 0.05, 0.06]})";
  const MeasuredRun r = read_measured_run(vllm, "run.json");
  CHECK(r.per_request);
  REQUIRE(r.trace.requests.size() == 3);
  CHECK(r.trace.requests[1].prompt_tokens == 200);
  CHECK(r.trace.requests[2].output_tokens == 30);
  CHECK(r.rate == 2.5);
  CHECK(r.concurrency == 0);
  CHECK(r.output_tok_s == 120.5);
  CHECK(r.tpot_p99 == 15);
  Metrics sim;
  sim.output_tok_s = 100;
  sim.ttft_ms.p50 = 46;  // +15%: on the edge of its target
  sim.tpot_ms.p99 = 20;  // +33%: outside ±25%
  const std::vector<ValidationRow> rows = measured_run_rows(r, sim, "setup", "H100-SXM-80GB", 1);
  REQUIRE(rows.size() == 7);
  CHECK(rows[0].metric == "throughput");
  CHECK(rows[0].error() == doctest::Approx(100 / 120.5 - 1));
  CHECK(rows[0].tolerance == 0.10);
  CHECK_FALSE(rows[0].within());
  CHECK(rows[1].within());
  CHECK(rows[5].metric == "TPOT p99");
  CHECK_FALSE(rows[5].within());
  for (const auto& row : rows) CHECK(row.role == RowRole::Check);
}

TEST_CASE("measured run: SGLang's output file, its last run, an unpaced rate written as Infinity, fixed lengths") {
  const std::string sglang =
      "{\"backend\": \"sglang\", \"request_rate\": 4.0, \"completed\": 5, \"total_input_tokens\": 50, \"total_output_tokens\": 5,"
      " \"output_throughput\": 1.0}\n"
      "{\"backend\": \"sglang\", \"request_rate\": Infinity, \"max_concurrency\": 16, \"completed\": 10, \"total_input_tokens\": 10240,"
      " \"total_output_tokens\": 2560, \"output_throughput\": 3000.5, \"median_ttft_ms\": 300, \"p99_tpot_ms\": 30}\n";
  const MeasuredRun r = read_measured_run(sglang, "run.json");
  CHECK_FALSE(r.per_request);
  CHECK(r.rate == 0);
  CHECK(r.concurrency == 16);
  REQUIRE(r.trace.requests.size() == 10);
  CHECK(r.trace.requests[0].prompt_tokens == 1024);
  CHECK(r.trace.requests[9].output_tokens == 256);
  CHECK(r.output_tok_s == 3000.5);
  CHECK(r.ttft_p99 < 0);  // absent: no row
  CHECK(measured_run_rows(r, Metrics{}, "", "", 1).size() == 3);
}

TEST_CASE("measured run: what cannot be read is refused naming the key") {
  CHECK(field_of(R"({"request_rate": 1, "output_throughput": 5})") == "completed");
  CHECK(field_of(R"({"request_rate": 1, "completed": 2, "total_input_tokens": 10, "total_output_tokens": 4})") == "output_throughput");
  CHECK(field_of(R"({"request_rate": 0, "completed": 2, "total_input_tokens": 10, "total_output_tokens": 4, "output_throughput": 1})") == "request_rate");
  CHECK(field_of(R"({"input_lens": [1, 2], "output_lens": [3], "output_throughput": 1})") == "output_lens");
  CHECK(field_of(R"({"input_lens": [1, "x"], "output_lens": [3, 4], "output_throughput": 1})") == "input_lens");
  CHECK(field_of(R"({"max_concurrency": 2.5, "completed": 2, "total_input_tokens": 10, "total_output_tokens": 4, "output_throughput": 1})") == "max_concurrency");
  CHECK(field_of("") == "");
}

TEST_CASE("validate --run: the measured run replayed with the plan, each figure a check row, bad input exits 2") {
  const std::string path = "/tmp/shardsim_run_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream f(path);
    f << R"({"request_rate": 2.0, "max_concurrency": null, "completed": 60, "total_input_tokens": 61440, "total_output_tokens": 7680,
             "output_throughput": 250.0, "median_ttft_ms": 60, "p99_ttft_ms": 200, "median_tpot_ms": 12, "p99_tpot_ms": 20})";
  }
  auto r = test::run_cli("validate --run " + path + " --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=2,dp=4");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("Poisson at 2.0 req/s") != std::string::npos);
  CHECK(r.out.find("60 requests (the mean lengths)") != std::string::npos);
  for (const char* m : {"throughput", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"}) CHECK(r.out.find(m) != std::string::npos);
  CHECK(r.out.find("TTFT mean") == std::string::npos);  // not in the file: no row
  auto bad = test::run_cli("validate --run " + path + " --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=3");
  CHECK(bad.exit_code == 2);
  auto tier = test::run_cli("validate --run " + path + " --fidelity simgrid --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=2,dp=4");
  CHECK(tier.exit_code == 2);
  std::remove(path.c_str());
}

TEST_CASE("validate --run --fit: a run made with a known per-iteration host cost gives it back, and its rows become calibration rows") {
  // The "measurement": the model itself at step_overhead_ms 15 on a paced load of Llama-3.1-8B.
  const std::string json = R"({"request_rate": 30.0, "max_concurrency": null, "completed": 300, "total_input_tokens": 307200,
                               "total_output_tokens": 38400, "output_throughput": 1})";
  MeasuredRun run = read_measured_run(json, "made.json");
  const ModelSpec model = load_model("llama3.1-8b");
  const Cluster cluster = load_cluster("dgx-h100:1");
  const Plan plan = load_plan("tp=1,dp=8,engine=vllm", model, cluster);
  const RequestTrace trace = at_rate(run.trace, run.rate, Arrival::Poisson, 1);
  AnalyticExecutor ex(cluster);
  ServingOptions so;
  auto serve_plan = [&](const Plan& p) { return summarize(serve(p, model, cluster, trace, nullptr, ex, so), so, cluster.num_gpus()); };
  const Metrics truth = serve_plan(load_plan("tp=1,dp=8,engine=vllm,step_overhead_ms=15", model, cluster));
  run.output_tok_s = truth.output_tok_s;
  run.ttft_p50 = truth.ttft_ms.p50;
  run.tpot_p50 = truth.tpot_ms.p50;
  run.tpot_p99 = truth.tpot_ms.p99;
  const HostCostFit fit = fit_host_costs(run, plan, {"step_overhead_ms"}, serve_plan);
  MESSAGE("step_overhead_ms " << fit.before[0] << " -> " << fit.after[0] << ", RMS log " << fit.rms_before << " -> " << fit.rms_after
                              << ", " << fit.serves << " runs");
  CHECK(fit.before[0] == doctest::Approx(plan.engine.step_overhead * 1e3));
  CHECK(std::fabs(fit.after[0] / 15 - 1) < 0.05);
  CHECK(fit.rms_after < 0.01);
  CHECK(fit.rms_before > 5 * fit.rms_after);
  CHECK(fit.plan.engine.step_overhead == doctest::Approx(fit.after[0] * 1e-3));
  CHECK_THROWS_AS(fit_host_costs(run, plan, {"max_seqs"}, serve_plan), InputError);
  CHECK_THROWS_AS(fit_host_costs(run, plan, {"seq_overhead_us", "seq_overhead_us"}, serve_plan), InputError);

  // The command: --fit needs --run; with it the rows are calibration rows and the fitted values printed.
  const std::string path = "/tmp/shardsim_fit_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream f(path);
    f << R"({"request_rate": 2.0, "max_concurrency": null, "completed": 60, "total_input_tokens": 61440, "total_output_tokens": 7680,
             "output_throughput": 250.0, "median_ttft_ms": 60, "median_tpot_ms": 30})";
  }
  auto r = test::run_cli("validate --run " + path + " --model llama3.1-8b --cluster dgx-h100:1 --plan tp=1,dp=8 --fit step_overhead_ms");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("fitted:   step_overhead_ms") != std::string::npos);
  CHECK(r.out.find("Calibration rows: this run set the values above") != std::string::npos);
  CHECK(test::run_cli("validate --fit step_overhead_ms").exit_code == 2);
  std::remove(path.c_str());
}
