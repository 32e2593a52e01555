// tests/sim/step/precision_test.cpp — Blackwell precisions: NVFP4 GEMMs at a GPU's FP4 rate (or at
// its FP8 rate where it has no FP4 tensor cores), per-GPU kernel fractions from the cluster
// format, and FP8 attention (MLA included) as a plan's choice.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/memory_model.hpp"
#include "sim/plan/plan_check.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/serving.hpp"
#include "sim/step/analytic_executor.hpp"
#include "sim/step/compute_cost.hpp"
#include "topologies/cluster.hpp"
#include "topologies/gpu_spec.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"

using namespace shardsim;

namespace {

// One large GEMM (M = N = K = 8192) on `gpu` in `math`, at the microbenchmarks' clock.
double gemm(const GpuSpec& gpu, Dtype math) {
  const double n = 8192, b = math == Dtype::FP4 ? 0.5 : math == Dtype::FP8 ? 1 : 2;
  ComputeModel cm;
  cm.sustained_clock = 1;
  return compute_time(gpu, ComputeKind::Gemm, n, 2 * n * n * n, 2 * n * n * b + n * n * 2, math, cm);
}

}  // namespace

TEST_CASE("precision: NVFP4 GEMMs run at the FP4 rate where the GPU has one, and as FP8 where it has not") {
  const GpuSpec& b200 = gpu_preset("B200");
  const GpuSpec& h100 = gpu_preset("H100-SXM-80GB");
  CHECK(b200.fp4_flops == 9e15);
  CHECK(h100.fp4_flops == 0);
  // B200 (AIConfigurator's TensorRT-LLM table at 8192³: BF16 737 µs, FP8 471 µs, NVFP4 285 µs).
  CHECK(gemm(b200, Dtype::BF16) == doctest::Approx(737.2e-6).epsilon(0.05));
  CHECK(gemm(b200, Dtype::FP8) == doctest::Approx(470.9e-6).epsilon(0.12));
  CHECK(gemm(b200, Dtype::FP4) == doctest::Approx(284.6e-6).epsilon(0.12));
  CHECK(gemm(b200, Dtype::FP4) < 0.75 * gemm(b200, Dtype::FP8));
  // Hopper has no FP4 tensor cores: FP4 operands cost what FP8 ones do.
  CHECK(gemm(h100, Dtype::FP4) == doctest::Approx(gemm(h100, Dtype::FP8)));
  // The same fraction of the peak is not what Blackwell reaches: without B200's own fractions its
  // BF16 GEMM would be priced at H100's 0.82 of the peak, 20% faster than measured.
  GpuSpec bare = b200;
  bare.kernels = {};
  CHECK(gemm(bare, Dtype::BF16) < 0.85 * gemm(b200, Dtype::BF16));
}

TEST_CASE("precision: W4A4 plans compute in FP4, W4A8 in FP8, W4A16 in BF16") {
  Dtypes d;
  d.weights = Dtype::FP4;
  d.activations = Dtype::FP4;
  CHECK(d.math() == Dtype::FP4);
  CHECK(d.describe().find("FP4 block-scaled GEMMs") != std::string::npos);
  d.activations = Dtype::FP8;
  CHECK(d.math() == Dtype::FP8);
  d.activations = Dtype::BF16;
  CHECK(d.math() == Dtype::BF16);
  d.weights = Dtype::FP8;
  d.activations = Dtype::FP4;  // FP4 activations with FP8 weights run FP8 GEMMs
  CHECK(d.math() == Dtype::FP8);
}

