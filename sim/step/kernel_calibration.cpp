// sim/step/kernel_calibration.cpp — kernel timing tables read and priced, and the GPU's kernel fractions fitted (see the header).
#include "sim/step/kernel_calibration.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "common/csv_table.hpp"
#include "common/golden_section.hpp"
#include "common/input_error.hpp"
#include "common/text_number.hpp"
#include "sim/step/compute_cost.hpp"

namespace shardsim {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool dtype_of(const std::string& s, Dtype& d) {
  if (s == "bf16" || s == "float16" || s == "fp16" || s == "bfloat16") d = Dtype::BF16;
  else if (s == "fp8" || s == "fp8_block" || s == "float8") d = Dtype::FP8;
  else if (s == "fp4" || s == "nvfp4" || s == "mxfp4") d = Dtype::FP4;
  else return false;
  return true;
}

}  // namespace

const char* kernel_table_kind_name(KernelTableKind k) {
  switch (k) {
    case KernelTableKind::Gemm: return "gemm";
    case KernelTableKind::ContextAttention: return "context_attention";
    case KernelTableKind::GenerationAttention: return "generation_attention";
    case KernelTableKind::GenerationMla: return "generation_mla";
    case KernelTableKind::Moe: return "moe";
  }
  return "?";
}

KernelCurveId kernel_table_curve(KernelTableKind kind, Dtype d) {
  const ComputeKind k = kind == KernelTableKind::Gemm             ? ComputeKind::Gemm
                        : kind == KernelTableKind::Moe           ? ComputeKind::GroupedGemm
                        : kind == KernelTableKind::GenerationMla ? ComputeKind::MlaDecodeAttention
                        : kind == KernelTableKind::GenerationAttention ? ComputeKind::DecodeAttention
                                                                 : ComputeKind::PrefillAttention;
  return curve_id(k, d);
}

double kernel_row_time(const GpuSpec& g, const ComputeModel& cm, KernelTableKind kind, Dtype d, const std::vector<double>& r) {
  const double b = d == Dtype::FP4 ? 0.5 : d == Dtype::FP8 ? 1 : 2;  // weight and activation bytes per element
  const double kvb = d == Dtype::FP8 ? 1 : 2;                         // KV cache bytes per element
  switch (kind) {
    case KernelTableKind::Gemm: {  // a Linear: 2MNK flops, A, B and the BF16 output
      const double M = r[0], N = r[1], K = r[2];
      return compute_time(g, ComputeKind::Gemm, M, 2 * M * N * K, N * K * b + M * K * b + M * N * 2, d, cm);
    }
    case KernelTableKind::ContextAttention: {  // causal prompt attention, as Lowering::attention prices it
      const double batch = r[0], heads = r[1], kv_heads = r[2], dh = r[3], s = r[4];
      const double flops = batch * 2 * s * ((s + 1) / 2) * heads * (2 * dh);
      const double bytes = batch * (2 * s * (2 * kv_heads * dh) * kvb + s * heads * (2 * dh) * 2);
      return compute_time(g, ComputeKind::PrefillAttention, s, flops, bytes, d, cm);
    }
    case KernelTableKind::GenerationAttention: {  // paged decode, one query token a sequence, as Lowering::attention prices it
      const double batch = r[0], heads = r[1], kv_heads = r[2], dh = r[3], kv = r[4];
      const double flops = batch * 2 * (kv + 1) * heads * (2 * dh);
      const double bytes = batch * ((kv + 2) * (2 * kv_heads * dh) * kvb + heads * (2 * dh) * 2);
      return compute_time(g, ComputeKind::DecodeAttention, kv, flops, bytes, d, cm);
    }
    case KernelTableKind::GenerationMla: {  // absorbed MLA decode: 576-wide latent keys, 512-wide values
      const double batch = r[0], heads = r[1], kv = r[2];
      const double flops = batch * 2 * (kv + 1) * heads * (576 + 512);
      const double bytes = batch * ((kv + 2) * 576 * kvb + heads * (576 + 512) * 2);
      return compute_time(g, ComputeKind::MlaDecodeAttention, kv, flops, bytes, d, cm);
    }
    case KernelTableKind::Moe: {  // one rank's routed experts, balanced: gate+up (2F wide) and down grouped GEMMs
      const double T = r[0], h = r[1], F = r[2] / r[5], E = r[4] / r[6], tokens = T * r[3] / r[6];
      const double active = std::min(E, tokens), rows = tokens / active, weights = active * 3 * h * F * b;
      return compute_time(g, ComputeKind::GroupedGemm, rows, 2 * tokens * h * F * 2, weights * 2 / 3 + tokens * (h + 2 * F) * b, d, cm) +
             compute_time(g, ComputeKind::GroupedGemm, rows, 2 * tokens * F * h, weights / 3 + tokens * (F + h) * b, d, cm);
    }
  }
  return 0;
}

double gemm_model_time(const GpuSpec& gpu, Dtype d, double m, double n, double k) {
  ComputeModel cm;
  cm.sustained_clock = 1.0;  // kernel tables are microbenchmarks, at the clock they ran at (compute_cost.hpp)
  return kernel_row_time(gpu, cm, KernelTableKind::Gemm, d, {m, n, k});
}

