// sim/serving/host_cost_fit.hpp — the engine's host costs fitted to a user's measured run, on request.
//
// Owns: fit_host_costs(). The host costs a plan's engine settings carry — per iteration
// (`step_overhead_ms`), per sequence in the iteration (`seq_overhead_us`), per kernel launch
// without CUDA graphs (`launch_overhead_us`) — are the simulator's estimates of an engine, not
// settings the engine has (docs/engines.md). A run the user measured (sim/serving/measured_run.hpp)
// can set them: each key in turn is chosen from a grid over its range, then refined by golden
// section around the best point, to minimise the RMS of log(simulated / measured) over every figure
// the run holds (throughput, TTFT and TPOT median / p99 / mean); two keys take two rounds of that.
// The run then becomes a calibration row (it set the values), as `validate --run --fit` reports it.
// Each evaluation serves the whole run once (`serve`). Thread-safety: as `serve`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/serving/measured_run.hpp"
#include "sim/serving/metrics.hpp"

namespace shardsim {

// The keys fit_host_costs takes, with the range each is searched in (its own units).
struct HostCostKey {
  const char* key;
  double hi;
};
const std::vector<HostCostKey>& host_cost_keys();

struct HostCostFit {
  std::vector<std::string> keys;
  std::vector<double> before, after;   // each key's value, in its units (ms or µs)
  double rms_before = 0, rms_after = 0;  // RMS of log(simulated / measured) over the run's figures
  int serves = 0;                      // simulated runs spent
  Plan plan;                           // the plan with the fitted values
};

// `serve` returns the run's metrics for a plan. InputError("--fit", key, …) for an unknown key, a
// key given twice, or a run without figures.
HostCostFit fit_host_costs(const MeasuredRun& run, const Plan& plan, const std::vector<std::string>& keys,
                           const std::function<Metrics(const Plan&)>& serve);

}  // namespace shardsim
