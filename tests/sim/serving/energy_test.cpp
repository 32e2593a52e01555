// tests/sim/serving/energy_test.cpp — the energy model (what a run's GPUs and network draw), the
// work counts it charges, the power table and fit of `calibrate --power`, and where the figures
// reach users (simulate, compare, the tokens-per-joule objective).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "optimizers/space/serving_evaluator.hpp"
#include "sim/plan/plan.hpp"
#include "sim/serving/energy.hpp"
#include "sim/serving/power_calibration.hpp"
#include "sim/step/compute_cost.hpp"
#include "tests/cli_runner.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"

using namespace shardsim;

namespace {

bool near(double a, double b, double rel = 1e-9) { return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b)); }

GpuSpec with_power(double tdp, double idle, double active, double tensor, double hbm) {
  GpuSpec g = gpu_preset("h100");
  g.power = {tdp, idle, active, tensor, hbm, "test"};
  return g;
}

}  // namespace

TEST_CASE("energy: idle over the run, active, tensor and HBM work over the pool's GPUs, held at the board limit") {
  ServingBreakdown b;
  b.busy[static_cast<std::size_t>(OpClass::Attention)] = 1.5;  // compute: counts as active
  b.busy[static_cast<std::size_t>(OpClass::DenseFfn)] = 0.5;
  b.busy[static_cast<std::size_t>(OpClass::TpComm)] = 5;       // communication: charged at idle
  b.comm_exposed = 1;
  b.tensor_work = 0.5;
  b.hbm_work = 1;
  const GpuSpec g = with_power(700, 70, 100, 200, 300);
  // Per-GPU sums over 2 replicas of 2 GPUs each: GPU-seconds = sums × 4 / 2.
  const RunEnergy e = run_energy({energy_pool(b, 4, 2, g)}, 10, NetworkPorts{2, 3}, NetworkPower{9, 8.5});
  CHECK(e.modelled);
  CHECK(near(e.idle_j, 70 * 4 * 10));
  CHECK(near(e.active_j, 100 * 4));
  CHECK(near(e.tensor_j, 200 * 1));
  CHECK(near(e.hbm_j, 300 * 2));
  CHECK(near(e.network_j, (2 * 9 + 3 * 8.5) * 10));
  CHECK(near(e.working_w, 70 + (400 + 200 + 600) / 4.0));
  CHECK_FALSE(e.capped);
  CHECK(near(e.watts_per_gpu(), e.gpu_j() / 40));
  CHECK(near(e.joules_per_token(1000), e.total_j() / 1000));
  // A model asking for more than the board gives while busy is held at it.
  const RunEnergy hot = run_energy({energy_pool(b, 4, 2, with_power(700, 70, 100, 5000, 300))}, 10, {});
  CHECK(hot.capped);
  CHECK(near(hot.active_j + hot.tensor_j + hot.hbm_j, (700 - 70) * 4.0));
  CHECK(near(hot.working_w, 700));
  // The limit holds the mean while a step is under way, host gaps included: with 3 s per GPU of
  // steps (per replica) against 2 s of kernels, the board's 630 W above idle spreads over 6 GPU-s.
  ServingBreakdown gaps = b;
  gaps.engaged = 3;
  const RunEnergy held = run_energy({energy_pool(gaps, 4, 2, with_power(700, 70, 100, 5000, 300))}, 10, {});
  CHECK(held.capped);
  CHECK(near(held.active_j + held.tensor_j + held.hbm_j, (700 - 70) * 6.0));
  CHECK(near(held.working_w, 700));
  CHECK(held.describe(1000).find("700 W of 700 W while working, held at the board limit") != std::string::npos);
  // A GPU type without a power model: not modelled, and said so.
  const RunEnergy none = run_energy({energy_pool(b, 4, 2, with_power(0, 0, 0, 0, 0))}, 10, {});
  CHECK_FALSE(none.modelled);
  CHECK(none.joules_per_token(1000) == 0);
  CHECK(none.describe(1000).find("not modelled") != std::string::npos);
}

