// tests/sim/serving/disaggregated_test.cpp — prefill/decode disaggregation: the plan's two pools (parsing, checks,
// GPU placement), the KV hand-over timed by the fabric, TTFT including it, and the CLI's refusals.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include <unistd.h>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"
#include "sim/plan/plan_layout.hpp"
#include "sim/serving/kv_transfer.hpp"
#include "sim/serving/serving.hpp"
#include "sim/step/analytic_executor.hpp"
#include "tests/cli_runner.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

const ModelSpec& mixtral() {
  static const ModelSpec m = load_model("mixtral-8x7b");
  return m;
}

RequestTrace one_request(int prompt, int output) {
  RequestTrace t;
  t.source = "test";
  t.requests.push_back(Request{0.0, prompt, output, {}});
  return t;
}

}  // namespace

TEST_CASE("disaggregated plan: compact string and JSON round-trip, pools placed one after the other") {
  const Cluster c = load_cluster("dgx-h100:2");
  Plan p = plan_from_string("prefill:tp=4,dp=1/decode:tp=4,max_seqs=64", c.num_gpus(), plan_defaults(mixtral()));
  REQUIRE(p.disaggregated());
  CHECK(p.deg.gpus() == 4);
  CHECK(p.decode().deg.dp == 3);  // the decode pool fills the 12 GPUs left
  CHECK(p.decode().engine.max_seqs == 64);
  CHECK(p.engine.max_seqs != 64);
  CHECK(p.decode().first_gpu == 4);
  CHECK(p.total_gpus() == 16);
  CHECK(PlanLayout(p.decode()).unit(0, 0) == std::vector<int>{4, 5, 6, 7});
  CHECK(PlanLayout(p.decode()).coord(9).dp == 1);
  CHECK(plan_to_string(p).rfind("prefill:dp=1,tp=4", 0) == 0);
  Plan again = plan_from_string(plan_to_string(p), c.num_gpus(), plan_defaults(mixtral()));
  again.name = p.name;
  CHECK(again == p);
  Plan from_json = plan_from_json(plan_to_json(p), "p.json", c.num_gpus(), plan_defaults(mixtral()));
  from_json.name = p.name;
  CHECK(from_json == p);
  CHECK(check_plan(p, mixtral(), c).feasible());
}

TEST_CASE("disaggregated plan: malformed or oversized pools are refused naming the pool's field") {
  const Cluster c = load_cluster("dgx-h100:1");
  const PlanDefaults d = plan_defaults(mixtral());
  CHECK_THROWS_WITH_AS(plan_from_string("prefill:tp=2", 8, d), doctest::Contains("decode"), InputError);
  CHECK_THROWS_WITH_AS(plan_from_string("tp=2/decode:tp=2", 8, d), doctest::Contains("prefill"), InputError);
  CHECK_THROWS_WITH_AS(plan_from_string("prefill:tp=2/decode:tp=2,bogus=1", 8, d), doctest::Contains("bogus"), InputError);
  CHECK_THROWS_WITH_AS(plan_from_json(json::parse(R"({"prefill": {"degrees": {"tp": 2}}})"), "p.json", 8, d),
                       doctest::Contains("decode"), InputError);
  CHECK_THROWS_WITH_AS(plan_from_json(json::parse(R"({"prefill": {"degrees": {"tp": 2}}, "decode": {"degrees": {"tq": 2}}})"), "p.json", 8, d),
                       doctest::Contains("/decode/degrees/tq"), InputError);
  // 4 + 8 GPUs on an 8-GPU node: the decode pool runs off the cluster.
  PlanCheck over = check_plan(plan_from_string("prefill:tp=4/decode:tp=4,dp=2", 8, d), mixtral(), c);
  REQUIRE(!over.feasible());
  CHECK(over.violations.front().field == "/decode/degrees");
  // A pool's own violation is named under its pool.
  PlanCheck heads = check_plan(plan_from_string("prefill:tp=2,dp=1/decode:tp=3,dp=2", 8, d), mixtral(), c);
  REQUIRE(!heads.feasible());
  bool named = false;
  for (const auto& v : heads.violations) named |= v.field == "/decode/degrees/tp";
  CHECK(named);
}

