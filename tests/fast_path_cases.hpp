// tests/fast_path_cases.hpp — issue 11's reference set of scoring cases (the fast path against
// the exact one): the small cases the accuracy guard asserts on (tests/sim/serving/fast_path_test.cpp) and
// `shardsim_bench accuracy` prints beside its larger ones, the routing-trace file one uses, and
// how a case is scored.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <filesystem>
#include <fstream>
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

struct ReferenceCase {
  std::string model, cluster, plan, trace, routing;  // routing empty: the default synthetic one
  bool offline = false;
  std::size_t requests = 0;  // the first N of the trace; 0 = all
};

// Writes a routing-trace file to the temporary directory — 40 requests × 64 tokens of Mixtral's
// skewed routing (positions beyond wrap around) — and returns its path; `tag` names the writer.
inline std::string write_reference_routing_file(const std::string& tag) {
  ModelSpec mixtral = load_model("mixtral-8x7b");
  auto skewed = make_routing("synthetic:zipf=1.2,seed=11", mixtral.routing_shape());
  std::vector<std::uint32_t> counts(40, 64);
  std::string path =
      (std::filesystem::temp_directory_path() / ("shardsim-" + tag + "-" + std::to_string(::getpid()) + ".ssrt")).string();
  std::ofstream f(path, std::ios::binary);
  f << encode_routing_trace(*skewed, counts);
  return path;
}

// The small cases: dense and MoE; TP, PP, EP, attention-DP; uniform, skewed and default synthetic
// routing, the routing-trace file at `ssrt`; offline and arrival-paced; the last one long enough
// for mixed steps to be interpolated along tokens (MLPerf-like lengths, offline).
inline std::vector<ReferenceCase> guard_cases(const std::string& ssrt) {
  return {
      {"llama3-70b", "dgx-h100:1", "tp=4,dp=2", "synthetic:n=150,seed=7", "", false},
      {"llama3-70b", "dgx-h100:1", "tp=2,pp=2,dp=2", "synthetic:n=150,seed=7", "", true},
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,dp=4", "synthetic:n=150,seed=8", "uniform", false},
      {"mixtral-8x7b", "dgx-h100:1", "tp=1,ep=8,attn_dp=8", "synthetic:n=150,seed=8", "synthetic:zipf=1.4,seed=3", true},
      {"mixtral-8x7b", "dgx-h100:1", "tp=4,pp=2", "synthetic:n=150,seed=8", "synthetic:seed=5", false},
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,ep=4,attn_dp=4", "synthetic:n=150,seed=8", ssrt, true},
      {"llama2-70b", "dgx-h100:1", "tp=2,dp=4", "synthetic:n=1000,prompt=lognormal:222:0.6,output=lognormal:290:0.5", "", true},
  };
}

struct ReferenceOutcome {
  ServingResult result;
  Metrics metrics;
  double seconds = 0;  // wall time of the serving run
};

// Scores `k` at the analytic tier with `options` (its `offline` set by the case).
inline ReferenceOutcome score_reference(const ReferenceCase& k, ServingOptions options) {
  ModelSpec m = load_model(k.model);
  Cluster c = load_cluster(k.cluster);
  Plan p = plan_from_string(k.plan, c.num_gpus(), plan_defaults(m));
  RequestTrace t = load_request_trace(k.trace);
  if (k.requests > 0) t = head(t, k.requests);
  std::unique_ptr<RoutingSource> routing;
  if (m.is_moe()) routing = make_routing(k.routing.empty() ? "synthetic:seed=1" : k.routing, m.routing_shape());
  AnalyticExecutor ex(c);
  options.offline = k.offline;
  const auto t0 = std::chrono::steady_clock::now();
  ReferenceOutcome out{serve(p, m, c, t, routing.get(), ex, options), {}, 0};
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.metrics = summarize(out.result, options, c.num_gpus());
  return out;
}

}  // namespace shardsim
