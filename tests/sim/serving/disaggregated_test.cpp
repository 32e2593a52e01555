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

TEST_CASE("heterogeneous pools: each pool runs at its own GPU type's speed and memory, in either order (issue 44)") {
  // One H100 node and one H200 node. Prefill on H100 and decode on H200 (prefill first), or the
  // reverse (decode first, "decode:…/prefill:…"): each pool must time and size exactly as the same
  // pool does on a cluster of its own type — same GPUs, same NICs, only the type differs.
  const ModelSpec& m = mixtral();
  const Cluster mixed = load_cluster("dgx-h100:1+dgx-h200:1");
  const Cluster h100 = load_cluster("dgx-h100:2"), h200 = load_cluster("dgx-h200:2");
  const std::unique_ptr<RoutingSource> routing = make_routing("uniform", m.routing_shape());
  auto run = [&](const Cluster& c, const std::string& text) {
    const Plan p = plan_from_string(text, c.num_gpus(), plan_defaults(m));
    REQUIRE(check_plan(p, m, c).feasible());
    AnalyticExecutor ex(c);
    const ServingResult r = serve(p, m, c, one_request(3000, 40), routing.get(), ex, ServingOptions{});
    REQUIRE(r.requests.size() == 1);
    REQUIRE(r.requests[0].completed);
    return r;
  };
  const std::string pre_first = "prefill:tp=8/decode:tp=8", dec_first = "decode:tp=8/prefill:tp=8";
  const Plan d = plan_from_string(dec_first, 16, plan_defaults(m));
  REQUIRE(d.decode_first());
  CHECK(d.decode().first_gpu == 0);
  CHECK(d.first_gpu == 8);
  CHECK(plan_to_string(d).rfind("decode:", 0) == 0);
  Plan back = plan_from_string(plan_to_string(d), 16, plan_defaults(m));
  back.name = d.name;
  CHECK(back == d);
  Plan from_json = plan_from_json(plan_to_json(d), "d.json", 16, plan_defaults(m));
  from_json.name = d.name;
  CHECK(from_json == d);
  CHECK(plan_to_json(d).at("first_pool") == "decode");

  const ServingResult a = run(mixed, pre_first);  // prefill H100, decode H200
  const ServingResult b = run(mixed, dec_first);  // decode H100, prefill H200
  const RequestResult &qa = a.requests[0], &qb = b.requests[0];
  const ServingResult r100 = run(h100, pre_first), r200 = run(h200, pre_first);
  const RequestResult &on_h100 = r100.requests[0], &on_h200 = r200.requests[0];
  CHECK(qa.prefilled == doctest::Approx(on_h100.prefilled).epsilon(1e-9));
  CHECK(qa.tpot() == doctest::Approx(on_h200.tpot()).epsilon(1e-9));
  CHECK(qb.prefilled == doctest::Approx(on_h200.prefilled).epsilon(1e-9));
  CHECK(qb.tpot() == doctest::Approx(on_h100.tpot()).epsilon(1e-9));
  // Batch-1 decode reads the weights: H200's 4.8 TB/s against H100's 3.35 shows (3.8 against 4.2 ms:
  // the rest of the step is the same kernels' fixed costs and the TP all-reduces' latency).
  MESSAGE("TPOT decode on H200 " << qa.tpot() * 1e3 << " ms, on H100 " << qb.tpot() * 1e3 << " ms");
  CHECK(qa.tpot() < 0.95 * qb.tpot());
  // The decode pool's memory is its own GPU's: 141 GB on H200.
  CHECK(a.memory.hbm == doctest::Approx(gpu_preset("H200-SXM-141GB").hbm_bytes));
  CHECK(b.memory.hbm == doctest::Approx(gpu_preset("H100-SXM-80GB").hbm_bytes));
  // The rule plan there: one pool per type, decode on the faster HBM (H200), whichever comes first.
  for (const char* spec : {"dgx-h100:1+dgx-h200:1", "dgx-h200:1+dgx-h100:1"}) {
    CAPTURE(spec);
    const Cluster c = load_cluster(spec);
    const Plan rule = load_plan("megatron", m, c);
    REQUIRE(rule.disaggregated());
    CHECK(c.pool_gpu(rule.decode().first_gpu).name == "H200-SXM-141GB");
    CHECK(c.pool_gpu(rule.first_gpu).name == "H100-SXM-80GB");
    CHECK(check_plan(rule, m, c).feasible());
  }
  // A colocated plan over both types is refused, naming the degrees.
  const PlanCheck both = check_plan(plan_from_string("tp=8,dp=2", 16, plan_defaults(m)), m, mixed);
  REQUIRE_FALSE(both.feasible());
  CHECK(both.violations.front().field == "/degrees");
  CHECK(both.violations.front().reason.find("one GPU type") != std::string::npos);
}
