// sim/compute_cost.cpp — roofline with a saturating efficiency curve.
#include "sim/compute_cost.hpp"

#include <algorithm>

namespace shardsim {

double peak_flops(const GpuSpec& gpu, Dtype math) {
  return (math == Dtype::FP8 || math == Dtype::FP4) ? gpu.fp8_flops : gpu.bf16_flops;
}

double compute_time(const GpuSpec& gpu, double flops, double bytes, Dtype math, const ComputeModel& m) {
  if (flops <= 0 && bytes <= 0) return 0;
  bool low = math == Dtype::FP8 || math == Dtype::FP4;
  double eff = (low ? m.max_efficiency_fp8 : m.max_efficiency_bf16) * flops / (flops + m.half_flops);
  double t_flops = flops > 0 ? flops / (peak_flops(gpu, math) * eff) : 0;
  double t_bytes = bytes / (gpu.hbm_bw * m.hbm_efficiency);
  return m.op_overhead + std::max(t_flops, t_bytes);
}

}  // namespace shardsim