KernelTable parse_kernel_table(const std::string& text, const std::string& source) {
  KernelTable t;
  t.source = source;
  const CsvTable csv = read_csv_table(text, source);
  if (csv.columns.empty()) throw InputError(source, "", "no rows");
  auto has = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (!csv.has(n)) return false;
    return true;
  };
  std::vector<const char*> shape_cols;  // the header decides the kind
  if (has({"m", "n", "k"})) {
    t.kind = KernelTableKind::Gemm;
    shape_cols = {"m", "n", "k"};
  } else if (has({"batch", "heads", "kv_heads", "head_dim", "isl"})) {
    t.kind = KernelTableKind::ContextAttention;
    shape_cols = {"batch", "heads", "kv_heads", "head_dim", "isl"};
  } else if (has({"batch", "heads", "kv_heads", "head_dim", "kvlen"})) {
    t.kind = KernelTableKind::GenerationAttention;
    shape_cols = {"batch", "heads", "kv_heads", "head_dim", "kvlen"};
  } else if (has({"batch", "heads", "kvlen"})) {
    t.kind = KernelTableKind::GenerationMla;
    shape_cols = {"batch", "heads", "kvlen"};
  } else if (has({"num_tokens", "hidden_size", "inter_size", "topk", "num_experts"})) {
    t.kind = KernelTableKind::Moe;
    shape_cols = {"num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"};
  } else {
    throw InputError(source, csv.has("m") || csv.has("n") ? "k" : "m",
                     "missing column (the header needs m, n, k for GEMMs; batch, heads, kv_heads, head_dim, isl for prompt "
                     "attention; batch, heads, kv_heads, head_dim, kvlen for grouped-query decode; batch, heads, kvlen for MLA decode; or num_tokens, hidden_size, inter_size, topk, num_experts "
                     "for MoE layers; and latency in ms and dtype)");
  }
  const bool moe = t.kind == KernelTableKind::Moe;
  const std::string dtype_col = csv.has("dtype") ? "dtype" : csv.has("gemm_dtype") ? "gemm_dtype" : "moe_dtype";
  if (!csv.has("latency") && !csv.has("latency_ms")) throw InputError(source, "latency", "missing column (milliseconds)");
  if (!csv.has(dtype_col)) throw InputError(source, "dtype", "missing column (bf16, fp8 or fp4)");
  for (const CsvTable::Row& row : csv.rows) {
    const std::string where = "line " + std::to_string(row.line);
    auto at = [&](const std::string& name) {
      return lower(csv.cell(row, csv.has(name) ? name : name == "latency" ? "latency_ms" : dtype_col));
    };
    KernelTable::Row r;
    if (moe && csv.has("distribution") && at("distribution") != "uniform" && at("distribution") != "balanced") {
      ++t.skipped;  // the formula prices balanced expert loads
      continue;
    }
    if (!dtype_of(at("dtype"), r.dtype)) {
      if (moe) {  // (AIConfigurator's MoE tables hold mixed-precision kernels, e.g. w4a8, that have no curve here)
        ++t.skipped;
        continue;
      }
      throw InputError(source, where, "unknown dtype \"" + at("dtype") + "\" (bf16, fp8, fp4)");
    }
    if (r.dtype == Dtype::FP4 && t.kind != KernelTableKind::Gemm && !moe)
      throw InputError(source, where, "fp4 attention has no curve (attention runs in bf16 or fp8)");
    for (const char* name : shape_cols)
      r.shape.push_back(moe && !csv.has(name) ? 1.0 : parse_real_in(at(name), source, where + ": " + name, 1e-9, 1e12));  // (tp, ep: 1)
    r.seconds = parse_real_in(at("latency"), source, where + ": latency", 1e-9, 1e12) * 1e-3;  // ms
    t.rows.push_back(r);
  }
  if (t.rows.empty()) throw InputError(source, "", t.skipped ? "no row of a balanced (uniform) distribution in bf16, fp8 or fp4" : "no rows");
  return t;
}

std::vector<KernelCurveFit> fit_kernel_curves(const KernelTable& table, GpuSpec& gpu) {
  std::vector<KernelCurveFit> out;
  ComputeModel cm;
  cm.sustained_clock = 1.0;  // microbenchmarks, at the clock they ran at
  for (Dtype d : {Dtype::BF16, Dtype::FP8, Dtype::FP4}) {
    std::vector<const KernelTable::Row*> rows;
    for (const auto& r : table.rows)
      if (r.dtype == d) rows.push_back(&r);
    if (rows.empty()) continue;
    if (d == Dtype::FP4 && !(gpu.fp4_flops > 0))
      throw InputError(table.source, "dtype", gpu.name + " has no FP4 tensor cores (fp4_flops): its FP4 GEMMs run as FP8 and have no curve of their own");
    KernelCurveFit f;
    f.curve = kernel_table_curve(table.kind, d);
    f.rows = static_cast<int>(rows.size());
    KernelTuning& t = gpu.kernels[static_cast<std::size_t>(f.curve)];
    const KernelCurve base = ComputeModel{}.curve(f.curve);
    f.max_eff_before = t.max_eff > 0 ? t.max_eff : base.max_eff;
    f.hbm_eff_before = t.hbm_eff > 0 ? t.hbm_eff : base.hbm_eff;
    auto rms = [&](double me, double he) {
      GpuSpec g = gpu;
      g.kernels[static_cast<std::size_t>(f.curve)] = {me, he};
      double s = 0;
      for (const auto* r : rows) s += std::pow(std::log(kernel_row_time(g, cm, table.kind, d, r->shape) / r->seconds), 2);
      return std::sqrt(s / static_cast<double>(rows.size()));
    };
    // One fraction with the other held.
    auto search = [](auto objective) { return golden_section_min(objective, 0.02, 1.0, 1e-5, 48); };
    double me = f.max_eff_before, he = f.hbm_eff_before;
    f.rms_log_before = rms(me, he);
    for (int round = 0; round < 6; ++round) {
      me = search([&](double x) { return rms(x, he); });
      he = search([&](double x) { return rms(me, x); });
    }
    f.max_eff = me;
    f.hbm_eff = he;
    f.rms_log_after = rms(me, he);
    t = {me, he};
    out.push_back(f);
  }
  return out;
}

}  // namespace shardsim
