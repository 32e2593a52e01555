// sim/step/collective_calibration.hpp — a cluster's collective constants fitted to the user's own nccl-tests runs.
//
// Owns: parse_nccl_tests() and fit_collective_efficiency(). nccl-tests (all_reduce_perf,
// all_gather_perf, reduce_scatter_perf, alltoall_perf) print one row per message size — size,
// count, type, redop, root, then time / algbw / busbw / #wrong out of place and in place — after
// comment lines that name the ranks ("#  Rank  0 Group  0 Pid … on host1 device 0 …") and, in
// recent versions, the test ("# Collective test starting: all_reduce_perf"). The run is laid on the
// cluster as it ran: its ranks on the first GPUs of as many nodes as it had hosts, the same number
// on each. The fit: the achieved fraction of link bandwidth the collective model prices rings at
// (CollectiveEfficiency: `nvlink` from runs inside one host, `network` from runs across hosts),
// chosen to minimise the RMS of log(model / measured) over the bandwidth-bound sizes (≥ 1 MiB per
// rank buffer by default; the latency regime is NCCL's own tuning table, not a per-cluster
// constant), by golden-section search in [0.2, 1]. `shardsim calibrate --nccl-tests` writes the
// cluster file with the fitted values, their sources and residuals (docs/communication.md).
// Units: bytes, seconds. Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/step/step_program.hpp"

namespace shardsim {

class Cluster;

struct NcclTestsRun {
  std::string source;
  CollKind kind = CollKind::AllReduce;
  bool kind_known = false;   // from the "Collective test starting" line
  int ranks = 0, hosts = 0;  // from the "# Rank" lines (hosts: distinct host names)
  struct Point {
    double bytes = 0, seconds = 0;  // size column; out-of-place time
  };
  std::vector<Point> points;
};

// Throws InputError(source, "line N", reason) for a row it cannot read, or when no rank or row is found.
NcclTestsRun parse_nccl_tests(const std::string& text, const std::string& source);

// Which GPUs of `cluster` the run used (see the header comment); throws InputError when it does not fit.
std::vector<int> nccl_tests_gpus(const NcclTestsRun& run, const Cluster& cluster);

struct EfficiencyFit {
  bool network = false;      // the constant fitted: CollectiveEfficiency::network (else nvlink)
  double before = 0, after = 0;
  double rms_log_before = 0, rms_log_after = 0;  // RMS of log(model / measured) over the points used
  int points = 0;
  struct Row {
    std::string source;
    double bytes = 0, measured = 0, model_before = 0, model_after = 0;
  };
  std::vector<Row> rows;     // every point used, for the report
};

// Fits the efficiency the runs exercise: all must be single-host (nvlink) or all multi-host
// (network; the cluster's nvlink value kept). `min_bytes`: the smallest size used.
// Throws InputError("--nccl-tests", …) when the runs mix the two or leave no point.
EfficiencyFit fit_collective_efficiency(const std::vector<NcclTestsRun>& runs, const std::string& cluster_spec,
                                        double min_bytes = 1 << 20);

}  // namespace shardsim
