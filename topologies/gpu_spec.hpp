// topologies/gpu_spec.hpp — GPU specifications as data.
//
// Owns: GpuSpec (one accelerator's peak rates and memory) and the preset table loaded from the
// embedded topologies/data/gpus.json (H100-SXM-80GB, H200-SXM-141GB, B200, H800, …).
// Units: flop/s, bytes, bytes/s. NVLink bandwidth is per direction, per GPU.
// Thread-safety: presets are immutable after first load; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "common/json_reader.hpp"

namespace shardsim {

struct GpuSpec {
  std::string name;
  double bf16_flops = 0;   // peak dense BF16 flop/s
  double fp8_flops = 0;    // peak dense FP8 flop/s
  double hbm_bytes = 0;    // HBM capacity, bytes
  double hbm_bw = 0;       // HBM bandwidth, bytes/s (peak)
  double nvlink_bw = 0;    // NVLink bandwidth per direction, bytes/s
  int sms = 132;           // streaming multiprocessors (what communication kernels resident beside compute take a share of)
  double host_bw = 64e9;   // host memory ↔ GPU, bytes/s per direction (PCIe 5.0 x16; NVLink-C2C on Grace parts)
  std::string comment;     // source of the figures
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
