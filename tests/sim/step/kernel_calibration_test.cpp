// tests/sim/step/kernel_calibration_test.cpp — GEMM timing tables read, and the GPU's GEMM fractions fitted:
// a table the model made is recovered, and each Blackwell GPU's embedded tables give back the fractions its preset carries.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <unistd.h>

#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "sim/step/compute_cost.hpp"
#include "sim/step/kernel_calibration.hpp"
#include "tests/cli_runner.hpp"
#include "topologies/cluster.hpp"

using namespace shardsim;

namespace {

std::string csv_from(const GpuSpec& g, Dtype d, const char* name) {
  std::string t = "framework,m,n,k,gemm_dtype,latency\n";
  for (double m : {1.0, 16.0, 128.0, 1024.0, 4096.0, 16384.0})
    for (double nk : {4096.0, 8192.0, 16384.0}) {
      char line[160];
      std::snprintf(line, sizeof line, "TRTLLM,%.0f,%.0f,%.0f,%s,%.6f\n", m, nk, nk, name, gemm_model_time(g, d, m, nk, nk) * 1e3);
      t += line;
    }
  return t;
}

// A BF16 attention table (64 query heads over 8 KV heads of 128) the model made on `truth`, its
// header's last shape column `length` (isl for prompts, kvlen for decode), read back.
KernelTable attention_table(const GpuSpec& truth, KernelTableKind kind, const std::string& length,
                            std::initializer_list<double> batches, std::initializer_list<double> lengths) {
  ComputeModel cm;
  cm.sustained_clock = 1.0;
  std::string csv = "batch,heads,kv_heads,head_dim," + length + ",dtype,latency_ms\n";
  for (double b : batches)
    for (double x : lengths)
      csv += std::to_string(b) + ",64,8,128," + std::to_string(x) + ",bf16," +
             std::to_string(kernel_row_time(truth, cm, kind, Dtype::BF16, {b, 64, 8, 128, x}) * 1e3) + "\n";
  return parse_kernel_table(csv, length + ".csv");
}

}  // namespace

TEST_CASE("calibrate kernels: a table the model made at known fractions is recovered") {
  GpuSpec truth = gpu_preset("H100-SXM-80GB");
  truth.kernels[static_cast<std::size_t>(KernelCurveId::GemmBf16)] = {0.6, 0.7};
  truth.kernels[static_cast<std::size_t>(KernelCurveId::GemmFp8)] = {0.45, 0.9};
  const KernelTable t = parse_kernel_table(csv_from(truth, Dtype::BF16, "float16") + csv_from(truth, Dtype::FP8, "fp8").substr(36), "t.csv");
  CHECK(t.rows.size() == 36);
  GpuSpec g = gpu_preset("H100-SXM-80GB");
  const std::vector<KernelCurveFit> fits = fit_kernel_curves(t, g);
  REQUIRE(fits.size() == 2);
  CHECK(fits[0].curve == KernelCurveId::GemmBf16);
  CHECK(std::fabs(fits[0].max_eff / 0.6 - 1) < 0.005);
  CHECK(std::fabs(fits[0].hbm_eff / 0.7 - 1) < 0.005);
  CHECK(std::fabs(fits[1].max_eff / 0.45 - 1) < 0.005);
  CHECK(fits[0].rms_log_after < 0.005);
  CHECK(fits[0].rms_log_before > 0.05);
  CHECK(std::fabs(g.kernels[static_cast<std::size_t>(KernelCurveId::GemmFp8)].hbm_eff / 0.9 - 1) < 0.01);
  // FP4 rows on a GPU without FP4 tensor cores have no curve to fit.
  GpuSpec h = gpu_preset("H100-SXM-80GB");
  CHECK_THROWS_AS(fit_kernel_curves(parse_kernel_table("m,n,k,dtype,latency_ms\n16,4096,4096,nvfp4,0.02\n", "f.csv"), h), InputError);
}

