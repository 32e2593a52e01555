// tests/sim/serving/scheduler_test.cpp — the engine's scheduler in the serving loop: KV policies, preemption,
// host costs, and the steady-state window.
#include <doctest/doctest.h>

#include "sim/step/analytic_executor.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/plan/plan.hpp"
#include "sim/serving/serving.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"

using namespace shardsim;

namespace {

struct Run {
  ServingResult result;
  Metrics metrics;
};

// llama3-70b TP8 on one DGX-H100 with the KV pool cut to `kv_tokens` tokens.
Run run(const std::string& plan_text, const std::string& trace, double kv_tokens = 0, bool offline = true) {
  ModelSpec m = load_model("llama3-70b");
  Cluster c = load_cluster("dgx-h100:1");
  Plan p = plan_from_string(plan_text, 8, plan_defaults(m));
  if (kv_tokens > 0) {
    MemoryReport full = plan_memory(p, m, c);
    p.engine.kv_budget = KvBudget::TotalFraction;
    p.engine.kv_fraction = (full.worst().static_bytes() + kv_tokens * full.worst().kv_per_token) / full.hbm;
  }
  AnalyticExecutor ex(c);
  ServingOptions o;
  o.offline = offline;
  Run r{serve(p, m, c, load_request_trace(trace), nullptr, ex, o), {}};
  r.metrics = summarize(r.result, o, 8);
  return r;
}

const char* kTrace = "synthetic:n=60,prompt=fixed:500,output=fixed:400,seed=3";

}  // namespace

TEST_CASE("scheduler: on-demand KV admits more than it can finish, preempts, and still completes everything") {
  // 20,000 tokens of KV: 40 prompts fit, 22 full sequences (900 tokens) do.
  Run od = run("tp=8,policy=on-demand,kv_block=16,max_context=2048", kTrace, 20000);
  Run exact = run("tp=8,policy=reserve-exact,max_context=2048", kTrace, 20000);
  CHECK(od.metrics.completed == 60);
  CHECK(exact.metrics.completed == 60);
  CHECK(od.result.breakdown.preemptions > 0);
  CHECK(od.result.breakdown.recomputed_tokens > 0);
  CHECK(exact.result.breakdown.preemptions == 0);
  CHECK(od.result.breakdown.peak_seqs > exact.result.breakdown.peak_seqs);
  CHECK(exact.result.breakdown.peak_seqs <= 22);
  // Recompute prefills the preempted tokens again.
  CHECK(od.result.breakdown.prefill_tokens > 60 * 500);
  CHECK(exact.result.breakdown.prefill_tokens == 60 * 500);
}

TEST_CASE("scheduler: swap keeps the work done and pays the transfer instead") {
  Run sw = run("tp=8,policy=on-demand,preemption=swap,swap_bw=1e9,max_context=2048", kTrace, 20000);
  CHECK(sw.metrics.completed == 60);
  CHECK(sw.result.breakdown.preemptions > 0);
  CHECK(sw.result.breakdown.recomputed_tokens == 0);
  CHECK(sw.result.breakdown.prefill_tokens == 60 * 500);
  Run fast = run("tp=8,policy=on-demand,preemption=swap,swap_bw=1e12,max_context=2048", kTrace, 20000);
  CHECK(sw.metrics.makespan_s > fast.metrics.makespan_s);
}

TEST_CASE("scheduler: reserving the maximum output admits fewer sequences than the true output would need") {
  // 30,000 tokens; prompts 500, outputs 400, max_context 2,048: reserve holds 2,048 per sequence.
  Run res = run("tp=8,policy=reserve,max_context=2048", kTrace, 30000);
  Run exact = run("tp=8,policy=reserve-exact,max_context=2048", kTrace, 30000);
  CHECK(res.result.breakdown.peak_seqs == 30000 / 2048);
  CHECK(exact.result.breakdown.peak_seqs == 30000 / 900);
  Run capped = run("tp=8,policy=reserve,max_output=400,max_context=2048", kTrace, 30000);
  CHECK(capped.result.breakdown.peak_seqs == exact.result.breakdown.peak_seqs);
}

TEST_CASE("scheduler: host costs add to every iteration — without CUDA graphs launches can outlast the GPU") {
  Run base = run("tp=8,step_overhead_ms=0,seq_overhead_us=0", kTrace);
  Run host = run("tp=8,step_overhead_ms=5,seq_overhead_us=0", kTrace);
  long steps = host.result.breakdown.steps;
  CHECK(host.metrics.makespan_s == doctest::Approx(base.metrics.makespan_s + steps * 5e-3).epsilon(0.02));
  Run slow = run("tp=8,step_overhead_ms=0,seq_overhead_us=0,cuda_graphs=off,launch_overhead_us=1000", kTrace);
  Run graphs = run("tp=8,step_overhead_ms=0,seq_overhead_us=0,cuda_graphs=on,launch_overhead_us=1000", kTrace);
  CHECK(graphs.metrics.makespan_s == doctest::Approx(base.metrics.makespan_s));
  CHECK(slow.metrics.makespan_s > 2 * base.metrics.makespan_s);
  CHECK(slow.result.breakdown.host_time > 0);
}

TEST_CASE("steady state: throughput in the saturated window does not depend on how many requests ran") {
  auto tr = [](int n) {
    return "synthetic:n=" + std::to_string(n) + ",prompt=lognormal:400:0.8:2000,output=lognormal:300:0.6:1500,seed=5";
  };
  Run small = run("tp=8,max_seqs=64,max_context=4096", tr(400));
  Run large = run("tp=8,max_seqs=64,max_context=4096", tr(1600));
  CHECK(small.metrics.steady_trusted);
  CHECK(large.metrics.steady_trusted);
  CHECK(small.metrics.steady_start_s > 0);
  CHECK(large.metrics.steady_end_s < large.metrics.makespan_s);
  // Over the makespan the short run loses more to ramp-up and drain; the steady figures agree.
  CHECK(large.metrics.steady_output_tok_s == doctest::Approx(small.metrics.steady_output_tok_s).epsilon(0.05));
  CHECK(small.metrics.output_tok_s < 0.95 * small.metrics.steady_output_tok_s);
  // Too few requests to fill the batch twice: no trusted window, and it says so.
  Run tiny = run("tp=8,max_seqs=64,max_context=4096", tr(70));
  CHECK_FALSE(tiny.metrics.steady_trusted);
  CHECK_FALSE(tiny.metrics.steady_note.empty());
}