TEST_CASE("precision: a GPU spec carries its measured kernel fractions, checked like every field") {
  auto read = [](const std::string& text) {
    const json j = parse_json(text, "c.json");
    return gpu_spec_from_json(JsonObject(j, "c.json", "/gpu"));
  };
  const std::string head = R"({"name": "x", "bf16_flops": 1e15, "fp8_flops": 2e15, "fp4_flops": 4e15, "hbm_bytes": 1e11,
                               "hbm_bw": 4e12, "nvlink_bw": 4e11, )";
  const GpuSpec g = read(head + R"("kernels": {"gemm_fp4": {"max_eff": 0.3}, "attn_decode_mla": {"hbm_eff": 0.7}}})");
  CHECK(g.fp4_flops == 4e15);
  CHECK(g.kernels[static_cast<int>(KernelCurveId::GemmFp4)].max_eff == 0.3);
  CHECK(g.kernels[static_cast<int>(KernelCurveId::AttnDecodeMla)].hbm_eff == 0.7);
  CHECK(g.kernels[static_cast<int>(KernelCurveId::GemmBf16)].max_eff == 0);
  // It prints back the way it reads.
  const GpuSpec again = gpu_spec_from_json(JsonObject(gpu_spec_to_json(g), "c.json", "/gpu"));
  CHECK(again.kernels == g.kernels);
  CHECK(again.fp4_flops == g.fp4_flops);
  CHECK_THROWS_WITH_AS(read(head + R"("kernels": {"gemm_fp6": {"max_eff": 0.3}}})"), doctest::Contains("gemm_fp6"), InputError);
  CHECK_THROWS_WITH_AS(read(head + R"("kernels": {"gemm_fp4": {"max_eff": 1.5}}})"), doctest::Contains("max_eff"), InputError);
  CHECK_THROWS_WITH_AS(read(head + R"("kernels": {"gemm_fp4": {"max": 0.5}}})"), doctest::Contains("max"), InputError);
}

TEST_CASE("precision: FP8 attention is the plan's choice, needs an FP8 KV cache, and speeds up MLA prefill and decode on Blackwell") {
  ModelSpec m = load_model("deepseek-v3");
  Cluster c = load_cluster("dgx-h100:1,gpu=b200");
  const PlanDefaults def = plan_defaults(m);
  const Plan bf = plan_from_string("attn_dp=8,ep=8,tp=1,kv=fp8,attn=bf16", 8, def);
  const Plan f8 = plan_from_string("attn_dp=8,ep=8,tp=1,kv=fp8,attn=fp8", 8, def);
  CHECK(f8.dtypes.attention == Dtype::FP8);
  CHECK(plan_to_string(f8).find("attn=fp8") != std::string::npos);
  CHECK(plan_from_json(plan_to_json(f8), "p.json", 8, def).dtypes == f8.dtypes);
  CHECK_FALSE(plan_from_string("attn_dp=8,ep=8,tp=1,kv=fp8", 8, def).dtypes.attention.has_value());
  // Refused: FP8 attention over a BF16 cache, and an FP4 attention nobody ships.
  const PlanCheck bad = check_plan(plan_from_string("attn_dp=8,ep=8,tp=1,kv=bf16,attn=fp8", 8, def), m, c);
  REQUIRE_FALSE(bad.feasible());
  CHECK(bad.violations.front().field == "/dtypes/attention");
  CHECK_THROWS_WITH_AS(plan_from_string("tp=8,attn=fp4", 8, def), doctest::Contains("bf16 or fp8"), InputError);
  // 64 prompts of 4,096 tokens, 64 output tokens each: both phases' attention runs faster in FP8.
  RequestTrace t;
  for (int i = 0; i < 64; ++i) t.requests.push_back(Request{0, 4096, 64, {}});
  AnalyticExecutor ex(c);
  ServingOptions o;
  o.offline = true;
  const ServingResult a = serve(bf, m, c, t, nullptr, ex, o), b = serve(f8, m, c, t, nullptr, ex, o);
  const Metrics ma = summarize(a, o, 8), mb = summarize(b, o, 8);
  REQUIRE(ma.completed == 64);
  REQUIRE(mb.completed == 64);
  const auto attn = static_cast<std::size_t>(OpClass::Attention);
  CHECK(b.breakdown.busy[attn] < 0.9 * a.breakdown.busy[attn]);
  CHECK(mb.output_tok_s > ma.output_tok_s);
}

