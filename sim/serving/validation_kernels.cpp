// sim/serving/validation_kernels.cpp — kernel rows from measured tables: the Blackwell presets'
// kernel fractions (calibration) and what they must predict without being fitted (checks).
//
// Owns: measured_kernel_rows(). Reads the embedded topologies/data/kernel_tables.json (NVIDIA
// AIConfigurator's TensorRT-LLM 1.3.0rc20 timings of B200, GB200, B300, GB300 and H100, and vLLM
// 0.19.0's grouped-query decode attention on B300; source and
// attribution in the file and docs/validation.md). Each table becomes one row: the geometric mean
// of its measured latencies beside the geometric mean of the compute model's times for the same
// shapes on the GPU preset (the fractions it carries, GpuSpec::kernels), with the RMS log error
// over the table's rows. A calibration table is the one a preset's fraction was fitted to (least
// squares in log space, so its mean sits on the measurement); a check table never set anything:
// MLA prompt attention priced by the grouped-query curves, grouped-query decode on B300 (no table
// set its curve there: H100's fractions of B300's peaks), and whole MoE layers priced as the
// lowering prices routed experts (sim/step/lowering.cpp ffn(): two grouped GEMMs at rows = tokens
// per expert).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "sim/serving/validation_groups.hpp"
#include "sim/step/compute_cost.hpp"
#include "sim/step/kernel_calibration.hpp"
#include "topologies/gpu_spec.hpp"

namespace shardsim {

namespace {

constexpr const char* kTables = "topologies/data/kernel_tables.json";

Dtype dtype_of(const std::string& d) { return d == "fp4" ? Dtype::FP4 : d == "fp8" ? Dtype::FP8 : Dtype::BF16; }

// Seconds the compute model gives one row of `kind` (AIConfigurator's shape columns).
double model_time(const GpuSpec& g, const ComputeModel& cm, const std::string& kind, Dtype d, const std::vector<double>& r,
                  const json& table) {
  // The kinds `calibrate --kernels` reads are priced by its one formula; MLA prompt attention is
  // validate's own.
  if (kind == "gemm") return kernel_row_time(g, cm, KernelTableKind::Gemm, d, r);
  if (kind == "context_attention") return kernel_row_time(g, cm, KernelTableKind::ContextAttention, d, r);
  if (kind == "generation_mla") return kernel_row_time(g, cm, KernelTableKind::GenerationMla, d, r);
  if (kind == "generation_attention") return kernel_row_time(g, cm, KernelTableKind::GenerationAttention, d, r);
  if (kind == "context_mla") {  // causal MLA prompt attention, as Lowering::attention prices it
    const double batch = r[0], heads = r[1], s = r[2];
    const double dqk = 192, dv = 128, kv_elems = 576, kvb = d == Dtype::FP8 ? 1 : 2;
    const double flops = batch * 2 * s * ((s + 1) / 2) * heads * (dqk + dv);
    const double bytes = batch * (2 * s * kv_elems * kvb + s * heads * (dqk + dv) * 2);
    return compute_time(g, ComputeKind::PrefillAttention, s, flops, bytes, d, cm);
  }
  // "moe": one layer's routed experts, balanced, on one rank (kernel_row_time's formula).
  return kernel_row_time(g, cm, KernelTableKind::Moe, d,
                         {r[0], table.at("hidden").get<double>(), table.at("inter").get<double>(), table.at("topk").get<double>(),
                          table.at("experts").get<double>(), 1, 1});
}

std::string what(const std::string& kind, const std::string& dtype) {
  std::string d = dtype == "fp4" ? "NVFP4" : dtype == "fp8" ? "FP8" : "BF16";
  if (kind == "gemm") return d + " GEMM";
  if (kind == "context_attention") return d + " prompt attention (64 or 32 heads, 8 KV heads)";
  if (kind == "context_mla") return d + " MLA prompt attention (DeepSeek, 128 or 16 heads)";
  if (kind == "generation_mla") return d + " MLA decode attention (absorbed, 128 or 16 heads)";
  if (kind == "generation_attention") return d + "-KV grouped-query decode attention (64/32/16/8 heads, 8:1, vLLM's FlashInfer kernel)";
  return d + " MoE layer (hidden 6,144, expert FFN 16,384, top-2 of 8)";
}

}  // namespace

void measured_kernel_rows(std::vector<ValidationRow>& rows) {
  const std::string source = std::string("embedded:") + kTables;
  const auto text = embedded_file(kTables);
  if (!text) throw InputError(source, "", "missing from the binary (re-run cmake)");
  const json doc = parse_json(*text, source);
  ComputeModel cm;
  cm.sustained_clock = 1.0;  // microbenchmarks at the clock they ran at
  for (const json& t : doc.at("tables")) {
    const std::string gpu = t.at("gpu"), kind = t.at("kind"), dtype = t.at("dtype"), role = t.at("role");
    const GpuSpec& g = gpu_preset(gpu, source, "/tables/gpu");
    const Dtype d = dtype_of(dtype);
    LogAgreement agreement;
    for (const json& row : t.at("rows")) {
      std::vector<double> r = row.get<std::vector<double>>();
      const double measured = r.back() * 1e-3;
      r.pop_back();
      agreement.add(measured, model_time(g, cm, kind, d, r, t));
    }
    if (agreement.n == 0) continue;
    const int n = agreement.n;
    const double rms = agreement.rms();
    char name[200], setup[240], fit[300];
    std::snprintf(name, sizeof name, "%s %s, %d shapes (geometric mean)", g.name.c_str(), what(kind, dtype).c_str(), n);
    std::snprintf(setup, sizeof setup, "the compute model at the microbenchmarks' clock over the table's %d rows (RMS log error %.1f%%)",
                  n, 100 * rms);
    const bool calibration = role == "calibration";
    std::string sets;
    if (calibration) {
      Dtype math = d;
      ComputeKind k = kind == "gemm" ? ComputeKind::Gemm
                      : kind == "generation_mla" ? ComputeKind::MlaDecodeAttention
                                                 : ComputeKind::PrefillAttention;
      const KernelCurve c = gpu_curve(g, cm, k, math);
      const KernelCurveId id = curve_id(k, math);
      std::snprintf(fit, sizeof fit, "%s's %s: max_eff %.3f, hbm_eff %.2f (least squares in log space over these %d rows, RMS %.1f%%)",
                    g.name.c_str(), kernel_curve_name(id), c.max_eff, c.hbm_eff, n, 100 * rms);
      sets = fit;
    }
    rows.push_back({name, "kernels", "µs", agreement.measured() * 1e6, agreement.model() * 1e6,
                    calibration ? 0.05 : 0.25, calibration ? RowRole::Calibration : RowRole::Check, sets,
                    "NVIDIA AIConfigurator (ai-dynamo/aiconfigurator @095f58a, systems/data/…/" + t.at("file").get<std::string>() +
                        ", " + (t.contains("engine") ? t.at("engine").get<std::string>() : std::string("TensorRT-LLM 1.3.0rc20")) + ")",
                    setup, t.contains("miss") ? t.at("miss").get<std::string>() : std::string()});
  }
}

}  // namespace shardsim
