// tools/bench_src/bench_main.cpp — shardsim's benchmarks (run by tools/bench): scoring cost per
// plan and plans scored per second, reported as figures, never asserted.
//
// analytic: deepseek-v3 on dgx-h100:8 with the first 1,000 Azure requests and synthetic routing;
// a portfolio of feasible plans (the Megatron rule and attention-DP/EP variants) is scored one
// after the other; the median wall time per plan and plans per second are printed.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/analytic_executor.hpp"
#include "sim/fidelity.hpp"
#include "sim/lowering.hpp"
#include "sim/simgrid_executor.hpp"
#include "sim/worker_pool.hpp"
#include "sim/metrics.hpp"
#include "sim/plan.hpp"
#include "sim/plan_check.hpp"
#include "sim/serving.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

// SimGrid tier: one plan scored at simgrid fidelity with 1 and 2 workers, and the throughput of
// SimGrid step evaluations (16 representative-layer decode steps) through each pool.
static void bench_simgrid(WorkerPool& one, WorkerPool& two, const ModelSpec& m, const Cluster& c, const RequestTrace& t,
                          const RoutingSource* routing) {
  Plan p = plan_from_string("tp=8,pp=2,ep=8,dp=4", c.num_gpus(), plan_defaults(m));
  std::printf("\nsimgrid tier: deepseek-v3 on dgx-h100:8, plan %s, %zu requests\n", plan_to_string(p).c_str(),
              t.requests.size());
  for (WorkerPool* pool : {&one, &two}) {
    auto runner = make_pool_runner(*pool);
    FidelityReport fr;
    auto t0 = std::chrono::steady_clock::now();
    serve_at_fidelity("simgrid", p, m, c, "dgx-h100:8", t, routing, ServingOptions{}, runner.get(), fr);
    double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("  %d worker(s): %.2f s per plan (%ld SimGrid steps, median ratio %.3f)\n", pool->size(), w,
                fr.sampled_steps, fr.ratio_median);
  }
  LoweringOptions lo;
  lo.only_layers = {0, 3, 30};
  Lowering low(p, m, c, routing, 0, lo);
  std::vector<StepProgram> programs;
  for (int i = 0; i < 16; ++i) {
    ReplicaBatch b;
    b.groups.resize(1);
    for (int q = 0; q < 32 + 16 * i; ++q)
      b.groups[0].push_back(SeqWork{static_cast<std::uint32_t>(q), 500, 1, 500, true});
    programs.push_back(low.lower(b));
  }
  double rate[2];
  int k = 0;
  for (WorkerPool* pool : {&one, &two}) {
    auto runner = make_pool_runner(*pool);
    runner->run("dgx-h100:8", {programs.front()});  // warm: platform built in each worker once
    runner->run("dgx-h100:8", programs);
    auto t0 = std::chrono::steady_clock::now();
    for (int rep = 0; rep < 3; ++rep) runner->run("dgx-h100:8", programs);
    double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rate[k++] = 3 * 16 / w;
    std::printf("  %d worker(s): %.1f SimGrid step evaluations/s\n", pool->size(), 3 * 16 / w);
  }
  std::printf("  scaling 2 vs 1 workers: %.2f× (target ≥ 1.7×)\n", rate[1] / rate[0]);
}