TEST_CASE("calibrate kernels: each Blackwell preset carries the joint fit of its own embedded GEMM tables") {
  // The B200, GB200, B300 and GB300 presets' gemm_bf16 / gemm_fp8 / gemm_fp4 fractions, max_eff
  // and hbm_eff both, were fitted to these tables (the calibration rows of docs/validation.md);
  // refitting them from a spec without them must land there, and no closer fit may exist.
  const json doc = parse_json(std::string(*embedded_file("topologies/data/kernel_tables.json")), "kernel_tables.json");
  for (const char* gpu : {"B200", "GB200", "B300", "GB300"}) {
    CAPTURE(gpu);
    std::string csv = "m,n,k,dtype,latency\n";
    for (const auto& table : doc.at("tables")) {
      if (table.at("gpu") != gpu || table.at("kind") != "gemm") continue;
      for (const auto& r : table.at("rows"))
        csv += std::to_string(r[0].get<double>()) + "," + std::to_string(r[1].get<double>()) + "," + std::to_string(r[2].get<double>()) +
               "," + table.at("dtype").get<std::string>() + "," + std::to_string(r[3].get<double>()) + "\n";
    }
    const KernelTable t = parse_kernel_table(csv, std::string(gpu) + ".csv");
    const GpuSpec preset = gpu_preset(gpu);
    GpuSpec g = preset;
    g.kernels = {};
    const std::vector<KernelCurveFit> fits = fit_kernel_curves(t, g);
    REQUIRE(fits.size() == 3);
    for (const auto& f : fits) {
      const KernelTuning& set = preset.kernels[static_cast<std::size_t>(f.curve)];
      REQUIRE(set.max_eff > 0);  // both fractions are the preset's own, none borrowed from H100's curves
      REQUIRE(set.hbm_eff > 0);
      double preset_rms = 0;
      int n = 0;
      for (const auto& r : t.rows)
        if (r.dtype == (f.curve == KernelCurveId::GemmFp4 ? Dtype::FP4 : f.curve == KernelCurveId::GemmFp8 ? Dtype::FP8 : Dtype::BF16)) {
          preset_rms += std::pow(std::log(gemm_model_time(preset, r.dtype, r.shape[0], r.shape[1], r.shape[2]) / r.seconds), 2);
          ++n;
        }
      preset_rms = std::sqrt(preset_rms / n);
      MESSAGE(std::string(gpu) << " " << std::string(kernel_curve_name(f.curve)) << ": max_eff " << f.max_eff << " (preset " << set.max_eff << "), hbm_eff "
                  << f.hbm_eff << " (preset " << set.hbm_eff << "), RMS log " << f.rms_log_after << " (preset " << preset_rms << ")");
      CHECK(std::fabs(f.max_eff / set.max_eff - 1) < 0.015);
      CHECK(std::fabs(f.hbm_eff / set.hbm_eff - 1) < 0.01);
      CHECK(f.rms_log_after <= preset_rms + 1e-9);  // the preset is the fit: nothing closer was left out
      CHECK(preset_rms <= f.rms_log_after * 1.01);
    }
  }
}

