// sim/step/kernel_calibration.cpp — GEMM timing tables read, and the GPU's GEMM fractions fitted (see the header).
#include "sim/step/kernel_calibration.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <sstream>

#include "common/golden_section.hpp"
#include "common/input_error.hpp"
#include "common/text_number.hpp"
#include "sim/step/compute_cost.hpp"

namespace shardsim {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  s.erase(0, s.find_first_not_of(" \t\""));
  s.erase(s.find_last_not_of(" \t\r\"") + 1);
  return s;
}

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  for (std::string c; std::getline(ss, c, ',');) out.push_back(c);
  return out;
}

bool dtype_of(const std::string& s, Dtype& d) {
  if (s == "bf16" || s == "float16" || s == "fp16" || s == "bfloat16") d = Dtype::BF16;
  else if (s == "fp8" || s == "fp8_block" || s == "float8") d = Dtype::FP8;
  else if (s == "fp4" || s == "nvfp4" || s == "mxfp4") d = Dtype::FP4;
  else return false;
  return true;
}

KernelCurveId gemm_curve(Dtype d) {
  return d == Dtype::FP4 ? KernelCurveId::GemmFp4 : d == Dtype::FP8 ? KernelCurveId::GemmFp8 : KernelCurveId::GemmBf16;
}

}  // namespace

double gemm_model_time(const GpuSpec& gpu, Dtype d, double m, double n, double k) {
  const double b = d == Dtype::FP4 ? 0.5 : d == Dtype::FP8 ? 1 : 2;  // weight and activation bytes per element
  ComputeModel cm;
  cm.sustained_clock = 1.0;  // kernel tables are microbenchmarks, at the clock they ran at (compute_cost.hpp)
  return compute_time(gpu, ComputeKind::Gemm, m, 2 * m * n * k, n * k * b + m * k * b + m * n * 2, d, cm);
}

GemmTable parse_gemm_table(const std::string& text, const std::string& source) {
  GemmTable t;
  t.source = source;
  std::stringstream ss(text);
  std::map<std::string, std::size_t> col;
  int line_no = 0;
  for (std::string line; std::getline(ss, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') continue;
    const std::vector<std::string> c = cells(line);
    if (col.empty()) {  // the header
      for (std::size_t i = 0; i < c.size(); ++i) col[lower(c[i])] = i;
      for (const char* need : {"m", "n", "k"})
        if (!col.count(need)) throw InputError(source, need, "missing column (the header needs m, n, k, latency in ms and dtype)");
      if (!col.count("latency") && !col.count("latency_ms")) throw InputError(source, "latency", "missing column (milliseconds)");
      if (!col.count("dtype") && !col.count("gemm_dtype")) throw InputError(source, "dtype", "missing column (bf16, fp8 or fp4)");
      continue;
    }
    const std::string where = "line " + std::to_string(line_no);
    auto at = [&](const std::string& name) -> std::string {
      const auto it = col.count(name) ? col.find(name) : col.find(name == "latency" ? "latency_ms" : "gemm_dtype");
      if (it->second >= c.size()) throw InputError(source, where, "fewer cells than the header");
      return lower(c[it->second]);
    };
    GemmTable::Row r;
    if (!dtype_of(at("dtype"), r.dtype)) throw InputError(source, where, "unknown dtype \"" + at("dtype") + "\" (bf16, fp8, fp4)");
    double* slots[] = {&r.m, &r.n, &r.k, &r.seconds};
    const char* names[] = {"m", "n", "k", "latency"};
    for (int i = 0; i < 4; ++i) *slots[i] = parse_real_in(at(names[i]), source, where + ": " + names[i], 1e-9, 1e12);
    r.seconds *= 1e-3;  // ms
    t.rows.push_back(r);
  }
  if (t.rows.empty()) throw InputError(source, "", "no rows");
  return t;
}

std::vector<GemmCurveFit> fit_gemm_curves(const GemmTable& table, GpuSpec& gpu) {
  std::vector<GemmCurveFit> out;
  for (Dtype d : {Dtype::BF16, Dtype::FP8, Dtype::FP4}) {
    std::vector<const GemmTable::Row*> rows;
    for (const auto& r : table.rows)
      if (r.dtype == d) rows.push_back(&r);
    if (rows.empty()) continue;
    if (d == Dtype::FP4 && !(gpu.fp4_flops > 0))
      throw InputError(table.source, "dtype", gpu.name + " has no FP4 tensor cores (fp4_flops): its FP4 GEMMs run as FP8 and have no curve of their own");
    GemmCurveFit f;
    f.curve = gemm_curve(d);
    f.rows = static_cast<int>(rows.size());
    KernelTuning& t = gpu.kernels[static_cast<std::size_t>(f.curve)];
    const KernelCurve base = ComputeModel{}.curve(f.curve);
    f.max_eff_before = t.max_eff > 0 ? t.max_eff : base.max_eff;
    f.hbm_eff_before = t.hbm_eff > 0 ? t.hbm_eff : base.hbm_eff;
    auto rms = [&](double me, double he) {
      GpuSpec g = gpu;
      g.kernels[static_cast<std::size_t>(f.curve)] = {me, he};
      double s = 0;
      for (const auto* r : rows) s += std::pow(std::log(gemm_model_time(g, d, r->m, r->n, r->k) / r->seconds), 2);
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