TEST_CASE("energy: a compute operation's work is its flops at the peak of its math type and its bytes at peak bandwidth") {
  const GpuSpec& h100 = gpu_preset("h100");
  StepOp op;
  op.type = OpType::Compute;
  op.flops = 2e12;
  op.hbm_bytes = 6.7e9;
  op.weight = 3;  // stands for three layers
  op.math = Dtype::BF16;
  CHECK(near(compute_work(h100, op).tensor, 3 * 2e12 / h100.bf16_flops));
  CHECK(near(compute_work(h100, op).hbm, 3 * 6.7e9 / h100.hbm_bw));
  op.math = Dtype::FP4;  // no FP4 tensor cores on H100: FP8's rate
  CHECK(near(compute_work(h100, op).tensor, 3 * 2e12 / h100.fp8_flops));
  op.type = OpType::Collective;
  CHECK(compute_work(h100, op).tensor == 0);
}

TEST_CASE("energy: the network's ports are one NIC and one switch port per GPU link, two per switch-to-switch link") {
  const Cluster one = load_cluster("dgx-h100:1");  // 8 NICs on one leaf
  const NetworkPorts p = network_ports(one);
  CHECK(p.nic == 8);
  CHECK(p.switch_ports >= 8);
  const Cluster four = load_cluster("dgx-h100:4");
  CHECK(network_ports(four).nic == 32);
  CHECK(network_ports(four).switch_ports > network_ports(one).switch_ports);
  CHECK(near(p.share(0.5).nic, 4));
}

TEST_CASE("energy: a power table is read with quoted cells, and refused by line and column when malformed") {
  const auto runs = parse_power_table(
      "# comment\nmodel,cluster,plan,trace,watts,tok_s\n"
      "llama3.1-8b,\"torus:1,gpus=1\",\"tp=1,max_seqs=8\",\"synthetic:n=20,prompt=fixed:10,output=fixed:5\",486.4,1069.6\n",
      "t.csv");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].cluster == "torus:1,gpus=1");
  CHECK(runs[0].plan == "tp=1,max_seqs=8");
  CHECK(runs[0].watts == 486.4);
  CHECK(runs[0].tok_s == 1069.6);
  CHECK_THROWS_WITH_AS(parse_power_table("model,cluster,plan,trace\nx,y,z,w\n", "t.csv"), doctest::Contains("watts"), InputError);
  CHECK_THROWS_WITH_AS(parse_power_table("model,cluster,plan,trace,watts\na,b,c,d,many\n", "t.csv"), doctest::Contains("line 2"),
                       InputError);
  CHECK_THROWS_WITH_AS(parse_power_table("model,cluster,plan,trace,watts\na,\"b,c,d,1\n", "t.csv"),
                       doctest::Contains("unterminated"), InputError);
  CHECK_THROWS_WITH_AS(parse_power_table("# nothing\n", "t.csv"), doctest::Contains("no runs"), InputError);
}

TEST_CASE("energy: the fit recovers the constants that made the measurements, and a run at the limit only bounds it") {
  const GpuSpec truth = with_power(700, 70, 300, 900, 150);
  std::vector<PowerFit::Row> rows;
  const double rates[][3] = {{0.9, 0.02, 0.6}, {0.95, 0.05, 0.55}, {0.97, 0.10, 0.5}, {0.98, 0.2, 0.45}, {0.99, 0.3, 0.4}};
  for (const auto& r : rates) {
    PowerFit::Row row;
    row.window.from = 0;
    row.window.to = 10;
    row.window.tokens = 1000;
    row.window.pool = EnergyPool{r[0] * 10, r[1] * 10, r[2] * 10, 1, 1, &truth};
    row.run.watts = modelled_watts(row.window, truth.power);
    row.run.tok_s = 100;  // the simulated rate: no rescaling
    rows.push_back(row);
  }
  GpuSpec start = truth;
  start.power.active_w = start.power.tensor_w = start.power.hbm_w = 0;
  const PowerFit f = fit_gpu_power(rows, start);
  CHECK(near(f.after.active_w, 300, 1e-6));
  CHECK(near(f.after.tensor_w, 900, 1e-6));
  CHECK(near(f.after.hbm_w, 150, 1e-6));
  CHECK(f.rms_after < 1e-6);
  CHECK(f.rms_before > 0.1);
  // The same runs measured at half the simulated rate: the work per token done half as fast.
  PowerFit::Row slow = rows.front();
  slow.run.tok_s = 50;
  CHECK(modelled_watts(slow.window, truth.power, 50) < modelled_watts(slow.window, truth.power));
  CHECK(near(modelled_watts(slow.window, truth.power, 50) - 70 - 300 * 0.9, (900 * 0.02 + 150 * 0.6) / 2, 1e-9));
}

