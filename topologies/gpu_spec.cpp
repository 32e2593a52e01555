// topologies/gpu_spec.cpp — GPU presets from the embedded topologies/data/gpus.json, inline specs.
//
// Owns: the preset table (parsed once, on first use, from the embedded file; each preset may carry
// "aliases", matched case-insensitively like the name) and the JSON form of one GpuSpec.
// Units: flop/s, bytes, bytes/s (NVLink per direction).
// Thread-safety: the table is a function-local static (initialised once, then read-only).
#include "topologies/gpu_spec.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "common/text_case.hpp"

namespace shardsim {
namespace {

constexpr const char* kPresetFile = "topologies/data/gpus.json";

struct Preset {
  GpuSpec spec;
  std::vector<std::string> aliases;
};

// A strictly positive, finite number in [lo, hi]: tiny figures made times infinite or NaN, or
// every plan "infeasible: /memory" (the wrong cause), so they are refused here by name.
double positive(JsonObject& o, std::string_view key, double lo, double hi) {
  const double big = std::numeric_limits<double>::max();
  double v = o.number(key, -big, big);
  if (!(v > 0)) o.fail(key, "must be > 0, got " + format_number(v));
  if (v > hi) o.fail(key, "value " + format_number(v) + " is implausibly large (limit " + format_number(hi) + ")");
  if (v < lo) o.fail(key, "value " + format_number(v) + " is implausibly small (at least " + format_number(lo) + ")");
  return v;
}

std::vector<Preset> load_presets() {
  const std::string source = std::string("embedded:") + kPresetFile;
  auto text = embedded_file(kPresetFile);
  if (!text) throw InputError(source, "", "missing from the binary (re-run cmake)");
  json doc = parse_json(*text, source);
  JsonObject top(doc, source);
  const json& list = top.raw("gpus");
  top.finish();
  if (!list.is_array()) throw InputError(source, "/gpus", "expected an array of GPU specs");
  std::vector<Preset> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    JsonObject o(list[i], source, "/gpus/" + std::to_string(i));
    Preset p;
    if (o.has("aliases")) {
      const json& a = o.raw("aliases");
      if (!a.is_array()) o.fail("aliases", "expected an array of strings");
      for (const auto& s : a) {
        if (!s.is_string()) o.fail("aliases", "expected an array of strings");
        p.aliases.push_back(s.get<std::string>());
      }
    }
    p.spec = gpu_spec_from_json(std::move(o));
    out.push_back(std::move(p));
  }
  return out;
}

const std::vector<Preset>& preset_table() {
  static const std::vector<Preset> table = load_presets();
  return table;
}

}  // namespace

const std::vector<GpuSpec>& gpu_presets() {
  static const std::vector<GpuSpec> specs = [] {
    std::vector<GpuSpec> v;
    for (const auto& p : preset_table()) v.push_back(p.spec);
    return v;
  }();
  return specs;
}

const GpuSpec& gpu_preset(const std::string& name, const std::string& source, const std::string& field) {
  const std::string want = lowercase(name);
  const auto& table = preset_table();
  for (std::size_t i = 0; i < table.size(); ++i) {
    bool hit = lowercase(table[i].spec.name) == want;
    for (const auto& a : table[i].aliases) hit = hit || lowercase(a) == want;
    if (hit) return gpu_presets()[i];
  }
  std::string known;
  for (const auto& p : table) known += (known.empty() ? "" : ", ") + p.spec.name;
  throw InputError(source, field, "unknown GPU preset \"" + name + "\"; known: " + known);
}

const char* kernel_curve_name(KernelCurveId id) {
  switch (id) {
    case KernelCurveId::GemmBf16: return "gemm_bf16";
    case KernelCurveId::GemmFp8: return "gemm_fp8";
    case KernelCurveId::GemmFp4: return "gemm_fp4";
    case KernelCurveId::AttnPrefill: return "attn_prefill";
    case KernelCurveId::AttnPrefillFp8: return "attn_prefill_fp8";
    case KernelCurveId::AttnDecode: return "attn_decode";
    case KernelCurveId::AttnDecodeMla: return "attn_decode_mla";
    case KernelCurveId::AttnDecodeMlaFp8: return "attn_decode_mla_fp8";
    case KernelCurveId::Memory: return "memory";
    case KernelCurveId::MoeBf16: return "moe_bf16";
    case KernelCurveId::MoeFp8: return "moe_fp8";
    case KernelCurveId::MoeFp4: return "moe_fp4";
    case KernelCurveId::Count: break;
  }
  return "?";
}

