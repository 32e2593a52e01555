// tests/sim/whatif/compare_test.cpp — what-if comparisons: scenarios and their file, the frontier, the
// explanation's figures and references, and `shardsim compare` end to end.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "sim/whatif/comparison.hpp"
#include "sim/whatif/scenario.hpp"
#include "tests/cli_runner.hpp"

using namespace shardsim;

namespace {

// An outcome at (tok/s per user, tok/s per GPU) = (1000 / tpot_ms, tok_s / gpus).
ScenarioOutcome point(const std::string& cluster, double tpot_ms, double tok_s, int gpus = 8) {
  ScenarioOutcome o;
  o.scenario = Scenario{"m", cluster, "", "offline", "megatron", "", -1, cluster};
  o.feasible = true;
  o.gpus = gpus;
  o.metrics.tpot_ms.p50 = tpot_ms;
  o.metrics.steady_output_tok_s = tok_s;
  return o;
}

}  // namespace

TEST_CASE("scenario choices: loads, plans and searches parse, and bad ones name the field") {
  CHECK(parse_load_choice("offline", "s", "f").kind == LoadChoice::Kind::Offline);
  CHECK(parse_load_choice("trace", "s", "f").kind == LoadChoice::Kind::Trace);
  const LoadChoice r = parse_load_choice("rate=2.5", "s", "f");
  CHECK(r.kind == LoadChoice::Kind::Rate);
  CHECK(r.value == doctest::Approx(2.5));
  CHECK(r.text() == "rate=2.5");
  CHECK(parse_load_choice("clients=64", "s", "f").value == 64);
  for (const char* bad : {"rate=0", "rate=-1", "clients=1.5", "clients=0", "rate=", "fast", "rate=nan"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_load_choice(bad, "s", "f"), InputError);
  }
  const PlanChoice given = parse_plan_choice("tp=8,ep=8", "s", "f");
  CHECK(!given.search);
  CHECK(given.spec == "tp=8,ep=8");
  const PlanChoice s = parse_plan_choice("search:200", "s", "f");
  CHECK(s.search);
  CHECK(s.budget == 200);
  CHECK(s.optimizer == "sa");
  CHECK(parse_plan_choice("search:50:ga", "s", "f").optimizer == "ga");
  for (const char* bad : {"search", "search:", "search:0", "search:1.5", "search:x", "search:10:", "searchy:10", ""}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_plan_choice(bad, "s", "f"), InputError);
  }
}

TEST_CASE("scenarios: the product of the axes, plans fastest, labelled by the axes that vary") {
  ScenarioAxes a;
  a.models = {"deepseek-v3"};
  a.clusters = {"dgx-h100:8", "dgx-h100:8,oversub=2"};
  a.loads = {"offline"};
  a.plans = {"megatron", "tp=8"};
  std::vector<Scenario> sc = expand(a);
  REQUIRE(sc.size() == 4);
  CHECK(sc[1].cluster == "dgx-h100:8");
  CHECK(sc[1].plan == "tp=8");
  CHECK(sc[2].cluster == "dgx-h100:8,oversub=2");
  label_scenarios(sc);
  CHECK(sc[0].label == "cluster=dgx-h100:8 · plan=megatron");
  CHECK(sc[3].label == "cluster=dgx-h100:8,oversub=2 · plan=tp=8");
  a.engines = {"vllm", "trtllm"};
  CHECK(expand(a).size() == 8);
  std::vector<Scenario> one = {sc[0]};
  label_scenarios(one);
  CHECK(one[0].label == "plan=megatron");
}