TEST_CASE("energy: a replayed run's steady window is ML.ENERGY's — from the batch's first tokens to all but batch + 1 finished") {
  const ModelSpec model = load_model("llama3.1-8b");
  const PowerRun run{"llama3.1-8b", "torus:1,gpus=1", "tp=1,engine=vllm,max_seqs=16,max_batch_tokens=8192",
                     "synthetic:n=200,prompt=lognormal:224:1.0:2048,output=lognormal:200:1.0:1024,seed=1", 513.3, 1953.6, 2};
  const PowerFit::Row row = measure_power_run(run, "t.csv");
  CHECK(row.window.seconds() > 0);
  CHECK(row.window.tokens > 0);
  CHECK(row.window.pool.active > 0);
  CHECK(row.window.pool.active <= row.window.seconds() * (1 + 1e-9));  // one GPU busy at most the whole window
  CHECK(row.window.pool.hbm_work > 0);
  CHECK(row.window.pool.tensor_work > 0);
  const double w = modelled_watts(row.window, gpu_preset("h100").power);
  CHECK(w > gpu_preset("h100").power.idle_w);
  CHECK(w <= gpu_preset("h100").power.tdp_w);
  PowerRun tiny = run;
  tiny.trace = "synthetic:n=10,prompt=fixed:10,output=fixed:5";  // fewer requests than the batch + 2
  CHECK_THROWS_WITH_AS(measure_power_run(tiny, "t.csv"), doctest::Contains("line 2"), InputError);
}

