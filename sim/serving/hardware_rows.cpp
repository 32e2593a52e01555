// sim/serving/hardware_rows.cpp — a user's measurements as validation rows (see hardware_rows.hpp).
#include "sim/serving/hardware_rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <system_error>

#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "common/readable_number.hpp"
#include "sim/serving/power_calibration.hpp"
#include "sim/step/collective_calibration.hpp"
#include "sim/step/collective_cost.hpp"
#include "sim/step/compute_cost.hpp"
#include "sim/step/kernel_calibration.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

namespace {

constexpr double kCalibrationTarget = 0.05, kCollectiveTarget = 0.25, kKernelTarget = 0.25, kPowerTarget = 0.15;

// One path as the records compare it: canonical when the file exists, else as given.
std::string same_file(const std::string& path) {
  std::error_code ec;
  const auto p = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : p.string();
}

// The record of `kind` that lists `file` and whose constant starts with `prefix`, or null.
const CalibrationRecord* record_of(const Cluster& c, const std::string& kind, const std::string& file, const std::string& prefix = "") {
  const std::string f = same_file(file);
  for (const CalibrationRecord& r : c.calibration())
    if (r.kind == kind && r.constant.rfind(prefix, 0) == 0)
      for (const std::string& s : r.sources)
        if (same_file(calibration_source_path(c, s)) == f) return &r;
  return nullptr;
}

// The files of one kind: the records' own (readable ones) then the extra ones, each once.
std::vector<std::string> files_of(const Cluster& c, const std::string& kind, const std::vector<std::string>& extra,
                                  std::vector<std::string>& notes) {
  std::vector<std::string> out, seen;
  auto add = [&](const std::string& f) {
    const std::string key = same_file(f);
    for (const auto& s : seen)
      if (s == key) return;
    seen.push_back(key);
    out.push_back(f);
  };
  for (const CalibrationRecord& r : c.calibration())
    if (r.kind == kind)
      for (const std::string& source : r.sources) {
        const std::string s = calibration_source_path(c, source);
        std::error_code ec;
        if (std::filesystem::is_regular_file(s, ec)) add(s);
        else {
          const std::string note = s + " (it set " + r.constant + "): not found here, its rows are left out";
          if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
        }
      }
  for (const std::string& f : extra) add(f);
  return out;
}

void role(ValidationRow& row, const CalibrationRecord* rec, double check_target) {
  row.role = rec ? RowRole::Calibration : RowRole::Check;
  row.tolerance = rec ? kCalibrationTarget : check_target;
  if (rec) row.sets = rec->constant;
}

void nccl_rows(const Cluster& c, const std::vector<std::string>& files, std::vector<ValidationRow>& rows) {
  for (const std::string& f : files) {
    const NcclTestsRun run = parse_nccl_tests(read_text_file(f), f);
    if (!run.kind_known)
      throw InputError(f, "", "no \"# Collective test starting: <name>_perf\" line: add it to say which collective this is");
    const std::vector<int> gpus = nccl_tests_gpus(run, c);
    const CalibrationRecord* rec = record_of(c, "nccl-tests", f);
    for (const auto& p : run.points) {
      ValidationRow row;
      row.name = f + ": " + to_string(run.kind) + " on " + std::to_string(run.ranks) + " GPUs (" + std::to_string(run.hosts) +
                 (run.hosts == 1 ? " host), " : " hosts), ") + binary_bytes(p.bytes);
      row.group = "collectives";
      row.unit = "µs";
      row.published = p.seconds * 1e6;
      row.simulated = collective_time(c, run.kind, gpus, p.bytes).seconds * 1e6;
      role(row, rec && p.bytes >= rec->min_bytes ? rec : nullptr, kCollectiveTarget);
      row.source = f;
      row.setup = "the run's " + std::to_string(run.ranks) + " ranks on the first GPUs of " + std::to_string(run.hosts) + " node(s) of " +
                  c.name() + "; out-of-place time";
      rows.push_back(std::move(row));
    }
  }
}

void kernel_rows(const Cluster& c, const std::vector<std::string>& files, std::vector<ValidationRow>& rows) {
  ComputeModel cm;
  cm.sustained_clock = 1.0;  // microbenchmarks at the clock they ran at (as validate's kernel rows)
  const GpuSpec& gpu = c.gpu();
  for (const std::string& f : files) {
    const KernelTable table = parse_kernel_table(read_text_file(f), f);
    struct Mean {
      double log_measured = 0, log_model = 0;
      int n = 0;
    };
    std::map<int, Mean> by_curve;  // KernelCurveId → the rows' log sums
    for (const auto& r : table.rows) {
      Mean& m = by_curve[static_cast<int>(kernel_table_curve(table.kind, r.dtype))];
      m.log_measured += std::log(r.seconds);
      m.log_model += std::log(kernel_row_time(gpu, cm, table.kind, r.dtype, r.shape));
      ++m.n;
    }
    for (const auto& [curve, m] : by_curve) {
      const char* name = kernel_curve_name(static_cast<KernelCurveId>(curve));
      ValidationRow row;
      row.name = f + ": " + gpu.name + " " + name + ", " + std::to_string(m.n) + " shapes (geometric mean)";
      row.group = "kernels";
      row.unit = "µs";
      row.published = std::exp(m.log_measured / m.n) * 1e6;
      row.simulated = std::exp(m.log_model / m.n) * 1e6;
      role(row, record_of(c, "kernels", f, std::string("gpu.kernels.") + name), kKernelTarget);
      row.source = f;
      row.setup = std::string(kernel_table_kind_name(table.kind)) + " table priced on " + gpu.name + " at the microbenchmark clock";
      rows.push_back(std::move(row));
    }
  }
}

void power_rows(const Cluster& c, const std::vector<std::string>& files, std::vector<ValidationRow>& rows) {
  const GpuSpec& gpu = c.gpu();
  for (const std::string& f : files) {
    const CalibrationRecord* rec = record_of(c, "power", f);
    for (const PowerRun& run : parse_power_table(read_text_file(f), f)) {
      const std::string run_gpu = load_cluster(run.cluster).gpu().name;
      if (run_gpu != gpu.name)
        throw InputError(f, "line " + std::to_string(run.line), "this run is on " + run_gpu + " GPUs; the cluster's power model is " + gpu.name + "'s");
      const PowerFit::Row m = measure_power_run(run, f);
      ValidationRow row;
      row.name = f + ": " + run.model + " " + run.plan + ", board power";
      row.group = "energy";
      row.unit = "W";
      row.published = run.watts;
      row.simulated = modelled_watts(m.window, gpu.power, run.tok_s);
      role(row, rec, kPowerTarget);
      row.source = f + " line " + std::to_string(run.line);
      row.setup = "replayed as measured on " + run.cluster + ", its steady window's work at " +
                  (run.tok_s > 0 ? "the measured output rate" : std::string("the simulated output rate"));
      rows.push_back(std::move(row));
    }
  }
}

}  // namespace

std::string calibration_source_path(const Cluster& cluster, const std::string& source) {
  const std::filesystem::path p(source);
  if (p.is_absolute()) return source;
  return (std::filesystem::path(cluster.source()).parent_path() / p).lexically_normal().string();
}

std::vector<ValidationRow> hardware_rows(const Cluster& cluster, const HardwareFiles& extra, std::vector<std::string>& notes) {
  std::vector<ValidationRow> rows;
  nccl_rows(cluster, files_of(cluster, "nccl-tests", extra.nccl_tests, notes), rows);
  kernel_rows(cluster, files_of(cluster, "kernels", extra.kernels, notes), rows);
  power_rows(cluster, files_of(cluster, "power", extra.power, notes), rows);
  return rows;
}

}  // namespace shardsim
