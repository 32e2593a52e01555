// tools/bench_src/accuracy.cpp — issue 11's reference set, fast path against the exact path
// (`shardsim_bench accuracy`): for each case the relative difference of steady throughput and
// TTFT/TPOT p50/p99, the steps each path executed and both wall times. Figures for
// docs/performance-log.md; the small cases (tests/fast_path_cases.hpp) are asserted by
// tests/sim/serving/fast_path_test.cpp.
#include "tools/bench_src/accuracy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/serving/metrics.hpp"
#include "workloads/model.hpp"
#include "tests/fast_path_cases.hpp"

namespace shardsim {

namespace {

ReferenceOutcome run_case(const ReferenceCase& k, bool exact) {
  ServingOptions o;
  if (exact) o.set_exact();
  return score_reference(k, o);
}

double pct(double fast, double exact) { return exact != 0 ? 100.0 * (fast / exact - 1) : 0; }

// The case's routing with routing seed `seed`: synthetic specs get it (1 = the case as written);
// a routing-trace file or a dense model has none (false for seed > 1).
bool with_seed(ReferenceCase& k, int seed) {
  if (seed == 1) return true;
  if (!load_model(k.model).is_moe()) return false;
  if (k.routing.empty()) k.routing = "synthetic:seed=1";
  if (k.routing.rfind("synthetic:", 0) != 0) return false;
  const std::size_t at = k.routing.find("seed=");
  if (at == std::string::npos) {
    k.routing += ",seed=" + std::to_string(seed);
  } else {  // the written seed, moved on by seed − 1
    const std::size_t from = at + 5, end = k.routing.find(',', from);
    const std::size_t len = end == std::string::npos ? std::string::npos : end - from;
    k.routing.replace(from, len, std::to_string(std::stol(k.routing.substr(from, len)) + seed - 1));
  }
  return true;
}

}  // namespace

void bench_accuracy(const std::string& only, int seeds) {
  const std::string ssrt = write_reference_routing_file("accuracy");
  std::vector<ReferenceCase> cases = guard_cases(ssrt);
  const std::vector<ReferenceCase> larger = {
      {"deepseek-v3", "dgx-h100:8", "tp=8,pp=2,ep=8,dp=4", "azure-conv", "", false, 200},
      {"deepseek-v3", "dgx-h100:8", "tp=1,attn_dp=16,ep=16,dp=4", "azure-conv", "", false, 200},
      {"deepseek-v3", "dgx-h100:8", "tp=1,attn_dp=64,ep=64", "azure-conv", "", false, 600},
      {"deepseek-v3", "dgx-h100:8", "tp=8,ep=8,pp=8", "azure-conv", "synthetic:zipf=1.2", true, 300},
      {"deepseek-v3", "dgx-h100:8", "tp=8,ep=8,pp=4,dp=2", "azure-conv", "synthetic:zipf=1.2", true, 300},
      {"deepseek-v3", "dgx-h100:8", "tp=2,attn_dp=8,ep=16,dp=4", "azure-conv", "", false, 300},
      {"deepseek-v3", "dgx-h100:8", "tp=1,attn_dp=16,ep=16,dp=4,two_batch_overlap=on", "azure-conv", "", true, 300},
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,dp=4", "azure-conv", "", false, 2000},
      {"llama2-70b", "dgx-h100:1", "tp=2,dp=4", "synthetic:n=3000,prompt=lognormal:222:0.6,output=lognormal:290:0.5", "", true},
  };
  cases.insert(cases.end(), larger.begin(), larger.end());
  std::printf("issue 11 reference set: fast path against exact (relative difference, %%)\n");
  std::printf("%-13s %-26s %-8s %4s %8s %8s %9s %9s %8s %8s %8s %8s %8s\n", "model", "plan", "load", "seed", "exact s",
              "fast s", "executed", "of exact", "tok/s", "TTFT50", "TTFT99", "TPOT50", "TPOT99");
  constexpr int kMetrics = 5;
  double sum_abs[kMetrics] = {}, max_abs[kMetrics] = {};
  long runs = 0, executed = 0, executed_exact = 0;
  for (int seed = 1; seed <= std::max(1, seeds); ++seed)
    for (ReferenceCase k : cases) {
      if (!only.empty() && (k.model + " " + k.plan).find(only) == std::string::npos) continue;
      if (!with_seed(k, seed)) continue;
      const ReferenceOutcome e = run_case(k, true), f = run_case(k, false);
      const Metrics &x = e.metrics, &y = f.metrics;
      const double d[kMetrics] = {pct(y.steady_output_tok_s, x.steady_output_tok_s), pct(y.ttft_ms.p50, x.ttft_ms.p50),
                                  pct(y.ttft_ms.p99, x.ttft_ms.p99), pct(y.tpot_ms.p50, x.tpot_ms.p50),
                                  pct(y.tpot_ms.p99, x.tpot_ms.p99)};
      std::printf("%-13s %-26s %-8s %4d %8.2f %8.3f %9ld %9ld %+8.2f %+8.2f %+8.2f %+8.2f %+8.2f\n", k.model.c_str(),
                  k.plan.c_str(), k.offline ? "offline" : "paced", seed, e.seconds, f.seconds,
                  f.result.breakdown.executed_steps, e.result.breakdown.executed_steps, d[0], d[1], d[2], d[3], d[4]);
      std::fflush(stdout);
      for (int i = 0; i < kMetrics; ++i) {
        sum_abs[i] += std::abs(d[i]);
        max_abs[i] = std::max(max_abs[i], std::abs(d[i]));
      }
      ++runs;
      executed += f.result.breakdown.executed_steps;
      executed_exact += e.result.breakdown.executed_steps;
    }
  if (runs > 0) {
    std::printf("%ld runs, %ld steps executed (exact: %ld); mean |difference| / largest, %%:", runs, executed, executed_exact);
    const char* names[kMetrics] = {"tok/s", "TTFT50", "TTFT99", "TPOT50", "TPOT99"};
    for (int i = 0; i < kMetrics; ++i)
      std::printf(" %s %.2f / %.2f%s", names[i], sum_abs[i] / static_cast<double>(runs), max_abs[i], i + 1 < kMetrics ? ";" : "\n");
  }
  std::filesystem::remove(ssrt);
}

}  // namespace shardsim
