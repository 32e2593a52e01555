// topologies/gpu_spec.hpp — GPU specifications as data.
//
// Owns: GpuSpec (one accelerator's peak rates and memory) and the preset table loaded from the
// embedded topologies/data/gpus.json (H100-SXM-80GB, H200-SXM-141GB, B200, H800, …).
// Units: flop/s, bytes, bytes/s. NVLink bandwidth is per direction, per GPU.
// Thread-safety: presets are immutable after first load; safe from any thread.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "common/json_reader.hpp"

namespace shardsim {

// The compute model's kernel curves (sim/step/compute_cost.hpp), by kernel kind and math type.
// Moe*: the grouped GEMMs of MoE expert layers; unset on a GPU, they take its GEMM curve of the
// same dtype (tuning included), so only a measured grouped-GEMM table sets them apart.
enum class KernelCurveId {
  GemmBf16, GemmFp8, GemmFp4, AttnPrefill, AttnPrefillFp8, AttnDecode, AttnDecodeMla, AttnDecodeMlaFp8, Memory,
  MoeBf16, MoeFp8, MoeFp4, Count
};
constexpr int kNumKernelCurves = static_cast<int>(KernelCurveId::Count);
// "gemm_bf16", "attn_decode_mla_fp8", … (the cluster format's names).
const char* kernel_curve_name(KernelCurveId id);

// A curve measured on this GPU: the best fraction of its own peak flop/s (max_eff) and of its
// HBM bandwidth (hbm_eff) the kind reaches; 0 = the curve's own constant (fitted on H100).
struct KernelTuning {
  double max_eff = 0, hbm_eff = 0;
  bool operator==(const KernelTuning&) const = default;
};

// The GPU's power model (sim/serving/energy.hpp): board watts = idle_w, + active_w while a kernel
// runs on it, + tensor_w × (flops ÷ peak flop/s per second) + hbm_w × (HBM bytes ÷ peak bandwidth
// per second) — the static and dynamic parts ML.ENERGY's measurements separate. tdp_w is the board
// limit (datasheet): a mean draw while busy above it is held at it, and the result says so. All 0 =
// no model (energy is not reported).
struct GpuPower {
  double tdp_w = 0, idle_w = 0, active_w = 0, tensor_w = 0, hbm_w = 0;
  std::string source;
  bool modelled() const { return tdp_w > 0; }
  bool operator==(const GpuPower&) const = default;
};

struct GpuSpec {
  std::string name;
  double bf16_flops = 0;   // peak dense BF16 flop/s
  double fp8_flops = 0;    // peak dense FP8 flop/s
  double fp4_flops = 0;    // peak dense FP4 (NVFP4 / MXFP4 block-scaled) flop/s; 0: no FP4 tensor cores (FP4 math runs at the FP8 rate)
  double hbm_bytes = 0;    // HBM capacity, bytes
  double hbm_bw = 0;       // HBM bandwidth, bytes/s (peak)
  double nvlink_bw = 0;    // NVLink bandwidth per direction, bytes/s
  int sms = 132;           // streaming multiprocessors (what communication kernels resident beside compute take a share of)
  double host_bw = 64e9;   // host memory ↔ GPU, bytes/s per direction (PCIe 5.0 x16; NVLink-C2C on Grace parts)
  double host_bytes = 0;   // host memory per GPU for KV and weight offload, bytes; 0 = not stated (unchecked)
  std::array<KernelTuning, kNumKernelCurves> kernels{};  // per-curve corrections measured on this GPU (none: H100's fractions)
  GpuPower power;          // optional ("power" in JSON)
  std::string comment;     // source of the figures
  bool operator==(const GpuSpec&) const = default;
};

// All presets, in file order.
const std::vector<GpuSpec>& gpu_presets();
// The preset called `name` (case-insensitive); throws InputError(source, field, …) listing the
// known names when absent.
const GpuSpec& gpu_preset(const std::string& name, const std::string& source = "gpu", const std::string& field = "");
// Reads an inline spec object (all fields required except comment).
GpuSpec gpu_spec_from_json(JsonObject obj);
json gpu_spec_to_json(const GpuSpec& g);

}  // namespace shardsim