TEST_CASE("scenario file: axes, an explicit list with defaults, settings, and errors naming the pointer") {
  const ScenarioFile f = parse_scenario_file(
      R"({"models": "deepseek-v3", "clusters": ["dgx-h100:8", "dgx-h200:8"], "plans": ["megatron", "search:100"],
          "requests": 500, "gpu_hour_usd": 2.5, "max_rate": true, "comment": "why"})",
      "f.json");
  std::vector<Scenario> sc = scenarios_of(f, "offline", "megatron");
  CHECK(sc.size() == 4);
  CHECK(sc[3].cluster == "dgx-h200:8");
  CHECK(sc[3].load == "offline");
  CHECK(f.settings.requests == 500);
  CHECK(f.settings.max_rate == true);
  REQUIRE(f.settings.gpu_hour.has_value());
  CHECK(std::stod(*f.settings.gpu_hour) == doctest::Approx(2.5));

  const ScenarioFile e = parse_scenario_file(
      R"({"models": "deepseek-v3", "clusters": "dgx-h100:8",
          "scenarios": [{"plan": "megatron", "name": "rule"}, {"cluster": "nvl72:1", "load": "clients=8"}]})",
      "e.json");
  sc = scenarios_of(e, "offline", "megatron");
  REQUIRE(sc.size() == 2);
  CHECK(sc[0].cluster == "dgx-h100:8");
  CHECK(sc[1].cluster == "nvl72:1");
  CHECK(sc[1].plan == "megatron");
  CHECK(sc[1].load == "clients=8");
  CHECK(field_of(sc[1], "load") == "/scenarios/1/load");
  label_scenarios(sc);
  CHECK(sc[0].label == "rule");

  auto error_of = [](const std::string& text) {
    try {
      parse_scenario_file(text, "x.json");
    } catch (const InputError& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  CHECK(error_of(R"({"models": "m", "clusters": "c", "cluster": "d"})") == "x.json: /cluster: unknown key");
  CHECK(error_of(R"({"models": "m", "clusters": []})").find("x.json: /clusters: expected a string") == 0);
  CHECK(error_of(R"({"models": "m", "clusters": "c", "requests": 0})").find("x.json: /requests") == 0);
  CHECK(error_of(R"({"models": "m", "clusters": "c", "fidelity": "full"})") == "x.json: /fidelity: unknown tier (expected analytic or simgrid; full would take hours per scenario)");
  CHECK(error_of(R"({"models": ["a", "b"], "clusters": "c", "scenarios": [{"plan": "p"}]})").find("x.json: /models: holds several") == 0);
  CHECK(error_of(R"({"models": "m", "clusters": "c", "scenarios": [{"plan": "p", "pln": "q"}]})") ==
        "x.json: /scenarios/0/pln: unknown key");
  CHECK(error_of(R"({"clusters": "c"})").find("x.json: /models: missing") == 0);
}

TEST_CASE("Pareto frontier: dominated scenarios are off it, ties and trade-offs on it, infeasible never") {
  std::vector<ScenarioOutcome> v = {point("a", 20, 800),   // 50 tok/s/user, 100 tok/s/GPU
                                    point("b", 10, 400),   // 100, 50: a trade-off with a
                                    point("c", 25, 640),   // 40, 80: dominated by a
                                    point("d", 20, 800)};  // a tie with a
  v.push_back(point("e", 5, 8000));
  v.back().feasible = false;                               // would dominate all, but is infeasible
  const std::vector<bool> f = pareto_frontier(v);
  CHECK(f == std::vector<bool>{true, true, false, true, false});
}

TEST_CASE("max rate column: a capacity the objective calls flat is marked, and the mark is explained") {
  std::vector<ScenarioOutcome> v = {point("a", 20, 800), point("b", 10, 400)};
  v[0].max_rate = 36;
  v[1].max_rate = 44.6;
  CompareContext ctx;
  ctx.goal = "p99 TTFT ≤ 2000 ms and p99 TPOT ≤ 200 ms";
  const std::string plain = markdown_table(v, ctx);
  CHECK(plain.find("| 36 |") != std::string::npos);
  CHECK(plain.find("~") == std::string::npos);
  v[0].max_rate_flat = true;
  const std::string marked = markdown_table(v, ctx);
  CHECK(marked.find("| 36~ |") != std::string::npos);
  CHECK(marked.find("| 44.6 |") != std::string::npos);
  CHECK(marked.find("~ flat near it") != std::string::npos);
}

TEST_CASE("why they differ: each scenario against its nearest one-choice neighbour, or a fixed baseline") {
  std::vector<ScenarioOutcome> v = {point("dgx-h100:8", 30, 4000), point("dgx-h100:8,oversub=2", 30, 4000),
                                    point("dgx-h100:8,rails=off,radix=16", 30, 4000),
                                    point("dgx-h100:8,rails=off,radix=16,oversub=2", 40, 3000)};
  CHECK(reference_of(v, 0) == -1);
  CHECK(reference_of(v, 1) == 0);
  CHECK(reference_of(v, 3) == 2);  // one item away, not three
  v[3].scenario.plan = "tp=8";     // now two choices differ from every earlier scenario
  CHECK(reference_of(v, 3) == 0);
  CompareContext ctx;
  ctx.baseline = 1;
  const std::string text = why_they_differ(v, ctx);
  CHECK(text.find("against #2") != std::string::npos);
  CHECK(text.find("against #1") == std::string::npos);
}

TEST_CASE("GPU time per generated token: its parts add up to GPUs × run time / tokens") {
  ScenarioOutcome o = point("c", 20, 1000);
  o.gpus = 8;
  o.dp = 2;
  o.pp = 2;
  o.metrics.makespan_s = 10;
  o.metrics.output_tok_s = 1000;  // 10,000 tokens
  ServingBreakdown& b = o.breakdown;
  b.critical[static_cast<std::size_t>(OpClass::Experts)] = 20;   // replica seconds, Σ over replicas
  b.critical[static_cast<std::size_t>(OpClass::EpDispatch)] = 8;
  b.host_time = 2;
  b.coll_by_kind[3] = 4;  // per-GPU seconds Σ over replicas: 2 per GPU on average
  b.step_time = 28;
  b.link_bytes[static_cast<std::size_t>(LinkClass::NicLink)] = 5e9;
  b.link_busiest[static_cast<std::size_t>(LinkClass::NicLink)] = 14;
  const GpuTime t = gpu_time(o);
  // 8 GPUs × 10 s / 10,000 tokens = 8 ms; a step's time is charged to one stage's 2 GPUs.
  CHECK(t.total == doctest::Approx(8.0));
  CHECK(t.compute == doctest::Approx(20 * 2 * 1e3 / 1e4));
  CHECK(t.communication == doctest::Approx(8 * 2 * 1e3 / 1e4));
  CHECK(t.host == doctest::Approx(2 * 2 * 1e3 / 1e4));
  CHECK(t.idle == doctest::Approx(8 - 4 - 1.6 - 0.4));  // no step running
  CHECK(t.compute + t.communication + t.waiting + t.host + t.idle == doctest::Approx(t.total));
  CHECK(t.collective[3] == doctest::Approx(4.0 / 2 * 8 * 1e3 / 1e4));
  CHECK(t.link_bytes[static_cast<std::size_t>(LinkClass::NicLink)] == doctest::Approx(5e5));
  CHECK(t.link_busy[static_cast<std::size_t>(LinkClass::NicLink)] == doctest::Approx(0.5));
  o.gpu_hour_usd = 3.6;
  CHECK(usd_per_mtok(o) == doctest::Approx(3.6 * 8 / (1000 * 3600.0) * 1e6));
  // Disaggregated: each pool's step time on its own stage's GPUs. A 2-GPU prefill pool of two
  // replicas (1 GPU a stage) and a 6-GPU decode pool of one 2-stage replica (3 GPUs a stage).
  ScenarioOutcome::Pool pre, dec;
  pre.gpus = 2, pre.dp = 2, pre.pp = 1;
  pre.breakdown.critical[static_cast<std::size_t>(OpClass::Experts)] = 10;
  dec.gpus = 6, dec.dp = 1, dec.pp = 2;
  dec.breakdown.critical[static_cast<std::size_t>(OpClass::Experts)] = 5;
  dec.breakdown.host_time = 1;
  o.pools = {pre, dec};
  const GpuTime d = gpu_time(o);
  CHECK(d.total == doctest::Approx(8.0));
  CHECK(d.compute == doctest::Approx((10 * 1 + 5 * 3) * 1e3 / 1e4));
  CHECK(d.host == doctest::Approx(1 * 3 * 1e3 / 1e4));
  CHECK(d.compute + d.communication + d.waiting + d.host + d.idle == doctest::Approx(d.total));
}

TEST_CASE("shardsim compare: a searched plan is shown with the capacity it was chosen by, first in why they differ" * doctest::test_suite("heavy")) {
  // Issue 39: the table's tok/s is a drain of the requests given, by which a searched plan (chosen
  // by its capacity under the SLO) can look worse than the rule plan it beats at load.
  const std::string args = "compare --model mixtral-8x7b --cluster dgx-h100:1 --plan megatron --plan search:4:random "
                           "--trace synthetic:n=300,seed=3 --fidelity analytic";
  const auto r = test::run_cli(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("max rate req/s") != std::string::npos);
  CHECK(r.out.find("Measured without --max-rate because a plan was searched") != std::string::npos);
  CHECK(r.out.find("against #1: max rate ") != std::string::npos);
  const auto plain = test::run_cli("compare --model mixtral-8x7b --cluster dgx-h100:1 --plan megatron --plan tp=4,dp=2 "
                                   "--trace synthetic:n=300,seed=3 --fidelity analytic");
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.out.find("max rate") == std::string::npos);  // no search, no --max-rate: the drain only
}