// One decode step of the ~1.6T MoE on 1,024 GPUs, every layer, in SimGrid (full fidelity), in
// this process: wall time and peak memory. The step program covers one replica (its pp × unit GPUs).
static void bench_full_step(const std::string& plan_text, int seqs) {
  ModelSpec m = load_model("moe-1.6t");
  Cluster c = load_cluster("dgx-h100:128");
  Plan p = plan_from_string(plan_text, c.num_gpus(), plan_defaults(m));
  auto routing = make_routing("synthetic:seed=1", m.routing_shape());
  Lowering low(p, m, c, routing.get());
  ReplicaBatch b;
  b.groups.resize(static_cast<std::size_t>(p.deg.attn_dp));
  for (int q = 0; q < seqs; ++q)
    b.groups[static_cast<std::size_t>(q % p.deg.attn_dp)].push_back(SeqWork{static_cast<std::uint32_t>(q), 1000, 1, 1000, true});
  StepProgram prog = low.lower(b);
  SimgridExecutor ex(c);
  auto t0 = std::chrono::steady_clock::now();
  StepTiming t = ex.run(prog);
  double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  AnalyticExecutor an(c);
  double a = an.run(prog).makespan;
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("  %-40s %6d ranks %8zu ops  %7.2f s wall  step %.1f ms (analytic %.1f ms)  peak RSS %.2f GB\n",
              plan_to_string(p).c_str(), prog.num_ranks(), prog.ops.size(), w, t.makespan * 1e3, a * 1e3,
              static_cast<double>(ru.ru_maxrss) / 1e6);
}

int main(int argc, char** argv) {
  // Worker pools fork their zygotes first, before any thread exists.
  WorkerPool one(1, simgrid_worker_handler), two(2, simgrid_worker_handler);
  int requests = argc > 1 ? std::atoi(argv[1]) : 1000;
  ModelSpec m = load_model("deepseek-v3");
  Cluster c = load_cluster("dgx-h100:8");
  RequestTrace t = head(load_request_trace("azure-conv"), static_cast<std::size_t>(requests));
  auto routing = make_routing("synthetic:seed=1", m.routing_shape());
  std::vector<std::string> texts = {"tp=8,pp=2,ep=8,dp=4",         "tp=8,ep=8,pp=4,dp=2",   "tp=1,attn_dp=8,ep=8,pp=2,dp=4",
                                    "tp=1,attn_dp=16,ep=16,dp=4",  "tp=1,attn_dp=32,ep=32,dp=2", "tp=2,attn_dp=8,ep=16,dp=4",
                                    "tp=4,attn_dp=4,ep=16,dp=4",   "tp=1,attn_dp=64,ep=64",       "tp=8,ep=8,pp=8"};
  AnalyticExecutor ex(c);
  std::vector<double> ms;
  std::printf("analytic scoring: deepseek-v3 on dgx-h100:8, %d Azure requests, synthetic routing\n", requests);
  std::printf("%-34s %10s %10s %12s %14s\n", "plan", "wall ms", "steps", "executed", "output tok/s");
  for (const auto& text : texts) {
    Plan p = plan_from_string(text, c.num_gpus(), plan_defaults(m));
    if (!check_plan(p, m, c).feasible()) {
      std::printf("%-34s infeasible, skipped\n", text.c_str());
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    ServingOptions o;
    ServingResult r = serve(p, m, c, t, routing.get(), ex, o);
    Metrics mt = summarize(r, o, c.num_gpus());
    double w = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ms.push_back(w);
    std::printf("%-34s %10.1f %10ld %12ld %14.0f\n", text.c_str(), w, r.breakdown.steps, r.breakdown.executed_steps,
                mt.output_tok_s);
  }
  std::sort(ms.begin(), ms.end());
  double total = 0;
  for (double x : ms) total += x;
  if (!ms.empty())
    std::printf("\nmedian %.1f ms per plan (target ≤ 20 ms), %.2f plans/s on one core\n", ms[ms.size() / 2],
                1000.0 * static_cast<double>(ms.size()) / total);
  bench_simgrid(one, two, m, c, t, routing.get());
  std::printf("\nfull fidelity: one decode step of moe-1.6t on dgx-h100:128 (target ≤ 10 s, ≤ 2 GB)\n");
  bench_full_step("tp=8,ep=8,pp=4,dp=32", 256);
  bench_full_step("tp=1,attn_dp=64,ep=64,pp=2,dp=8,kv=fp8", 1024);
  return 0;
}
