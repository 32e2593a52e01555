// sim/step/kernel_calibration.hpp — a GPU's kernel curves fitted to the user's own kernel timings.
//
// Owns: parse_kernel_table(), kernel_row_time() (the one formula by which a kernel table's row is
// priced: `calibrate --kernels` and validate's measured-kernel rows) and fit_kernel_curves().
// A table is CSV with a header naming (in any order, case-insensitive) a latency in milliseconds
// (`latency` or `latency_ms`), the math type (`dtype` or `gemm_dtype`: bf16 | fp8 | fp4, or
// AIConfigurator's `float16`, `fp8`, `nvfp4` spellings) and the shape columns of one kernel kind,
// which the header decides (other columns are ignored, so AIConfigurator's layouts read as is):
//   gemm               m, n, k                                  → gemm_bf16 / gemm_fp8 / gemm_fp4
//   context_attention  batch, heads, kv_heads, head_dim, isl    → attn_prefill / attn_prefill_fp8
//                      (causal prompt attention, GQA/MHA)
//   generation_attention  batch, heads, kv_heads, head_dim, kvlen → attn_decode
//                      (paged grouped-query decode, one query token a sequence; KV in the row's dtype)
//   generation_mla     batch, heads, kvlen                      → attn_decode_mla / attn_decode_mla_fp8
//                      (absorbed MLA decode: 576-wide latent keys, 512-wide values)
//   moe                num_tokens, hidden_size, inter_size, topk, num_experts [, moe_tp_size, moe_ep_size]
//                      → moe_bf16 / moe_fp8 / moe_fp4 (one rank's routed experts of one layer,
//                      balanced: the gate+up and down grouped GEMMs; AIConfigurator's moe_perf
//                      layout, whose dtype column is moe_dtype; rows of another `distribution`
//                      than uniform/balanced, or of a mixed-precision dtype, are skipped and counted)
// Each row is priced as the lowering prices that kernel (sim/step/compute_cost.hpp) at the clock the
// microbenchmark ran at (ComputeModel::sustained_clock 1); per curve the GPU's own fractions of its
// peaks (GpuSpec::kernels: max_eff, hbm_eff) are fitted as the Blackwell presets' were: least
// squares of log(model / measured) over the curve's rows, by coordinate golden-section search in
// [0.02, 1]². `shardsim calibrate --kernels` writes the cluster file with the GPU spec carrying them.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/plan/dtype.hpp"
#include "sim/step/compute_cost.hpp"
#include "topologies/gpu_spec.hpp"

namespace shardsim {

// The kernel kinds a table can hold (their shape columns above).
enum class KernelTableKind { Gemm, ContextAttention, GenerationAttention, GenerationMla, Moe };
// "gemm", "context_attention", "generation_attention", "generation_mla", "moe"
const char* kernel_table_kind_name(KernelTableKind k);

struct KernelTable {
  std::string source;
  KernelTableKind kind = KernelTableKind::Gemm;
  struct Row {
    Dtype dtype = Dtype::BF16;
    std::vector<double> shape;  // the kind's shape columns, in the order listed above
    double seconds = 0;
  };
  std::vector<Row> rows;
  int skipped = 0;           // rows left out (moe: not a balanced distribution, or a dtype with no curve)
};

// Throws InputError(source, "line N" or the column, reason).
KernelTable parse_kernel_table(const std::string& text, const std::string& source);

// The curve a kind's rows of `dtype` follow.
KernelCurveId kernel_table_curve(KernelTableKind kind, Dtype dtype);

// The model's seconds for one row (`shape` as above) on `gpu` with `cm` (callers pricing
// microbenchmarks pass sustained_clock 1).
double kernel_row_time(const GpuSpec& gpu, const ComputeModel& cm, KernelTableKind kind, Dtype dtype, const std::vector<double>& shape);

struct KernelCurveFit {
  KernelCurveId curve = KernelCurveId::GemmBf16;
  int rows = 0;
  double max_eff_before = 0, hbm_eff_before = 0, max_eff = 0, hbm_eff = 0;  // the effective fractions
  double rms_log_before = 0, rms_log_after = 0;
};

// Fits every curve the table has rows of and writes the fractions into `gpu.kernels`. FP4 GEMM
// rows on a GPU without FP4 tensor cores (fp4_flops 0) are refused (InputError).
std::vector<KernelCurveFit> fit_kernel_curves(const KernelTable& table, GpuSpec& gpu);

// One GEMM row at the microbenchmarks' clock (kernel_row_time of a Gemm row).
double gemm_model_time(const GpuSpec& gpu, Dtype dtype, double m, double n, double k);

}  // namespace shardsim
