// sim/step/compute_cost.cpp — kernel curves: shape-dependent roofline with imperfect overlap.
#include "sim/step/compute_cost.hpp"

#include <algorithm>

namespace shardsim {

double peak_flops(const GpuSpec& gpu, Dtype math) {
  return (math == Dtype::FP8 || math == Dtype::FP4) ? gpu.fp8_flops : gpu.bf16_flops;
}

const KernelCurve& kernel_curve(const ComputeModel& m, ComputeKind kind, Dtype math) {
  bool low = math == Dtype::FP8 || math == Dtype::FP4;
  switch (kind) {
    case ComputeKind::Gemm:
    case ComputeKind::GroupedGemm: return low ? m.gemm_fp8 : m.gemm_bf16;
    case ComputeKind::PrefillAttention: return low ? m.attn_prefill_fp8 : m.attn_prefill;
    case ComputeKind::DecodeAttention: return m.attn_decode;
    case ComputeKind::MlaDecodeAttention: return m.attn_decode_mla;
    case ComputeKind::Memory: return m.memory;
  }
  return m.memory;
}

double compute_time(const GpuSpec& gpu, ComputeKind kind, double rows, double flops, double bytes, Dtype math,
                    const ComputeModel& m, double share) {
  if (flops <= 0 && bytes <= 0) return 0;
  const KernelCurve& c = kernel_curve(m, kind, math);
  rows = std::max(rows, 1.0);
  double eff = c.max_eff * (c.half_rows > 0 ? rows / (rows + c.half_rows) : 1.0);
  double bw = c.hbm_eff * (c.half_bytes > 0 ? bytes / (bytes + c.half_bytes) : 1.0);
  double tf = flops > 0 && eff > 0 ? flops / (peak_flops(gpu, math) * eff * m.sustained_clock * share) : 0;
  double tb = bytes > 0 && bw > 0 ? bytes / (gpu.hbm_bw * bw) : 0;
  return c.fixed + std::max(tf, tb) + c.overlap_loss * std::min(tf, tb);
}

double compute_time(const GpuSpec& gpu, const StepOp& op, const ComputeModel& m, double share) {
  return compute_time(gpu, op.kernel, op.rows, op.flops, op.hbm_bytes, op.math, m, share);
}

}  // namespace shardsim