TEST_CASE("disaggregated serving: TTFT includes a KV transfer that takes what the fabric's bandwidth says") {
  // Prefill on node 0 (tp=8), decode on node 1 (tp=8): each of the 8 decode GPUs receives its
  // KV head's share of the prompt over its own NIC, in parallel.
  const ModelSpec& m = mixtral();
  const Cluster c = load_cluster("dgx-h100:2");
  const Plan p = plan_from_string("prefill:tp=8,dp=1/decode:tp=8,dp=1", c.num_gpus(), plan_defaults(m));
  const int prompt = 6000, output = 20;
  const std::unique_ptr<RoutingSource> routing = make_routing("uniform", m.routing_shape());
  AnalyticExecutor ex(c);
  ServingOptions o;
  ServingResult r = serve(p, m, c, one_request(prompt, output), routing.get(), ex, o);
  REQUIRE(r.disagg.on);
  REQUIRE(r.requests.size() == 1);
  const RequestResult& q = r.requests[0];
  REQUIRE(q.completed);
  // Mixtral's KV per token: 32 layers × (K and V) × 8 KV heads × 128 × 2 bytes (BF16).
  const double kv_per_token = 32.0 * 2 * 8 * 128 * 2;
  CHECK(r.disagg.bytes == doctest::Approx(prompt * kv_per_token));
  const Route route = c.route(0, 8);
  CHECK(!route.nvlink_only);
  const double per_gpu = prompt * kv_per_token / 8;
  const double expected = route.latency + per_gpu / (route.bottleneck_bw * c.collective_efficiency().network);
  MESSAGE("transfer " << (q.kv_arrived - q.prefilled) * 1e3 << " ms, expected " << expected * 1e3 << " ms");
  CHECK(q.kv_arrived - q.prefilled == doctest::Approx(expected).epsilon(0.01));
  CHECK(q.prefilled > 0);
  CHECK(q.first_token >= q.kv_arrived);
  CHECK(q.ttft() >= (q.prefilled - q.arrival) + expected * 0.99);
  CHECK(q.prefill_replica == 0);
  // The prefill pool only prefilled, the decode pool only decoded the other 19 tokens.
  CHECK(r.disagg.prefill.breakdown.decode_tokens == 0);
  CHECK(r.disagg.prefill.breakdown.prefill_tokens == prompt);
  CHECK(r.disagg.decode.breakdown.prefill_tokens == 0);
  CHECK(r.disagg.decode.breakdown.decode_tokens == output - 1);
  CHECK(r.disagg.transfers == 1);
}

TEST_CASE("disaggregated serving: every token is delivered once, pools share the load, windows overlap") {
  const ModelSpec& m = mixtral();
  const Cluster c = load_cluster("dgx-h100:1");
  const Plan p = plan_from_string("prefill:tp=2,dp=1/decode:tp=2", c.num_gpus(), plan_defaults(m));
  const RequestTrace t = load_request_trace("synthetic:n=400,rate=8,prompt=lognormal:900:0.6,output=lognormal:200:0.5,seed=3");
  const std::unique_ptr<RoutingSource> routing = make_routing("uniform", m.routing_shape());
  AnalyticExecutor ex(c);
  ServingOptions o;
  ServingResult r = serve(p, m, c, t, routing.get(), ex, o);
  long want = 0, got = 0;
  for (const auto& q : t.requests) want += std::max(1, q.output_tokens);
  for (const auto& [time, n] : r.emissions) got += n;
  CHECK(got == want);
  int completed = 0;
  std::vector<int> per_replica(3, 0);
  for (const auto& q : r.requests) {
    completed += q.completed;
    if (q.output_tokens > 1) {
      REQUIRE(q.replica >= 0);
      REQUIRE(q.replica < 3);
      per_replica[static_cast<std::size_t>(q.replica)]++;
      CHECK(q.first_token >= q.kv_arrived);
      CHECK(q.kv_arrived > q.prefilled);
    }
  }
  CHECK(completed == 400);
  CHECK(*std::max_element(per_replica.begin(), per_replica.end()) - *std::min_element(per_replica.begin(), per_replica.end()) <= 1);
  CHECK(r.disagg.prefill.utilization > 0);
  CHECK(r.disagg.decode.utilization > r.disagg.prefill.utilization);  // decode-heavy: 200 outputs per 900-token prompt
  CHECK(r.disagg.decode.utilization <= 1.0 + 1e-9);
  CHECK(r.disagg.transfer_p99 >= r.disagg.transfer_p50);
  CHECK(r.disagg.transfer_mean >= r.disagg.alone_mean * (1 - 1e-9));
}

TEST_CASE("disaggregated serving: the CLI reports both pools and refuses closed-loop clients") {
  auto ok = test::run_cli(
      "simulate --model mixtral-8x7b --cluster dgx-h100:1 --plan prefill:tp=2,dp=1/decode:tp=2 --requests 200 --rate 6 "
      "--fidelity analytic");
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("KV transfer") != std::string::npos);
  CHECK(ok.out.find("where the decode pool's time goes") != std::string::npos);
  auto closed = test::run_cli(
      "simulate --model mixtral-8x7b --cluster dgx-h100:1 --plan prefill:tp=2,dp=1/decode:tp=2 --requests 50 --concurrency 8 "
      "--fidelity analytic");
  CHECK(closed.exit_code == 2);
  CHECK(closed.err.find("--concurrency") != std::string::npos);
  auto big = test::run_cli(
      "simulate --model mixtral-8x7b --cluster dgx-h100:1 --plan prefill:tp=4/decode:tp=4,dp=2 --requests 50 --fidelity analytic");
  CHECK(big.exit_code == 2);
  CHECK(big.err.find("/decode/degrees") != std::string::npos);
}