TEST_CASE("calibrate kernels: attention tables fit their curves, from the model's own rows and from the embedded B200 tables") {
  // Tables the model made at known fractions are recovered: prompt attention (max_eff binds) and
  // grouped-query decode (its own header, kvlen, not isl; hbm_eff binds).
  struct Case {
    const char* gpu;
    KernelTableKind kind;
    const char* length;
    std::initializer_list<double> batches, lengths;
    KernelCurveId curve;
    bool by_bandwidth;
  };
  for (const Case& c : {Case{"H100-SXM-80GB", KernelTableKind::ContextAttention, "isl", {1, 4, 16}, {512, 2048, 8192},
                             KernelCurveId::AttnPrefill, false},
                        Case{"B300", KernelTableKind::GenerationAttention, "kvlen", {8, 64, 256}, {2048, 8192, 32768},
                             KernelCurveId::AttnDecode, true}}) {
    CAPTURE(c.length);
    GpuSpec truth = gpu_preset(c.gpu);
    truth.kernels[static_cast<std::size_t>(c.curve)] = {0.5, 0.55};
    const KernelTable t = attention_table(truth, c.kind, c.length, c.batches, c.lengths);
    CHECK(t.kind == c.kind);
    GpuSpec g = gpu_preset(c.gpu);
    const auto fits = fit_kernel_curves(t, g);
    REQUIRE(fits.size() == 1);
    CHECK(fits[0].curve == c.curve);
    CHECK(std::fabs((c.by_bandwidth ? fits[0].hbm_eff / 0.55 : fits[0].max_eff / 0.5) - 1) < 0.02);
    CHECK(fits[0].rms_log_after < 0.01);
  }
  ComputeModel cm;
  cm.sustained_clock = 1.0;

  // The B200 preset's attention fractions were fitted to the embedded tables' calibration rows:
  // read in AIConfigurator's layouts, they land on the preset's fractions again.
  const json doc = parse_json(std::string(*embedded_file("topologies/data/kernel_tables.json")), "kernel_tables.json");
  for (const char* kind : {"context_attention", "generation_mla"}) {
    const bool ctx = std::string(kind) == "context_attention";
    std::string text = ctx ? "batch,heads,kv_heads,head_dim,isl,dtype,latency\n" : "batch,heads,kvlen,dtype,latency\n";
    for (const auto& table : doc.at("tables")) {
      if (table.at("gpu") != "B200" || table.at("kind") != kind || table.at("role") != "calibration") continue;
      for (const auto& r : table.at("rows")) {
        for (std::size_t i = 0; i + 1 < r.size(); ++i) text += std::to_string(r[i].get<double>()) + ",";
        text += table.at("dtype").get<std::string>() + "," + std::to_string(r.back().get<double>()) + "\n";
      }
    }
    const KernelTable kt = parse_kernel_table(text, "b200.csv");
    const GpuSpec preset = gpu_preset("B200");
    GpuSpec b = preset;
    b.kernels = {};
    for (const auto& f : fit_kernel_curves(kt, b)) {
      const KernelTuning& set = preset.kernels[static_cast<std::size_t>(f.curve)];
      // The preset's own error on these rows: the fit must be at least as close, and land on the
      // fraction the rows decide (the one that binds: max_eff for compute-bound prompt attention,
      // hbm_eff for memory-bound decode; the other is free and may drift to a bound).
      double preset_rms = 0;
      int n = 0;
      for (const auto& r : kt.rows)
        if (kernel_table_curve(kt.kind, r.dtype) == f.curve) {
          preset_rms += std::pow(std::log(kernel_row_time(preset, cm, kt.kind, r.dtype, r.shape) / r.seconds), 2);
          ++n;
        }
      preset_rms = std::sqrt(preset_rms / n);
      MESSAGE(std::string(kernel_curve_name(f.curve)) << ": max_eff " << f.max_eff << " (preset " << set.max_eff << "), hbm_eff "
                                                      << f.hbm_eff << " (preset " << set.hbm_eff << "), RMS log " << f.rms_log_after
                                                      << " (preset " << preset_rms << ")");
      CHECK(f.rms_log_after <= preset_rms + 1e-6);
      const bool max_lands = set.max_eff > 0 && std::fabs(f.max_eff / set.max_eff - 1) < 0.03;
      const bool hbm_lands = set.hbm_eff > 0 && std::fabs(f.hbm_eff / set.hbm_eff - 1) < 0.03;
      CHECK((max_lands || hbm_lands));
    }
  }
  // FP4 attention has no curve.
  CHECK_THROWS_AS(parse_kernel_table("batch,heads,kvlen,dtype,latency\n1,128,4096,nvfp4,0.05\n", "m.csv"), InputError);
}

