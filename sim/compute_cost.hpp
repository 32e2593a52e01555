// sim/compute_cost.hpp — how long one compute operation takes on one GPU (roofline).
//
// Owns: the compute model both executors share: time = overhead + max(flops / (peak(dtype) ·
// efficiency(flops)), bytes / (hbm_bw · hbm_efficiency)). The efficiency curve saturates with
// the size of the operation: efficiency(f) = max_efficiency(dtype) · f / (f + half_flops), so small
// decode GEMMs run far below peak (they are memory-bound anyway) and large prefill GEMMs approach
// max_efficiency. Constants and their calibration: docs/validation.md.
// Thread-safety: pure functions.
#pragma once

#include "sim/dtype.hpp"
#include "topologies/gpu_spec.hpp"

namespace shardsim {

struct ComputeModel {
  double max_efficiency_bf16 = 0.70;  // best achieved fraction of peak dense BF16 flop/s (large GEMMs)
  double max_efficiency_fp8 = 0.55;   // FP8: lower (scaling, quantisation epilogues); fit to MLPerf v4.1
  double half_flops = 1e9;          // operation size at which half of max_efficiency is reached
  double hbm_efficiency = 2.9 / 3.35;  // achieved HBM bandwidth fraction (≈2.9 of 3.35 TB/s on H100)
  double op_overhead = 1.5e-6;      // per-kernel launch/tail overhead, seconds (CUDA graphs)
};

double peak_flops(const GpuSpec& gpu, Dtype math);
// Seconds for an operation of `flops` and `bytes` of HBM traffic.
double compute_time(const GpuSpec& gpu, double flops, double bytes, Dtype math, const ComputeModel& m = {});

}  // namespace shardsim
