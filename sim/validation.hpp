// sim/validation.hpp — simulated vs published figures (the table of docs/validation.md).
//
// Owns: the validation cases and their sources (DESIGN.md §6, REFERENCE.md §V): 8×H100 NCCL
// collectives at 256 MiB, all-reduce bus bandwidth at 1 GiB (NVLS), a 32-GPU inter-node
// all-reduce, and MLPerf Inference v4.1 Llama-2-70B Offline on one DGX-H100. Collective rows run
// a one-operation step program through the given executor, so every executor is validated by the
// same code; the MLPerf row runs the whole serving loop.
// Thread-safety: run_validation is pure given a thread-safe executor factory.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/executor.hpp"

namespace shardsim {

class Cluster;

struct ValidationRow {
  std::string name;
  std::string unit;         // "µs", "GB/s", "tok/s"
  double published = 0;
  double simulated = 0;
  double tolerance = 0;     // relative, e.g. 0.15
  std::string source;
  std::string note;         // e.g. "calibrated against this row"
  double error() const { return published != 0 ? (simulated - published) / published : 0; }
  bool within() const { return std::abs(error()) <= tolerance; }
};

// Makes an executor for a cluster (the analytic one, or a SimGrid one).
using ExecutorFactory = std::function<std::unique_ptr<StepExecutor>(const Cluster&)>;

std::vector<ValidationRow> run_validation(const ExecutorFactory& make_executor, int mlperf_requests = 12000);

}  // namespace shardsim