TEST_CASE("precision: attention projections may keep their own weight type (NVFP4 experts, BF16 attention)") {
  ModelSpec m = load_model("deepseek-v3");
  Cluster c = load_cluster("dgx-b200:1");
  const PlanDefaults def = plan_defaults(m);
  const Plan fp4 = plan_from_string("tp=8,ep=4,etp=2,weights=fp4,act=fp4", 8, def);
  const Plan mixed = plan_from_string("tp=8,ep=4,etp=2,weights=fp4,act=fp4,attn_weights=bf16", 8, def);
  CHECK(mixed.dtypes.attn_weights() == Dtype::BF16);
  CHECK(mixed.dtypes.attn_projection_math() == Dtype::BF16);
  CHECK(fp4.dtypes.attn_projection_math() == Dtype::FP4);
  CHECK(plan_to_string(mixed).find("attn_weights=bf16") != std::string::npos);
  CHECK(plan_from_json(plan_to_json(mixed), "p.json", 8, def).dtypes == mixed.dtypes);
  // BF16 attention weights: 4× the bytes of NVFP4 ones in memory ...
  CHECK(plan_memory(mixed, m, c).worst().weights > plan_memory(fp4, m, c).worst().weights);
  RequestTrace t;
  t.requests.push_back(Request{0, 512, 64, {}});
  AnalyticExecutor ex(c);
  ServingOptions o;
  const Metrics a = summarize(serve(fp4, m, c, t, nullptr, ex, o), o, 8);
  const Metrics b = summarize(serve(mixed, m, c, t, nullptr, ex, o), o, 8);
  // ... but a faster batch-1 step: a projection's NVFP4 GEMM pays the ≈16 µs floor B200's measured
  // NVFP4 Linear shows at small M (quantising its input), a BF16 one reads its few MB in ≈5 µs —
  // why TensorRT-LLM's minimum-latency DeepSeek-R1 recipe keeps attention in BF16.
  CHECK(b.tpot_ms.p50 < 0.95 * a.tpot_ms.p50);
}

TEST_CASE("precision: the speculative draft head may keep its own weight type (BF16 MTP layers beside NVFP4)") {
  ModelSpec m = load_model("deepseek-v3");
  Cluster c = load_cluster("dgx-b200:1");
  const PlanDefaults def = plan_defaults(m);
  const std::string base = "tp=8,ep=4,etp=2,weights=fp4,act=fp4,attn_weights=bf16,spec_tokens=1,spec_accept=0.9";
  const Plan same = plan_from_string(base, 8, def);
  const Plan bf16 = plan_from_string(base + ",draft_weights=bf16", 8, def);
  REQUIRE(bf16.dtypes.draft_weights == Dtype::BF16);
  CHECK(bf16.dtypes.draft().weights == Dtype::BF16);
  CHECK(bf16.dtypes.draft().math() == Dtype::BF16);
  CHECK(same.dtypes.draft() == same.dtypes);  // unset: the head runs as the main model's layers
  CHECK(plan_to_string(bf16).find("draft_weights=bf16") != std::string::npos);
  CHECK(plan_from_json(plan_to_json(bf16), "p.json", 8, def).dtypes == bf16.dtypes);
  // The head's layer in BF16 holds 4× the bytes of its NVFP4 experts: more memory, and only there
  // (without speculation the setting moves nothing).
  CHECK(plan_memory(bf16, m, c).worst().weights > plan_memory(same, m, c).worst().weights + 1e9);
  const Plan plain = plan_from_string("tp=8,ep=4,etp=2,weights=fp4,act=fp4", 8, def);
  const Plan plain_bf16 = plan_from_string("tp=8,ep=4,etp=2,weights=fp4,act=fp4,draft_weights=bf16", 8, def);
  CHECK(plan_memory(plain_bf16, m, c).worst().weights == plan_memory(plain, m, c).worst().weights);
  // And the draft pass is priced in its own types: the step differs.
  RequestTrace t;
  t.requests.push_back(Request{0, 512, 64, {}});
  AnalyticExecutor ex(c);
  ServingOptions o;
  const ServingResult a = serve(same, m, c, t, nullptr, ex, o), b = serve(bf16, m, c, t, nullptr, ex, o);
  CHECK(a.breakdown.step_time != doctest::Approx(b.breakdown.step_time).epsilon(1e-4));
}
