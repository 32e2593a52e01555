// sim/step/kernel_calibration.hpp — a GPU's GEMM curves fitted to the user's own kernel timings.
//
// Owns: parse_gemm_table() and fit_gemm_curves(). A table of GEMM timings — CSV with a header
// naming (in any order, case-insensitive) `m`, `n`, `k`, a latency in milliseconds (`latency` or
// `latency_ms`), and the math type (`dtype` or `gemm_dtype`: bf16 | fp8 | fp4, or AIConfigurator's
// `float16`, `fp8`, `nvfp4` spellings); other columns are ignored, so AIConfigurator's gemm_perf
// layout reads as is — gives, per math type, the GPU's own fractions of its peaks
// (GpuSpec::kernels: max_eff, hbm_eff of gemm_bf16 / gemm_fp8 / gemm_fp4), fitted as the Blackwell
// presets' were: least squares of log(model / measured) over the type's rows, each GEMM priced as
// the compute model prices a Linear (sim/step/compute_cost.hpp: flops 2MNK, HBM bytes of A, B and
// the BF16 output, at the clock the microbenchmark ran at: ComputeModel::sustained_clock 1), by
// coordinate golden-section search in [0.02, 1]². `shardsim calibrate
// --kernels` writes the cluster file with the GPU spec carrying them.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/plan/dtype.hpp"
#include "topologies/gpu_spec.hpp"

namespace shardsim {

struct GemmTable {
  std::string source;
  struct Row {
    Dtype dtype = Dtype::BF16;
    double m = 0, n = 0, k = 0, seconds = 0;
  };
  std::vector<Row> rows;
};

// Throws InputError(source, "line N" or the column, reason).
GemmTable parse_gemm_table(const std::string& text, const std::string& source);

struct GemmCurveFit {
  KernelCurveId curve = KernelCurveId::GemmBf16;
  int rows = 0;
  double max_eff_before = 0, hbm_eff_before = 0, max_eff = 0, hbm_eff = 0;  // the effective fractions
  double rms_log_before = 0, rms_log_after = 0;
};

// Fits every math type the table has rows of and writes the fractions into `gpu.kernels`.
// FP4 rows on a GPU without FP4 tensor cores (fp4_flops 0) are refused (InputError).
std::vector<GemmCurveFit> fit_gemm_curves(const GemmTable& table, GpuSpec& gpu);

// The model's seconds for one GEMM row on `gpu` (what the fit compares; also validation's formula).
double gemm_model_time(const GpuSpec& gpu, Dtype dtype, double m, double n, double k);

}  // namespace shardsim