TEST_CASE("shardsim compare: the table, the files, identical results on any thread count, and why 2:1 cannot matter") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("shardsim_compare_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string args =
      "compare --model mixtral-8x7b --cluster dgx-h100:2 --cluster dgx-h100:2,oversub=2 --plan tp=8,dp=2 --plan tp=4,pp=2,dp=2 "
      "--load offline --load clients=8 --requests 40 --gpu-hour 2";
  auto r = test::run_cli(args + " --threads 2 --out " + dir.string());
  REQUIRE(r.exit_code == 0);
  for (const char* f : {"compare.md", "compare.csv", "compare.json", "compare.gp"}) CHECK(fs::exists(dir / f));
  const json j = json::parse(test::slurp(dir / "compare.json"));
  REQUIRE(j["scenarios"].size() == 8);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') > 8);
  // The fabric is the only difference between scenarios k and k + 4; both sit in one rail unit.
  for (int k = 0; k < 4; ++k) {
    const json& a = j["scenarios"][k];
    const json& b = j["scenarios"][k + 4];
    CHECK(a["feasible"] == true);
    CHECK(a["output_tok_s"] == b["output_tok_s"]);
    CHECK(b["reference"] == k + 1);
  }
  CHECK(r.out.find("carried nothing in either run: leaf-spine") != std::string::npos);
  CHECK(r.out.find("$/M tok") != std::string::npos);
  const std::string csv = test::slurp(dir / "compare.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 9);
  auto one = test::run_cli(args + " --threads 1 --out " + dir.string() + "-1");
  REQUIRE(one.exit_code == 0);
  auto table = [](const std::string& out) { return out.substr(0, out.find("\nwrote ")); };  // the folder differs
  CHECK(table(one.out) == table(r.out));
  CHECK(test::slurp(dir.string() + "-1/compare.json") == test::slurp(dir / "compare.json"));
  fs::remove_all(dir);
  fs::remove_all(dir.string() + "-1");
}