TEST_CASE("energy: simulate reports watts and joules per token, compare tabulates them, search can maximise tokens per joule") {
  test::TempDir dir("energy");
  const auto sim = test::run_cli("simulate --model llama3.1-8b --cluster \"torus:1,gpus=1\" --plan tp=1 --trace "
                                 "\"synthetic:n=60,prompt=fixed:200,output=fixed:100,seed=1\" --offline --json " + dir("r.json"));
  REQUIRE(sim.exit_code == 0);
  CHECK(sim.out.find("energy         ") != std::string::npos);
  CHECK(sim.out.find("J per generated token") != std::string::npos);
  const json j = parse_json(test::slurp(dir("r.json")), "r.json");
  REQUIRE(j.contains("energy"));
  const double jpt = j["energy"]["joules_per_token"].get<double>();
  CHECK(jpt > 0);
  CHECK(near(j["energy"]["tokens_per_joule"].get<double>() * jpt, 1, 1e-9));
  CHECK(j["energy"]["watts_per_gpu"].get<double>() <= 700);

  const auto cmp = test::run_cli("compare --model llama3.1-8b --cluster \"torus:1,gpus=1\" --plan tp=1,max_seqs=8 --plan tp=1,max_seqs=64 "
                                 "--trace \"synthetic:n=200,prompt=fixed:200,output=fixed:100,seed=1\" --out " + dir("cmp"));
  REQUIRE(cmp.exit_code == 0);
  const std::string table = test::slurp(dir("cmp") + "/compare.md");
  CHECK(table.find("| W/GPU | J/tok |") != std::string::npos);
  // The title counts the requests replayed: the trace's 200, not the default --requests 300.
  CHECK(table.find("200 requests (all the trace holds; --requests asked for 300)") != std::string::npos);
  CHECK(test::slurp(dir("cmp") + "/compare.gp").find("J/tok") != std::string::npos);  // the Pareto plot's labels
  // A fuller batch amortises the static draw over more tokens.
  const json c = parse_json(test::slurp(dir("cmp") + "/compare.json"), "compare.json");
  REQUIRE(c["scenarios"].size() == 2);
  CHECK(c["scenarios"][1]["energy"]["joules_per_token"].get<double>() < c["scenarios"][0]["energy"]["joules_per_token"].get<double>());

  // The objective: tokens per joule of the saturated run, within the TPOT bound.
  const ModelSpec model = load_model("llama3.1-8b");
  const Cluster cluster = load_cluster("torus:1,gpus=1");
  const RequestTrace trace = load_request_trace("synthetic:n=300,prompt=fixed:200,output=fixed:100,seed=1");
  EvaluatorInputs in;
  in.model = &model;
  in.cluster = &cluster;
  in.trace = &trace;
  in.objective = Objective::TokensPerJoule;
  in.goal.tpot_s = 1.0;
  const ServingEvaluator ev(in);
  const Plan small = plan_from_string("tp=1,max_seqs=8", 1, plan_defaults(model));
  const Plan big = plan_from_string("tp=1,max_seqs=64", 1, plan_defaults(model));
  const Score a = ev.evaluate(small), b = ev.evaluate(big);
  REQUIRE(a.feasible);
  REQUIRE(b.feasible);
  CHECK(b.objective > a.objective);
  in.goal.tpot_s = 1e-4;  // no plan generates a token in 0.1 ms
  CHECK_FALSE(ServingEvaluator(in).evaluate(big).feasible);
  CHECK(parse_objective("tokens-per-joule", "--objective") == Objective::TokensPerJoule);
}

TEST_CASE("energy: calibrate --power fits the GPU's power model and writes it into the cluster file, and a bad table exits 2") {
  test::TempDir dir("calibrate-power");
  {
    std::ofstream f(dir("runs.csv"));
    f << "model,cluster,plan,trace,watts,tok_s\n";
    for (int b : {8, 16, 32})
      f << "llama3.1-8b,\"torus:1,gpus=1\",\"tp=1,engine=vllm,max_seqs=" << b
        << "\",\"synthetic:n=200,prompt=fixed:200,output=fixed:100,seed=1\"," << 480 + b << ",\n";
  }
  const auto r = test::run_cli("calibrate --power " + dir("runs.csv") + " --cluster \"torus:1,gpus=1\" --out " + dir("c.json"));
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("power fitted to 3 measured runs") != std::string::npos);
  const json c = parse_json(test::slurp(dir("c.json")), "c.json");
  REQUIRE(c["gpu"].contains("power"));
  CHECK(c["gpu"]["power"]["tdp_w"].get<double>() == 700);
  CHECK(c["gpu"]["power"]["source"].get<std::string>().find("fitted to 3 runs") != std::string::npos);
  const auto back = test::run_cli("simulate --model llama3.1-8b --cluster " + dir("c.json") +
                                  " --plan tp=1 --trace \"synthetic:n=30,prompt=fixed:100,output=fixed:20,seed=1\" --offline");
  CHECK(back.exit_code == 0);
  {
    std::ofstream f(dir("other.csv"));
    f << "model,cluster,plan,trace,watts\nllama3.1-8b,\"torus:1,gpus=1,gpu=h200\",tp=1,\"synthetic:n=200,seed=1\",500\n";
  }
  const auto other = test::run_cli("calibrate --power " + dir("other.csv") + " --cluster \"torus:1,gpus=1\"");
  CHECK(other.exit_code == 2);
  CHECK(other.err.find("H200") != std::string::npos);
  CHECK(other.out.empty());
}
