// tools/cli/cmd_calibrate.cpp — `shardsim calibrate`: a cluster's collective efficiency fitted to the user's
// nccl-tests output, written as a cluster file that every command takes (--cluster FILE).
//
// The fit and the format: sim/step/collective_calibration.hpp, docs/communication.md. Bad input
// (an unreadable row, runs that do not fit the cluster) exits 2 before anything is written.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "common/output_file.hpp"
#include "sim/serving/hardware_rows.hpp"
#include "sim/serving/power_calibration.hpp"
#include "sim/step/collective_calibration.hpp"
#include "sim/step/kernel_calibration.hpp"
#include "tools/cli/commands.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"

namespace shardsim::cli {

namespace {

struct CalibrateOptions {
  std::vector<std::string> nccl_tests, kernels, power;
  std::string cluster = "dgx-h100:1", out;
  double min_bytes = 1 << 20;
};

// A measurement file as a record names it: relative to the folder of the cluster file written
// (`out`), so the pair can move together (`validate --hw` resolves it the same way).
std::string as_source(const std::string& file, const std::string& out) {
  std::error_code ec;
  const auto from = std::filesystem::absolute(std::filesystem::path(out), ec).parent_path();
  const auto to = std::filesystem::absolute(file, ec);
  if (ec) return file;
  const auto rel = to.lexically_normal().lexically_relative(from.lexically_normal());
  return rel.empty() ? file : rel.string();
}
std::vector<std::string> as_sources(const std::vector<std::string>& files, const std::string& out) {
  std::vector<std::string> v;
  for (const auto& f : files) v.push_back(as_source(f, out));
  return v;
}

// The cluster's calibration records with `r` in place of any record of the same constant.
void record(std::vector<CalibrationRecord>& records, CalibrationRecord r) {
  for (auto& x : records)
    if (x.constant == r.constant) {
      x = std::move(r);
      return;
    }
  records.push_back(std::move(r));
}

// --kernels: the GPU's kernel fractions (GEMM, prompt attention, MLA decode); returns the fitted spec.
GpuSpec fit_kernels(const CalibrateOptions& o, const Cluster& base, std::string& note, std::vector<CalibrationRecord>& records) {
  if (base.mixed()) throw InputError("--cluster", o.cluster, "a mixed cluster: calibrate the kernels of one GPU type on a cluster of that type");
  GpuSpec gpu = base.gpu();
  for (const auto& f : o.kernels) {
    const KernelTable table = parse_kernel_table(read_text_file(f), f);
    if (table.skipped > 0)
      std::printf("%s: %d row(s) skipped (MoE rows of another distribution than uniform, or a mixed-precision dtype)\n", f.c_str(),
                  table.skipped);
    for (const KernelCurveFit& fit : fit_kernel_curves(table, gpu)) {
      std::printf("%s %s: %d rows; max_eff %.3f → %.3f, hbm_eff %.3f → %.3f; RMS of log(model / measured) %.3f → %.3f\n",
                  gpu.name.c_str(), kernel_curve_name(fit.curve), fit.rows, fit.max_eff_before, fit.max_eff, fit.hbm_eff_before,
                  fit.hbm_eff, fit.rms_log_before, fit.rms_log_after);
      char line[256];
      std::snprintf(line, sizeof line, "%s%s max_eff %.3f hbm_eff %.3f (%d rows of %s, RMS log %.3f)", note.empty() ? "" : "; ",
                    kernel_curve_name(fit.curve), fit.max_eff, fit.hbm_eff, fit.rows, f.c_str(), fit.rms_log_after);
      note += line;
      record(records, {std::string("gpu.kernels.") + kernel_curve_name(fit.curve), "kernels", fit.max_eff, {as_source(f, o.out)}, fit.rows, 0,
                       fit.rms_log_before, fit.rms_log_after});
    }
  }
  return gpu;
}

// --power: the GPU's power model fitted to measured serving runs (updates `gpu.power`).
void fit_power(const CalibrateOptions& o, const Cluster& base, GpuSpec& gpu, std::string& note, std::vector<CalibrationRecord>& records) {
  if (base.mixed()) throw InputError("--cluster", o.cluster, "a mixed cluster: calibrate the power of one GPU type on a cluster of that type");
  if (!gpu.power.modelled())
    throw InputError("--cluster", o.cluster, "GPU " + gpu.name + " has no power model to start from: give its spec a \"power\" "
                                             "object with tdp_w and idle_w (docs/energy.md)");
  std::vector<PowerFit::Row> rows;
  std::string sources;
  for (const auto& f : o.power) {
    for (const PowerRun& run : parse_power_table(read_text_file(f), f)) {
      const Cluster c = load_cluster(run.cluster);
      if (c.gpu().name != gpu.name)
        throw InputError(f, "line " + std::to_string(run.line),
                         "cluster " + run.cluster + " has " + c.gpu().name + " GPUs; --cluster " + o.cluster + " has " + gpu.name);
      rows.push_back(measure_power_run(run, f));
    }
    sources += (sources.empty() ? "" : ", ") + f;
  }
  const PowerFit fit = fit_gpu_power(std::move(rows), gpu);
  std::printf("%s power fitted to %zu measured runs (idle_w %.0f W kept)\n", gpu.name.c_str(), fit.rows.size(), gpu.power.idle_w);
  std::printf("%-44s %9s %9s %9s %8s %9s %8s\n", "run", "tok/s sim", "measured", "W meas.", "before", "after", "error");
  for (const auto& r : fit.rows) {
    const std::string name = r.run.model + " " + r.run.plan;
    std::printf("%-44.44s %9.0f %9s %9.1f %8.1f %9.1f %+7.1f%%\n", name.c_str(), r.window.tok_s(),
                r.run.tok_s > 0 ? std::to_string(static_cast<long>(std::lround(r.run.tok_s))).c_str() : "-", r.run.watts, r.before,
                r.after, 100 * (r.after / r.run.watts - 1));
  }
  std::printf("%-44s %9s %9s %9.1f %8s %9.1f %+7.1f%%\n", "anchor: 8192³ BF16 GEMM at the sustained clock", "", "", gpu.power.tdp_w,
              "", fit.anchor_after, 100 * (fit.anchor_after / gpu.power.tdp_w - 1));
  std::printf("\nactive_w %.1f → %.1f, tensor_w %.1f → %.1f, hbm_w %.1f → %.1f; RMS of log(model / measured watts) %.3f → %.3f "
              "over the runs (a calibration: these runs set it)\n",
              fit.before.active_w, fit.after.active_w, fit.before.tensor_w, fit.after.tensor_w, fit.before.hbm_w, fit.after.hbm_w,
              fit.rms_before, fit.rms_after);
  gpu.power = fit.after;
  char line[512];
  std::snprintf(line, sizeof line, "power active_w %.1f tensor_w %.1f hbm_w %.1f fitted to %zu runs of %s (RMS log %.3f), idle_w %.0f and tdp_w %.0f kept",
                fit.after.active_w, fit.after.tensor_w, fit.after.hbm_w, fit.rows.size(), sources.c_str(), fit.rms_after,
                gpu.power.idle_w, gpu.power.tdp_w);
  gpu.power.source = line;
  note += (note.empty() ? "" : "; ") + std::string(line);
  record(records, {"gpu.power", "power", fit.after.active_w, as_sources(o.power, o.out), static_cast<int>(fit.rows.size()), 0, fit.rms_before,
                   fit.rms_after});
}

void run_calibrate(const CalibrateOptions& o) {
  if (o.nccl_tests.empty() && o.kernels.empty() && o.power.empty())
    throw InputError("--nccl-tests", "", "give nccl-tests output (--nccl-tests), kernel timings (--kernels) or measured power (--power)");
  if (!(o.min_bytes > 0)) throw InputError("--min-bytes", "", "must be > 0");
  if (!o.out.empty()) check_output_path(o.out);
  const Cluster base = load_cluster(o.cluster);
  std::string kernel_note;
  std::vector<CalibrationRecord> records = base.calibration();  // kept, their sources re-based on the file written
  for (CalibrationRecord& r : records)
    for (std::string& s : r.sources) s = as_source(calibration_source_path(base, s), o.out);
  GpuSpec gpu = o.kernels.empty() ? base.gpu() : fit_kernels(o, base, kernel_note, records);
  if (!o.power.empty()) fit_power(o, base, gpu, kernel_note, records);
  // --nccl-tests: the collective efficiency the runs exercise; its note heads the file's comment.
  std::string comment = "GPU fitted by `shardsim calibrate`: " + kernel_note;
  const char* key = nullptr;
  double efficiency = 0;
  if (!o.nccl_tests.empty()) {
    std::vector<NcclTestsRun> runs;
    for (const auto& f : o.nccl_tests) {
      runs.push_back(parse_nccl_tests(read_text_file(f), f));
      if (!runs.back().kind_known)
        throw InputError(f, "", "no \"# Collective test starting: <name>_perf\" line: rename the file or add that line to say which collective it is");
    }
    const EfficiencyFit fit = fit_collective_efficiency(runs, o.cluster, o.min_bytes);
    key = fit.network ? "network" : "nvlink";
    efficiency = fit.after;
    std::printf("collective efficiency (%s) fitted to %d points of %zu nccl-tests run(s), sizes ≥ %.0f bytes\n", key, fit.points,
                runs.size(), o.min_bytes);
    std::printf("%-40s %14s %12s %12s %8s %12s %8s\n", "run", "bytes", "measured µs", "before µs", "error", "after µs", "error");
    for (const auto& r : fit.rows)
      std::printf("%-40s %14.0f %12.1f %12.1f %+7.1f%% %12.1f %+7.1f%%\n", r.source.c_str(), r.bytes, r.measured * 1e6, r.model_before * 1e6,
                  100 * (r.model_before / r.measured - 1), r.model_after * 1e6, 100 * (r.model_after / r.measured - 1));
    std::printf("\n%s: %.4f → %.4f; RMS of log(model / measured) %.3f → %.3f (a calibration: these points set it)\n", key, fit.before,
                fit.after, fit.rms_log_before, fit.rms_log_after);
    record(records, {std::string("collective_efficiency.") + key, "nccl-tests", fit.after, as_sources(o.nccl_tests, o.out), fit.points,
                     o.min_bytes, fit.rms_log_before, fit.rms_log_after});
    std::string sources;
    for (const auto& f : o.nccl_tests) sources += (sources.empty() ? "" : ", ") + f;
    char note[512];
    std::snprintf(note, sizeof note, "collective_efficiency.%s %.4f fitted by `shardsim calibrate` to %d nccl-tests points (%s), RMS log error %.3f (was %.4f: %.3f)",
                  key, fit.after, fit.points, sources.c_str(), fit.rms_log_after, fit.before, fit.rms_log_before);
    comment = kernel_note.empty() ? std::string(note) : std::string(note) + "; GPU: " + kernel_note;
  }
  if (o.out.empty()) return;
  Cluster calibrated = base;
  calibrated.set_calibration(records);
  json j = cluster_to_json(calibrated);
  if (key != nullptr) j["collective_efficiency"][key] = efficiency;
  if (!o.kernels.empty() || !o.power.empty()) j["gpu"] = gpu_spec_to_json(gpu);
  j["comment"] = comment;
  write_file_atomically(o.out, json_text(j, 2) + "\n");
  std::printf("wrote %s: use it as --cluster %s\n", o.out.c_str(), o.out.c_str());
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Fit a cluster's collective efficiency to your own nccl-tests output (all_reduce_perf, all_gather_perf,\n"
      "reduce_scatter_perf): runs inside one host fit the NVLink efficiency, runs across hosts the network's; and its\n"
      "GPU's kernel fractions to your GEMM and attention timings (--kernels). Prints every fit before and after; --out writes the\n"
      "cluster file with the fitted values, which any command takes.\n\n"
      "Examples:\n"
      "  shardsim calibrate --nccl-tests ag8.txt --nccl-tests rs8.txt --cluster dgx-h100:1 --out my-node.json\n"
      "  shardsim calibrate --nccl-tests ar32.txt --cluster dgx-h100:4 --out my-cluster.json\n"
      "  shardsim calibrate --kernels gemm_perf.csv --cluster dgx-b200:1 --out my-b200.json\n"
      "  shardsim calibrate --power my-power-runs.csv --cluster dgx-h100:1 --out my-h100.json   # docs/energy.md");
  cmd->add_option("--nccl-tests", o->nccl_tests, "an nccl-tests output file (repeat for several)");
  cmd->add_option("--kernels", o->kernels,
                  "GEMM timings as CSV (header: m, n, k, latency in ms, dtype — AIConfigurator's gemm_perf layout reads as is): "
                  "the GPU's GEMM fractions of its peaks, fitted per math type; a table with batch, heads, kv_heads, head_dim, isl "
                  "columns fits prompt attention, one with batch, heads, kv_heads, head_dim, kvlen grouped-query decode, one with "
                  "batch, heads, kvlen MLA decode (AIConfigurator's context_attention, generation_attention — its step column as "
                  "kvlen — and generation_mla layouts; docs/validation.md), one with num_tokens, hidden_size, inter_size, topk, num_experts "
                  "MoE layers' grouped GEMMs (AIConfigurator's moe_perf layout) (repeat for several)");
  cmd->add_option("--power", o->power,
                  "measured serving runs with their board power as CSV (header: model, cluster, plan, trace, watts[, tok_s]; "
                  "docs/energy.md): the GPU's power model fitted to them, each run replayed as measured (repeat for several)");
  cmd->add_option("--cluster,-c", o->cluster, "the cluster they ran on (shorthand or JSON)")->capture_default_str();
  cmd->add_option("--out", o->out, "write the calibrated cluster file here");
  cmd->add_option("--min-bytes", o->min_bytes, "smallest size used (the bandwidth-bound regime)")->capture_default_str();
  cmd->callback([o] { run_calibrate(*o); });
}

}  // namespace shardsim::cli