TEST_CASE("disaggregated search: `--space …,pools` searches the pool split and each pool's plan at equal budgets") {
  const std::string dir = "/tmp/shardsim_disagg_search_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  auto r = test::run_cli("search --objective drain --model mixtral-8x7b --cluster dgx-h100:2 --space degrees,pools --fidelity analytic "
                         "--optimizers random,sa --seeds 1 --budget 10 --requests 120 --quiet --out " + dir);
  REQUIRE(r.exit_code == 0);
  const json res = json::parse(std::ifstream(dir + "/results.json"));
  for (const auto& run : res.at("runs")) {
    CHECK(run.at("evaluations").get<int>() == 10);
    CHECK(run.at("best_plan_string").get<std::string>().rfind("prefill:", 0) == 0);
  }
  const json best = json::parse(std::ifstream(dir + "/best-plan.json"));
  CHECK(best.contains("prefill"));
  CHECK(best.contains("decode"));
  // The best plan loads back as a plan for `simulate`.
  auto sim = test::run_cli("simulate --model mixtral-8x7b --cluster dgx-h100:2 --requests 60 --fidelity analytic --plan " + dir +
                           "/best-plan.json");
  CHECK(sim.exit_code == 0);
  CHECK(sim.out.find("disaggregated") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("prefilled (decode only): prompts arrive in the KV cache, handed to replicas and groups in turn (issue 42)") {
  const Cluster c = load_cluster("dgx-h100:1");
  const ModelSpec& m = mixtral();
  const std::unique_ptr<RoutingSource> routing = make_routing("uniform", m.routing_shape());
  AnalyticExecutor ex(c);
  const Plan p = plan_from_string("tp=2,attn_dp=2,ep=4,dp=2", c.num_gpus(), plan_defaults(m));
  RequestTrace t = load_request_trace("synthetic:n=40,prompt=fixed:1000,output=fixed:50,seed=3");
  for (std::size_t i = 0; i < t.requests.size(); ++i) t.requests[i].arrival_s = 0.05 * static_cast<double>(i);
  ServingOptions o;
  o.prefilled = true;
  const ServingResult r = serve(p, m, c, t, routing.get(), ex, o);
  CHECK(r.breakdown.prefill_tokens == 0);  // nothing prefilled here
  CHECK(r.breakdown.decode_tokens == 40 * 49);  // the first token came with the prompt
  for (std::size_t i = 0; i < r.requests.size(); ++i) {
    const RequestResult& q = r.requests[i];
    CAPTURE(i);
    CHECK(q.completed);
    CHECK(q.arrival == doctest::Approx(0.05 * static_cast<double>(i)));
    CHECK(q.first_token == q.admitted);  // the first token goes out on admission: TTFT is the wait
    CHECK(q.replica == static_cast<int>(i % 2));
    CHECK(q.group == static_cast<int>(i / 2 % 2));
  }
  // The same as the decode slots a prefill pool hands over (what validate built by hand).
  ServingOptions slots;
  for (std::size_t i = 0; i < t.requests.size(); ++i) slots.decode_slots.push_back(DecodeSlot{static_cast<int>(i % 2), static_cast<int>(i / 2 % 2)});
  const ServingResult s = serve(p, m, c, t, routing.get(), ex, slots);
  CHECK(s.makespan == r.makespan);
  CHECK(s.breakdown.steps == r.breakdown.steps);
  // Offline: every request handed over at t = 0; a normal run prefills every prompt.
  o.offline = true;
  const ServingResult off = serve(p, m, c, t, routing.get(), ex, o);
  for (const auto& q : off.requests) CHECK(q.arrival == 0);
  ServingOptions normal;
  normal.offline = true;
  const ServingResult whole = serve(p, m, c, t, routing.get(), ex, normal);
  CHECK(whole.breakdown.prefill_tokens == 40 * 1000);
  CHECK(off.makespan < whole.makespan);
  // Refused: a disaggregated plan (its own prefill pool) and a closed loop, naming --prefilled.
  const Plan d = plan_from_string("prefill:tp=4/decode:tp=4", c.num_gpus(), plan_defaults(m));
  CHECK_THROWS_AS(serve(d, m, c, t, routing.get(), ex, o), InputError);
  ServingOptions closed = o;
  closed.offline = false;
  closed.concurrency = 4;
  try {
    serve(p, m, c, t, routing.get(), ex, closed);
    FAIL("a closed loop was taken");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("open-loop") != std::string::npos);
  }
}