TEST_CASE("calibrate kernels: the H100 GEMM points of validate's calibration rows give back the built-in H100 curves") {
  // AIConfigurator's H100 gemm_perf points the built-in gemm_bf16 / gemm_fp8 curves were fitted on
  // (six of the 2,500 shapes, the ones validate holds), read as a user's table.
  const KernelTable t = parse_kernel_table("m,n,k,dtype,latency\n1,8192,8192,bf16,0.0492\n1024,8192,8192,bf16,0.1907\n"
                                           "4096,5120,8192,bf16,0.4354\n1,8192,8192,fp8,0.0374\n128,8192,8192,fp8,0.0425\n"
                                           "4096,5120,8192,fp8,0.3192\n",
                                           "h100.csv");
  GpuSpec g = gpu_preset("H100-SXM-80GB");
  const ComputeModel built_in;
  for (const auto& f : fit_kernel_curves(t, g)) {
    const KernelCurve& c = built_in.curve(f.curve);
    MESSAGE(std::string(kernel_curve_name(f.curve)) << ": max_eff " << f.max_eff << " (built in " << c.max_eff << "), hbm_eff " << f.hbm_eff
                                       << " (built in " << c.hbm_eff << "), RMS log " << f.rms_log_before << " -> " << f.rms_log_after);
    CHECK(std::fabs(f.max_eff / c.max_eff - 1) < 0.02);
    CHECK(std::fabs(f.hbm_eff / c.hbm_eff - 1) < 0.05);
  }
}

TEST_CASE("calibrate kernels: MoE tables fit the grouped-GEMM curve, which without one follows the GEMM curve") {
  // Unset, a GPU's grouped GEMMs run on its GEMM curve, tuning included (no figure moves).
  GpuSpec b200 = gpu_preset("B200");
  ComputeModel cm;
  cm.sustained_clock = 1.0;
  const double flops = 2.0 * 512 * 4096 * 7168, bytes = 3e8;
  CHECK(compute_time(b200, ComputeKind::GroupedGemm, 64, flops, bytes, Dtype::FP8, cm) ==
        doctest::Approx(compute_time(b200, ComputeKind::Gemm, 64, flops, bytes, Dtype::FP8, cm)));
  // A table the model made at known grouped-GEMM fractions, in AIConfigurator's moe_perf layout
  // (with power-law and mixed-precision rows it skips), is recovered, and leaves the GEMM curve alone.
  GpuSpec truth = gpu_preset("H100-SXM-80GB");
  truth.kernels[static_cast<std::size_t>(KernelCurveId::MoeFp8)] = {0.45, 0.55};
  std::string csv = "framework,version,device,op_name,kernel_source,moe_dtype,num_tokens,hidden_size,inter_size,topk,num_experts,"
                    "moe_tp_size,moe_ep_size,distribution,latency\n";
  for (double tokens : {1.0, 16.0, 128.0, 1024.0, 8192.0})
    for (double ep : {1.0, 8.0}) {
      const double ms = kernel_row_time(truth, cm, KernelTableKind::Moe, Dtype::FP8, {tokens, 7168, 2048, 8, 256, 1, ep}) * 1e3;
      csv += "TRTLLM,1.0,H100,moe,x,fp8_block," + std::to_string(tokens) + ",7168,2048,8,256,1," + std::to_string(ep) + ",uniform," +
             std::to_string(ms) + "\n";
      csv += "TRTLLM,1.0,H100,moe,x,fp8_block," + std::to_string(tokens) + ",7168,2048,8,256,1," + std::to_string(ep) + ",power_law_1.2," +
             std::to_string(3 * ms) + "\n";
    }
  csv += "TRTLLM,1.0,H100,moe,x,w4a8_mxfp4_mxfp8,16,7168,2048,8,256,1,8,uniform,0.1\n";
  const KernelTable t = parse_kernel_table(csv, "moe_perf.txt");
  CHECK(t.kind == KernelTableKind::Moe);
  CHECK(t.rows.size() == 10);
  CHECK(t.skipped == 11);
  GpuSpec g = gpu_preset("H100-SXM-80GB");
  const auto fits = fit_kernel_curves(t, g);
  REQUIRE(fits.size() == 1);
  CHECK(fits[0].curve == KernelCurveId::MoeFp8);
  CHECK(std::string(kernel_curve_name(fits[0].curve)) == "moe_fp8");
  CHECK(fits[0].rms_log_after < 0.01);
  CHECK(fits[0].rms_log_before > 0.05);
  CHECK(g.kernels[static_cast<std::size_t>(KernelCurveId::GemmFp8)] == gpu_preset("H100-SXM-80GB").kernels[static_cast<std::size_t>(KernelCurveId::GemmFp8)]);
  // NVFP4 grouped GEMMs have their curve (moe_fp4), unlike FP4 attention.
  CHECK(parse_kernel_table("moe_dtype,num_tokens,hidden_size,inter_size,topk,num_experts,latency\nnvfp4,16,7168,2048,8,256,0.1\n", "f.txt")
            .rows.size() == 1);
  // Only skipped rows: refused.
  CHECK_THROWS_AS(parse_kernel_table("moe_dtype,num_tokens,hidden_size,inter_size,topk,num_experts,distribution,latency\n"
                                     "fp8,16,7168,2048,8,256,power_law,0.1\n",
                                     "p.txt"),
                  InputError);
}

