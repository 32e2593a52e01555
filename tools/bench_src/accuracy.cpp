// tools/bench_src/accuracy.cpp — issue 11's reference set, fast path against the exact path
// (`shardsim_bench accuracy`): for each case the relative difference of steady throughput and
// TTFT/TPOT p50/p99, the steps each path executed and both wall times. Figures for
// docs/performance.md; the small cases are asserted by tests/fast_path_test.cpp.
#include "tools/bench_src/accuracy.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/serving.hpp"
#include "sim/step/analytic_executor.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

namespace shardsim {

namespace {

struct RefCase {
  std::string model, cluster, plan, trace, routing;
  bool offline = false;
  std::size_t requests = 0;  // the first N of the trace; 0 = all
};

struct Run {
  Metrics metrics;
  ServingBreakdown breakdown;
  double seconds = 0;
};

Run run_case(const RefCase& k, bool exact) {
  ModelSpec m = load_model(k.model);
  Cluster c = load_cluster(k.cluster);
  Plan p = plan_from_string(k.plan, c.num_gpus(), plan_defaults(m));
  RequestTrace t = load_request_trace(k.trace);
  if (k.requests > 0) t = head(t, k.requests);
  std::unique_ptr<RoutingSource> routing;
  if (m.is_moe()) routing = make_routing(k.routing.empty() ? "synthetic:seed=1" : k.routing, m.routing_shape());
  AnalyticExecutor ex(c);
  ServingOptions o;
  if (exact) o.set_exact();
  o.offline = k.offline;
  auto t0 = std::chrono::steady_clock::now();
  ServingResult r = serve(p, m, c, t, routing.get(), ex, o);
  Run out{summarize(r, o, c.num_gpus()), r.breakdown, 0};
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

double pct(double fast, double exact) { return exact != 0 ? 100.0 * (fast / exact - 1) : 0; }

}  // namespace

void bench_accuracy(const std::string& only) {
  ModelSpec mixtral = load_model("mixtral-8x7b");
  auto skewed = make_routing("synthetic:zipf=1.2,seed=11", mixtral.routing_shape());
  std::vector<std::uint32_t> counts(40, 64);
  const std::string ssrt =
      (std::filesystem::temp_directory_path() / ("shardsim-accuracy-" + std::to_string(::getpid()) + ".ssrt")).string();
  {
    std::ofstream f(ssrt, std::ios::binary);
    f << encode_routing_trace(*skewed, counts);
  }
  const std::vector<RefCase> cases = {
      {"llama3-70b", "dgx-h100:1", "tp=4,dp=2", "synthetic:n=150,seed=7", "", false},
      {"llama3-70b", "dgx-h100:1", "tp=2,pp=2,dp=2", "synthetic:n=150,seed=7", "", true},
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,dp=4", "synthetic:n=150,seed=8", "uniform", false},
      {"mixtral-8x7b", "dgx-h100:1", "tp=1,ep=8,attn_dp=8", "synthetic:n=150,seed=8", "synthetic:zipf=1.4,seed=3", true},
      {"mixtral-8x7b", "dgx-h100:1", "tp=4,pp=2", "synthetic:n=150,seed=8", "synthetic:seed=5", false},
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,ep=4,attn_dp=4", "synthetic:n=150,seed=8", ssrt, true},
      {"llama2-70b", "dgx-h100:1", "tp=2,dp=4", "synthetic:n=1000,prompt=lognormal:222:0.6,output=lognormal:290:0.5", "", true},
      {"deepseek-v3", "dgx-h100:8", "tp=8,pp=2,ep=8,dp=4", "azure-conv", "", false, 200},
      {"deepseek-v3", "dgx-h100:8", "tp=1,attn_dp=16,ep=16,dp=4", "azure-conv", "", false, 200},
      {"deepseek-v3", "dgx-h100:8", "tp=1,attn_dp=64,ep=64", "azure-conv", "", false, 600},
      {"deepseek-v3", "dgx-h100:8", "tp=8,ep=8,pp=8", "azure-conv", "synthetic:zipf=1.2", true, 300},
      {"deepseek-v3", "dgx-h100:8", "tp=2,attn_dp=8,ep=16,dp=4", "azure-conv", "", false, 300},
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,dp=4", "azure-conv", "", false, 2000},
      {"llama2-70b", "dgx-h100:1", "tp=2,dp=4", "synthetic:n=3000,prompt=lognormal:222:0.6,output=lognormal:290:0.5", "", true},
  };
  std::printf("issue 11 reference set: fast path against exact (relative difference, %%)\n");
  std::printf("%-13s %-26s %-8s %8s %8s %9s %9s %8s %8s %8s %8s %8s\n", "model", "plan", "load", "exact s", "fast s",
              "executed", "of exact", "tok/s", "TTFT50", "TTFT99", "TPOT50", "TPOT99");
  for (const auto& k : cases) {
    if (!only.empty() && (k.model + " " + k.plan).find(only) == std::string::npos) continue;
    Run e = run_case(k, true), f = run_case(k, false);
    const Metrics &x = e.metrics, &y = f.metrics;
    std::printf("%-13s %-26s %-8s %8.2f %8.3f %9ld %9ld %+8.2f %+8.2f %+8.2f %+8.2f %+8.2f\n", k.model.c_str(),
                k.plan.c_str(), k.offline ? "offline" : "paced", e.seconds, f.seconds, f.breakdown.executed_steps,
                e.breakdown.executed_steps, pct(y.steady_output_tok_s, x.steady_output_tok_s), pct(y.ttft_ms.p50, x.ttft_ms.p50),
                pct(y.ttft_ms.p99, x.ttft_ms.p99), pct(y.tpot_ms.p50, x.tpot_ms.p50), pct(y.tpot_ms.p99, x.tpot_ms.p99));
    std::fflush(stdout);
  }
  std::filesystem::remove(ssrt);
}

}  // namespace shardsim
