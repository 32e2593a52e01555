// tools/cli/cmd_calibrate.cpp — `shardsim calibrate`: a cluster's collective efficiency fitted to the user's
// nccl-tests output, written as a cluster file that every command takes (--cluster FILE).
//
// The fit and the format: sim/step/collective_calibration.hpp, docs/communication.md. Bad input
// (an unreadable row, runs that do not fit the cluster) exits 2 before anything is written.
#include <cstdio>
#include <iostream>
#include <memory>

#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "common/output_file.hpp"
#include "sim/step/collective_calibration.hpp"
#include "tools/cli/commands.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"

namespace shardsim::cli {

namespace {

struct CalibrateOptions {
  std::vector<std::string> nccl_tests;
  std::string cluster = "dgx-h100:1", out;
  double min_bytes = 1 << 20;
};

void run_calibrate(const CalibrateOptions& o) {
  if (o.nccl_tests.empty()) throw InputError("--nccl-tests", "", "give at least one nccl-tests output file");
  if (!(o.min_bytes > 0)) throw InputError("--min-bytes", "", "must be > 0");
  if (!o.out.empty()) check_output_path(o.out);
  std::vector<NcclTestsRun> runs;
  for (const auto& f : o.nccl_tests) {
    runs.push_back(parse_nccl_tests(read_text_file(f), f));
    if (!runs.back().kind_known)
      throw InputError(f, "", "no \"# Collective test starting: <name>_perf\" line: rename the file or add that line to say which collective it is");
  }
  const EfficiencyFit fit = fit_collective_efficiency(runs, o.cluster, o.min_bytes);
  const char* key = fit.network ? "network" : "nvlink";
  std::printf("collective efficiency (%s) fitted to %d points of %zu nccl-tests run(s), sizes ≥ %.0f bytes\n", key, fit.points,
              runs.size(), o.min_bytes);
  std::printf("%-40s %14s %12s %12s %8s %12s %8s\n", "run", "bytes", "measured µs", "before µs", "error", "after µs", "error");
  for (const auto& r : fit.rows)
    std::printf("%-40s %14.0f %12.1f %12.1f %+7.1f%% %12.1f %+7.1f%%\n", r.source.c_str(), r.bytes, r.measured * 1e6, r.model_before * 1e6,
                100 * (r.model_before / r.measured - 1), r.model_after * 1e6, 100 * (r.model_after / r.measured - 1));
  std::printf("\n%s: %.4f → %.4f; RMS of log(model / measured) %.3f → %.3f (a calibration: these points set it)\n", key, fit.before,
              fit.after, fit.rms_log_before, fit.rms_log_after);
  if (o.out.empty()) return;
  const Cluster base = load_cluster(o.cluster);
  json j = cluster_to_json(base);
  j["collective_efficiency"][key] = fit.after;
  std::string sources;
  for (const auto& f : o.nccl_tests) sources += (sources.empty() ? "" : ", ") + f;
  char note[512];
  std::snprintf(note, sizeof note, "collective_efficiency.%s %.4f fitted by `shardsim calibrate` to %d nccl-tests points (%s), RMS log error %.3f (was %.4f: %.3f)",
                key, fit.after, fit.points, sources.c_str(), fit.rms_log_after, fit.before, fit.rms_log_before);
  j["comment"] = note;
  write_file_atomically(o.out, json_text(j, 2) + "\n");
  std::printf("wrote %s: use it as --cluster %s\n", o.out.c_str(), o.out.c_str());
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Fit a cluster's collective efficiency to your own nccl-tests output (all_reduce_perf, all_gather_perf,\n"
      "reduce_scatter_perf): runs inside one host fit the NVLink efficiency, runs across hosts the network's. Prints\n"
      "every point before and after; --out writes the cluster file with the fitted value, which any command takes.\n\n"
      "Examples:\n"
      "  shardsim calibrate --nccl-tests ag8.txt --nccl-tests rs8.txt --cluster dgx-h100:1 --out my-node.json\n"
      "  shardsim calibrate --nccl-tests ar32.txt --cluster dgx-h100:4 --out my-cluster.json");
  cmd->add_option("--nccl-tests", o->nccl_tests, "an nccl-tests output file (repeat for several)")->required();
  cmd->add_option("--cluster,-c", o->cluster, "the cluster they ran on (shorthand or JSON)")->capture_default_str();
  cmd->add_option("--out", o->out, "write the calibrated cluster file here");
  cmd->add_option("--min-bytes", o->min_bytes, "smallest size used (the bandwidth-bound regime)")->capture_default_str();
  cmd->callback([o] { run_calibrate(*o); });
}

}  // namespace shardsim::cli
