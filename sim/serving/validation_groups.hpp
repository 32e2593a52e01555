// sim/serving/validation_groups.hpp — row groups of the validation table kept in their own files.
//
// Owns: the declarations run_validation() (validation.cpp) calls for groups that live outside
// validation.cpp. Internal to the validation module; users call run_validation().
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "sim/serving/validation.hpp"

namespace shardsim {

// A measured table against the model, row by row: the geometric means of the measured and the
// modelled times (a table row's one figure each) and the RMS of their log ratio (its spread).
struct LogAgreement {
  double log_measured = 0, log_model = 0, sq = 0;
  int n = 0;
  void add(double measured, double modelled) {
    log_measured += std::log(measured);
    log_model += std::log(modelled);
    const double e = std::log(modelled / measured);
    sq += e * e;
    ++n;
  }
  double measured() const { return std::exp(log_measured / n); }
  double model() const { return std::exp(log_model / n); }
  double rms() const { return std::sqrt(sq / n); }
};

// Marks the row just added as an end-to-end row of `metric` run on `cluster` (ErrorSummary).
void tag(std::vector<ValidationRow>& rows, const char* metric, const Cluster& cluster);

// Serves an end-to-end row as `opt` says: its RowServer, or serve() with the factory's executor.
ServingResult serve_row(const ExecutorFactory& make, const ValidationOptions& opt, const Plan& plan, const ModelSpec& model,
                        const Cluster& cluster, const std::string& cluster_spec, const RequestTrace& trace,
                        const RoutingSource* routing, const ServingOptions& so);

// TensorRT-LLM's published DeepSeek-R1 MTP sweep on 8×B200 (validation_speculative.cpp).
void speculative_rows(const ExecutorFactory& make, const ValidationOptions& opt, std::vector<ValidationRow>& rows);

// Kernel rows from AIConfigurator's measured Blackwell (and H100) tables (validation_kernels.cpp).
void measured_kernel_rows(std::vector<ValidationRow>& rows);

// ML.ENERGY's H100 power and energy per token of Llama 3.1 8B / 70B / 405B (validation_energy.cpp).
void energy_rows(const ExecutorFactory& make, const ValidationOptions& opt, std::vector<ValidationRow>& rows);

// vLLM 0.20.1's per-iteration times of Qwen3-32B on B300 at TP 1-8, from AIConfigurator's forward-pass
// golden runs (validation_steps.cpp).
void engine_step_rows(const ExecutorFactory& make, const ValidationOptions& opt, std::vector<ValidationRow>& rows);

// NVIDIA NIM's published closed-loop concurrency sweep of Llama-3.3-70B on 2×H100 (validation_closed_loop.cpp).
void closed_loop_rows(const ExecutorFactory& make, const ValidationOptions& opt, std::vector<ValidationRow>& rows);

}  // namespace shardsim
