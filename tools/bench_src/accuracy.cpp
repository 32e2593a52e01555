// tools/bench_src/accuracy.cpp — issue 11's reference set, fast path against the exact path
// (`shardsim_bench accuracy`): for each case the relative difference of steady throughput and
// TTFT/TPOT p50/p99, the steps each path executed and both wall times. Figures for
// docs/performance.md; the small cases (tests/fast_path_cases.hpp) are asserted by
// tests/fast_path_test.cpp.
#include "tools/bench_src/accuracy.hpp"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/serving/metrics.hpp"
#include "tests/fast_path_cases.hpp"

namespace shardsim {

namespace {

ReferenceOutcome run_case(const ReferenceCase& k, bool exact) {
  ServingOptions o;
  if (exact) o.set_exact();
  return score_reference(k, o);
}

double pct(double fast, double exact) { return exact != 0 ? 100.0 * (fast / exact - 1) : 0; }

}  // namespace

void bench_accuracy(const std::string& only) {
  const std::string ssrt = write_reference_routing_file("accuracy");
  std::vector<ReferenceCase> cases = guard_cases(ssrt);
  const std::vector<ReferenceCase> larger = {
      {"deepseek-v3", "dgx-h100:8", "tp=8,pp=2,ep=8,dp=4", "azure-conv", "", false, 200},
      {"deepseek-v3", "dgx-h100:8", "tp=1,attn_dp=16,ep=16,dp=4", "azure-conv", "", false, 200},
      {"deepseek-v3", "dgx-h100:8", "tp=1,attn_dp=64,ep=64", "azure-conv", "", false, 600},
      {"deepseek-v3", "dgx-h100:8", "tp=8,ep=8,pp=8", "azure-conv", "synthetic:zipf=1.2", true, 300},
      {"deepseek-v3", "dgx-h100:8", "tp=2,attn_dp=8,ep=16,dp=4", "azure-conv", "", false, 300},
      {"deepseek-v3", "dgx-h100:8", "tp=1,attn_dp=16,ep=16,dp=4,two_batch_overlap=on", "azure-conv", "", true, 300},
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,dp=4", "azure-conv", "", false, 2000},
      {"llama2-70b", "dgx-h100:1", "tp=2,dp=4", "synthetic:n=3000,prompt=lognormal:222:0.6,output=lognormal:290:0.5", "", true},
  };
  cases.insert(cases.end(), larger.begin(), larger.end());
  std::printf("issue 11 reference set: fast path against exact (relative difference, %%)\n");
  std::printf("%-13s %-26s %-8s %8s %8s %9s %9s %8s %8s %8s %8s %8s\n", "model", "plan", "load", "exact s", "fast s",
              "executed", "of exact", "tok/s", "TTFT50", "TTFT99", "TPOT50", "TPOT99");
  for (const auto& k : cases) {
    if (!only.empty() && (k.model + " " + k.plan).find(only) == std::string::npos) continue;
    const ReferenceOutcome e = run_case(k, true), f = run_case(k, false);
    const Metrics &x = e.metrics, &y = f.metrics;
    std::printf("%-13s %-26s %-8s %8.2f %8.3f %9ld %9ld %+8.2f %+8.2f %+8.2f %+8.2f %+8.2f\n", k.model.c_str(),
                k.plan.c_str(), k.offline ? "offline" : "paced", e.seconds, f.seconds, f.result.breakdown.executed_steps,
                e.result.breakdown.executed_steps, pct(y.steady_output_tok_s, x.steady_output_tok_s), pct(y.ttft_ms.p50, x.ttft_ms.p50),
                pct(y.ttft_ms.p99, x.ttft_ms.p99), pct(y.tpot_ms.p50, x.tpot_ms.p50), pct(y.tpot_ms.p99, x.tpot_ms.p99));
    std::fflush(stdout);
  }
  std::filesystem::remove(ssrt);
}

}  // namespace shardsim
