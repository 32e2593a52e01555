// tests/sim/serving/weight_offload_test.cpp — weights kept in host memory (weight_offload_gb):
// the memory they free, and the host link that every forward then waits on.
#include <doctest/doctest.h>

#include <string>

#include "common/input_error.hpp"
#include "sim/plan/memory_model.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/serving.hpp"
#include "sim/step/analytic_executor.hpp"
#include "topologies/cluster.hpp"
#include "topologies/gpu_spec.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"

using namespace shardsim;

namespace {

Metrics tpot_run(const std::string& cluster_spec, const std::string& plan_text, int gpus, ServingResult* out = nullptr) {
  ModelSpec m = load_model("llama3-70b");
  Cluster c = load_cluster(cluster_spec);
  Plan p = plan_from_string(plan_text, gpus, plan_defaults(m));
  AnalyticExecutor ex(c);
  ServingOptions o;
  const RequestTrace t = at_rate(load_request_trace("synthetic:n=40,prompt=fixed:512,output=fixed:32,seed=2"), 1, Arrival::Poisson, 1);
  ServingResult r = serve(p, m, c, t, nullptr, ex, o);
  const Metrics mt = summarize(r, o, gpus);
  if (out) *out = std::move(r);
  return mt;
}

}  // namespace

TEST_CASE("weight offload: host memory frees GPU memory for KV, and every forward waits for the host link") {
  ModelSpec m = load_model("llama3-70b");
  Cluster h100 = load_cluster("dgx-h100:1");
  const MemoryReport all = plan_memory(plan_from_string("tp=8", 8, plan_defaults(m)), m, h100);
  const MemoryReport off = plan_memory(plan_from_string("tp=8,weight_offload_gb=10", 8, plan_defaults(m)), m, h100);
  // 10 GB leave, a prefetch buffer of two of the 80 layers' share of them stays.
  CHECK(off.worst().offloaded == doctest::Approx(10e9));
  CHECK(all.worst().weights - off.worst().weights == doctest::Approx(10e9 * (1 - 2.0 / 80)));
  CHECK(off.kv_capacity_tokens > all.kv_capacity_tokens);
  // A decode step streams the 10 GB at the GPU's host link: PCIe 5 on H100 (64 GB/s), NVLink-C2C on GB200 (450 GB/s).
  CHECK(h100.gpu().host_bw == doctest::Approx(64e9));
  CHECK(load_cluster("nvl72:1").gpu().host_bw == doctest::Approx(450e9));
  ServingResult r;
  const Metrics none = tpot_run("dgx-h100:1", "tp=8", 8);
  const Metrics pcie = tpot_run("dgx-h100:1", "tp=8,weight_offload_gb=10", 8, &r);
  CHECK(none.tpot_ms.p50 < 10e9 / 64e9 * 1e3);
  CHECK(pcie.tpot_ms.p50 == doctest::Approx(10e9 / 64e9 * 1e3).epsilon(0.02));
  CHECK(r.breakdown.offload_stall > 0);
  const Metrics c2c = tpot_run("nvl72:1", "tp=8,dp=9,weight_offload_gb=10", 72);
  CHECK(c2c.tpot_ms.p50 < 0.3 * pcie.tpot_ms.p50);
  CHECK(c2c.tpot_ms.p50 >= 10e9 / 450e9 * 1e3 * 0.999);
}

TEST_CASE("weight offload: a GPU spec's host link is read, defaulted and refused like its other rates") {
  json j = json::parse(R"({"name": "x", "bf16_flops": 1e15, "fp8_flops": 2e15, "hbm_bytes": 8e10, "hbm_bw": 3e12,
                           "nvlink_bw": 4.5e11, "host_bw": 2e11})");
  CHECK(gpu_spec_from_json(JsonObject(j, "g.json")).host_bw == doctest::Approx(2e11));
  j.erase("host_bw");
  CHECK(gpu_spec_from_json(JsonObject(j, "g.json")).host_bw == doctest::Approx(64e9));
  j["host_bw"] = 0;
  CHECK_THROWS_AS(gpu_spec_from_json(JsonObject(j, "g.json")), InputError);
  CHECK(gpu_spec_to_json(gpu_preset("GB200")).at("host_bw").get<double>() == doctest::Approx(450e9));
}

TEST_CASE("weight offload: host memory per GPU, where the spec states it, bounds what a plan offloads to it") {
  // GB200: a Grace CPU's 480 GB serve its two GPUs.
  const GpuSpec& gb200 = gpu_preset("GB200");
  CHECK(gb200.host_bytes == doctest::Approx(240e9));
  CHECK(gpu_preset("H100-SXM-80GB").host_bytes == 0);  // not stated: unchecked
  ModelSpec m = load_model("mixtral-8x7b");
  Cluster c = load_cluster("nvl72:1");
  auto verdict = [&](const std::string& extra) {
    return check_plan(plan_from_string("tp=8,dp=9" + extra, 72, plan_defaults(m)), m, c);
  };
  CHECK(verdict(",kv_host_gb=150,weight_offload_gb=50").feasible());
  const PlanCheck over = verdict(",kv_host_gb=200,weight_offload_gb=50");
  REQUIRE_FALSE(over.feasible());
  CHECK(over.violations.front().field == "/engine/kv_host_gb");
  CHECK(over.violations.front().reason.find("240.0 GB") != std::string::npos);
  // Read, printed back and refused like the other fields.
  json j = gpu_spec_to_json(gb200);
  CHECK(j.at("host_bytes").get<double>() == doctest::Approx(240e9));
  j["host_bytes"] = -1;
  CHECK_THROWS_AS(gpu_spec_from_json(JsonObject(j, "g.json")), InputError);
}
