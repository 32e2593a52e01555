// sim/step/compute_cost.cpp — kernel curves: shape-dependent roofline with imperfect overlap.
#include "sim/step/compute_cost.hpp"

#include <algorithm>

namespace shardsim {

double peak_flops(const GpuSpec& gpu, Dtype math) {
  if (math == Dtype::FP4 && gpu.fp4_flops > 0) return gpu.fp4_flops;
  return (math == Dtype::FP8 || math == Dtype::FP4) ? gpu.fp8_flops : gpu.bf16_flops;
}

ComputeWork compute_work(const GpuSpec& gpu, const StepOp& op) {
  if (op.type != OpType::Compute) return {};
  Dtype math = op.math;
  if (math == Dtype::FP4 && !(gpu.fp4_flops > 0)) math = Dtype::FP8;
  return {op.flops * op.weight / peak_flops(gpu, math), op.hbm_bytes * op.weight / gpu.hbm_bw};
}

KernelCurveId curve_id(ComputeKind kind, Dtype math) {
  const bool low = math == Dtype::FP8 || math == Dtype::FP4;
  switch (kind) {
    case ComputeKind::Gemm:
      return math == Dtype::FP4 ? KernelCurveId::GemmFp4 : low ? KernelCurveId::GemmFp8 : KernelCurveId::GemmBf16;
    case ComputeKind::GroupedGemm:
      return math == Dtype::FP4 ? KernelCurveId::MoeFp4 : low ? KernelCurveId::MoeFp8 : KernelCurveId::MoeBf16;
    case ComputeKind::PrefillAttention: return low ? KernelCurveId::AttnPrefillFp8 : KernelCurveId::AttnPrefill;
    case ComputeKind::DecodeAttention: return KernelCurveId::AttnDecode;
    case ComputeKind::MlaDecodeAttention: return low ? KernelCurveId::AttnDecodeMlaFp8 : KernelCurveId::AttnDecodeMla;
    case ComputeKind::Memory: return KernelCurveId::Memory;
  }
  return KernelCurveId::Memory;
}

namespace {
// The GEMM curve a grouped-GEMM curve falls back to on a GPU that has no table of its own.
KernelCurveId gemm_of(KernelCurveId id) {
  switch (id) {
    case KernelCurveId::MoeBf16: return KernelCurveId::GemmBf16;
    case KernelCurveId::MoeFp8: return KernelCurveId::GemmFp8;
    case KernelCurveId::MoeFp4: return KernelCurveId::GemmFp4;
    default: return id;
  }
}
}  // namespace

const KernelCurve& ComputeModel::curve(KernelCurveId id) const {
  switch (id) {
    case KernelCurveId::GemmBf16: return gemm_bf16;
    case KernelCurveId::GemmFp8: return gemm_fp8;
    case KernelCurveId::GemmFp4: return gemm_fp4;
    case KernelCurveId::AttnPrefill: return attn_prefill;
    case KernelCurveId::AttnPrefillFp8: return attn_prefill_fp8;
    case KernelCurveId::AttnDecode: return attn_decode;
    case KernelCurveId::AttnDecodeMla: return attn_decode_mla;
    case KernelCurveId::AttnDecodeMlaFp8: return attn_decode_mla_fp8;
    case KernelCurveId::MoeBf16:  // grouped GEMMs: the GEMM curves (gpu_curve: unless measured)
    case KernelCurveId::MoeFp8:
    case KernelCurveId::MoeFp4: return curve(gemm_of(id));
    case KernelCurveId::Memory:
    case KernelCurveId::Count: break;
  }
  return memory;
}

const KernelCurve& kernel_curve(const ComputeModel& m, ComputeKind kind, Dtype math) { return m.curve(curve_id(kind, math)); }

KernelCurve gpu_curve(const GpuSpec& gpu, const ComputeModel& m, ComputeKind kind, Dtype& math) {
  if (math == Dtype::FP4 && !(gpu.fp4_flops > 0)) math = Dtype::FP8;  // no FP4 tensor cores: FP4 operands run as FP8
  const KernelCurveId id = curve_id(kind, math);
  KernelCurve c = m.curve(id);
  const KernelTuning& own = gpu.kernels[static_cast<std::size_t>(id)];
  const KernelTuning& t = own.max_eff > 0 || own.hbm_eff > 0 ? own : gpu.kernels[static_cast<std::size_t>(gemm_of(id))];
  if (t.max_eff > 0) c.max_eff = t.max_eff;
  if (t.hbm_eff > 0) c.hbm_eff = t.hbm_eff;
  return c;
}

double compute_time(const GpuSpec& gpu, ComputeKind kind, double rows, double flops, double bytes, Dtype math,
                    const ComputeModel& m, double share) {
  if (flops <= 0 && bytes <= 0) return 0;
  const KernelCurve c = gpu_curve(gpu, m, kind, math);
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