namespace {

// "kernels": {"gemm_bf16": {"max_eff": 0.67, "hbm_eff": 0.8, "source": "…"}, …}
void read_kernels(JsonObject& obj, GpuSpec& g) {
  if (!obj.has("kernels")) return;
  JsonObject k = obj.object("kernels");
  const json& all = obj.raw("kernels");
  for (auto it = all.begin(); it != all.end(); ++it) {
    int id = -1;
    std::string known;
    for (int i = 0; i < kNumKernelCurves; ++i) {
      const char* n = kernel_curve_name(static_cast<KernelCurveId>(i));
      if (it.key() == n) id = i;
      known += (i ? ", " : "") + std::string(n);
    }
    if (id < 0) k.fail(it.key(), "unknown kernel curve (expected one of: " + known + ")");
    JsonObject c = k.object(it.key());
    KernelTuning& t = g.kernels[static_cast<std::size_t>(id)];
    t.max_eff = c.number_or("max_eff", 0, 0, 1);
    t.hbm_eff = c.number_or("hbm_eff", 0, 0, 1);
    c.string_or("source", "");
    c.finish();
  }
  k.finish();
}

// "power": {"tdp_w": 700, "idle_w": 70, "active_w": …, "tensor_w": …, "hbm_w": …, "source": "…"}
void read_power(JsonObject& obj, GpuSpec& g) {
  if (!obj.has("power")) return;
  JsonObject p = obj.object("power");
  GpuPower& w = g.power;
  w.tdp_w = positive(p, "tdp_w", 1, 1e5);
  w.idle_w = p.number("idle_w", 0, 1e5);
  w.active_w = p.number_or("active_w", 0, 0, 1e5);
  w.tensor_w = p.number_or("tensor_w", 0, 0, 1e5);
  w.hbm_w = p.number_or("hbm_w", 0, 0, 1e5);
  if (w.idle_w > w.tdp_w) p.fail("idle_w", "idle draw " + format_number(w.idle_w) + " W above tdp_w " + format_number(w.tdp_w) + " W");
  w.source = p.string_or("source", "");
  p.finish();
}

}  // namespace

GpuSpec gpu_spec_from_json(JsonObject obj) {
  GpuSpec g;
  g.name = obj.name("name");
  g.bf16_flops = positive(obj, "bf16_flops", 1e9, 1e18);
  g.fp8_flops = positive(obj, "fp8_flops", 1e9, 1e18);
  g.fp4_flops = obj.has("fp4_flops") ? positive(obj, "fp4_flops", 1e9, 1e18) : 0;
  g.hbm_bytes = positive(obj, "hbm_bytes", 1e8, 1e14);
  g.hbm_bw = positive(obj, "hbm_bw", 1e8, 1e15);
  g.nvlink_bw = positive(obj, "nvlink_bw", 1e6, 1e15);
  const double sms = obj.number_or("sms", 132, 1, 10000);
  if (sms != std::floor(sms)) obj.fail("sms", "must be a whole number of SMs, got " + format_number(sms));
  g.sms = static_cast<int>(sms);
  g.host_bw = obj.has("host_bw") ? positive(obj, "host_bw", 1e8, 1e13) : 64e9;
  g.host_bytes = obj.has("host_bytes") ? positive(obj, "host_bytes", 1e9, 1e14) : 0;
  read_kernels(obj, g);
  read_power(obj, g);
  g.comment = obj.string_or("comment", "");
  obj.finish();
  return g;
}

json gpu_spec_to_json(const GpuSpec& g) {
  json j = json::object();
  j["name"] = g.name;
  j["bf16_flops"] = g.bf16_flops;
  j["fp8_flops"] = g.fp8_flops;
  if (g.fp4_flops > 0) j["fp4_flops"] = g.fp4_flops;
  j["hbm_bytes"] = g.hbm_bytes;
  j["hbm_bw"] = g.hbm_bw;
  j["nvlink_bw"] = g.nvlink_bw;
  j["sms"] = g.sms;
  j["host_bw"] = g.host_bw;
  if (g.host_bytes > 0) j["host_bytes"] = g.host_bytes;
  json kernels = json::object();
  for (int i = 0; i < kNumKernelCurves; ++i) {
    const KernelTuning& t = g.kernels[static_cast<std::size_t>(i)];
    if (t.max_eff <= 0 && t.hbm_eff <= 0) continue;
    json c = json::object();
    if (t.max_eff > 0) c["max_eff"] = t.max_eff;
    if (t.hbm_eff > 0) c["hbm_eff"] = t.hbm_eff;
    kernels[kernel_curve_name(static_cast<KernelCurveId>(i))] = c;
  }
  if (!kernels.empty()) j["kernels"] = kernels;
  if (g.power.modelled()) {
    const GpuPower& w = g.power;
    j["power"] = {{"tdp_w", w.tdp_w}, {"idle_w", w.idle_w}, {"active_w", w.active_w}, {"tensor_w", w.tensor_w}, {"hbm_w", w.hbm_w}};
    if (!w.source.empty()) j["power"]["source"] = w.source;
  }
  if (!g.comment.empty()) j["comment"] = g.comment;
  return j;
}

}  // namespace shardsim
