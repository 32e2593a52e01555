// sim/serving/hardware_rows.hpp — a user's own measurements as validation rows on their calibrated cluster.
//
// Owns: hardware_rows(). The files are what `shardsim calibrate` reads — nccl-tests output, kernel
// timing tables, measured serving runs with their power — priced on a cluster, usually the file
// calibrate wrote. A row is a calibration row when its file set one of the cluster's constants
// (the constant's CalibrationRecord lists the file; nccl-tests sizes below the record's min_bytes
// were not fitted and stay check rows), else a check row: the split `validate` makes of its own
// rows (docs/validation.md, "Your own hardware"). Targets follow validate's groups: calibration
// ±5%, collectives and kernels ±25%, power ±15%. The records' own files are included without being
// named again; files given beside them are checks.
// Units: seconds priced, rows in µs (collectives, kernels) and W (power). Thread-safety: pure.
#pragma once

#include <string>
#include <vector>

#include "sim/serving/validation.hpp"

namespace shardsim {

class Cluster;

struct HardwareFiles {
  std::vector<std::string> nccl_tests, kernels, power;  // beside the ones the cluster's records name
};

// A record's source as a path from the working directory: calibrate writes them relative to the
// cluster file's folder, so the file and its measurements can move together.
std::string calibration_source_path(const Cluster& cluster, const std::string& source);

// The rows, nccl-tests first, then kernels (one row per file and curve: the geometric means of its
// rows), then power runs. `notes` gets a line per record source that could not be read (its rows
// are left out). InputError for a malformed file, a run that does not fit the cluster, or a power
// run on another GPU type than the cluster's.
std::vector<ValidationRow> hardware_rows(const Cluster& cluster, const HardwareFiles& extra, std::vector<std::string>& notes);

}  // namespace shardsim