TEST_CASE("calibrate kernels: tables that cannot be read are refused naming the column or line") {
  auto where = [](const std::string& text) -> std::string {
    try {
      parse_kernel_table(text, "g.csv");
    } catch (const InputError& e) {
      return e.field() + ": " + e.reason();
    }
    return "";
  };
  CHECK(where("m,n,dtype,latency\n").rfind("k: missing column", 0) == 0);
  CHECK(where("m,n,k,dtype\n").rfind("latency: missing column", 0) == 0);
  CHECK(where("m,n,k,latency\n").rfind("dtype: missing column", 0) == 0);
  CHECK(where("m,n,k,dtype,latency\n1,2,3,int8,0.1\n").rfind("line 2: unknown dtype", 0) == 0);
  CHECK(where("m,n,k,dtype,latency\n1,2,-3,bf16,0.1\n").rfind("line 2: k: value -3 out of range", 0) == 0);
  CHECK(where("m,n,k,dtype,latency\n1,2,x,bf16,0.1\n").rfind("line 2: k: expected a number", 0) == 0);
  CHECK(where("m,n,k,dtype,latency\n1,2\n").rfind("line 2: fewer cells", 0) == 0);
  CHECK(where("m,n,k,dtype,latency\n").rfind(": no rows", 0) == 0);
}

TEST_CASE("shardsim calibrate --kernels: writes a cluster file whose GPU carries the fitted fractions") {
  const std::string base = "/tmp/shardsim_kernels_" + std::to_string(::getpid());
  GpuSpec truth = gpu_preset("H100-SXM-80GB");
  truth.kernels[static_cast<std::size_t>(KernelCurveId::GemmBf16)] = {0.7, 0.75};
  {
    std::ofstream f(base + ".csv");
    f << csv_from(truth, Dtype::BF16, "bf16");
  }
  auto r = test::run_cli("calibrate --kernels " + base + ".csv --cluster dgx-h100:1 --out " + base + ".json");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("gemm_bf16: 18 rows; max_eff 0.820 → 0.70") != std::string::npos);
  const Cluster c = load_cluster(base + ".json");
  CHECK(c.gpu().kernels[static_cast<std::size_t>(KernelCurveId::GemmBf16)].max_eff == doctest::Approx(0.7).epsilon(0.01));
  CHECK(c.num_gpus() == 8);
  std::remove((base + ".csv").c_str());
  std::remove((base + ".json").c_str());
}
