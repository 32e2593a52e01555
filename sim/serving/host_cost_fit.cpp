// sim/serving/host_cost_fit.cpp — host costs fitted to a measured run (see host_cost_fit.hpp).
#include "sim/serving/host_cost_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/golden_section.hpp"
#include "common/input_error.hpp"
#include "sim/plan/engine.hpp"

namespace shardsim {

const std::vector<HostCostKey>& host_cost_keys() {
  static const std::vector<HostCostKey> keys = {{"step_overhead_ms", 200}, {"seq_overhead_us", 500}, {"launch_overhead_us", 100}};
  return keys;
}

namespace {

std::string text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

double value_of(const EngineSettings& e, const std::string& key) {
  if (key == "step_overhead_ms") return e.step_overhead * 1e3;
  if (key == "seq_overhead_us") return e.seq_overhead * 1e6;
  return e.launch_overhead * 1e6;
}

}  // namespace

HostCostFit fit_host_costs(const MeasuredRun& run, const Plan& plan, const std::vector<std::string>& keys,
                           const std::function<Metrics(const Plan&)>& serve) {
  HostCostFit fit;
  fit.plan = plan;
  std::vector<double> hi;
  for (const std::string& k : keys) {
    const auto it = std::find_if(host_cost_keys().begin(), host_cost_keys().end(), [&](const HostCostKey& h) { return k == h.key; });
    if (it == host_cost_keys().end())
      throw InputError("--fit", k, "not a host cost the fit can set (step_overhead_ms, seq_overhead_us or launch_overhead_us)");
    if (std::count(keys.begin(), keys.end(), k) > 1) throw InputError("--fit", k, "given twice");
    fit.keys.push_back(k);
    fit.before.push_back(value_of(plan.engine, k));
    hi.push_back(it->hi);
  }
  if (fit.keys.empty()) throw InputError("--fit", "", "name the host cost(s) to fit");
  // RMS of log(simulated / measured) over the run's figures, for the plan with `values`.
  auto score = [&](const std::vector<double>& values) {
    Plan p = plan;
    for (std::size_t i = 0; i < fit.keys.size(); ++i) set_engine_key(p.engine, fit.keys[i], text(values[i]), "--fit");
    ++fit.serves;
    const std::vector<ValidationRow> rows = measured_run_rows(run, serve(p), "", "", 0);
    if (rows.empty()) throw InputError(run.source, "", "no measured figure to fit to");
    double s = 0;
    for (const auto& r : rows) {
      const double ratio = r.published > 0 && r.simulated > 0 ? r.simulated / r.published : 1e-3;
      s += std::pow(std::log(ratio), 2);
    }
    return std::sqrt(s / static_cast<double>(rows.size()));
  };
  std::vector<double> x = fit.before;
  fit.rms_before = score(x);
  double best = fit.rms_before;
  const int rounds = fit.keys.size() > 1 ? 2 : 1;
  for (int round = 0; round < rounds; ++round)
    for (std::size_t i = 0; i < x.size(); ++i) {
      // A grid over [0, hi] (0, then geometric from hi / 1024), then golden section between the
      // best grid point's neighbours.
      std::vector<double> grid = {0};
      for (double v = hi[i] / 1024; v <= hi[i] * 1.0001; v *= 2) grid.push_back(v);
      std::vector<double> at(grid.size());
      for (std::size_t g = 0; g < grid.size(); ++g) {
        std::vector<double> y = x;
        y[i] = grid[g];
        at[g] = score(y);
      }
      const std::size_t b = static_cast<std::size_t>(std::min_element(at.begin(), at.end()) - at.begin());
      const double lo = grid[b == 0 ? 0 : b - 1], up = grid[std::min(b + 1, grid.size() - 1)];
      std::vector<double> y = x;
      y[i] = golden_section_min(
          [&](double v) {
            std::vector<double> z = x;
            z[i] = v;
            return score(z);
          },
          lo, up, 1e-3 * (up - lo) + 1e-9, 12);
      const double refined = score(y);
      if (refined <= at[b] && refined < best) {
        x = y;
        best = refined;
      } else if (at[b] < best) {
        x[i] = grid[b];
        best = at[b];
      }
    }
  fit.after = x;
  fit.rms_after = best;
  for (std::size_t i = 0; i < fit.keys.size(); ++i) set_engine_key(fit.plan.engine, fit.keys[i], text(x[i]), "--fit");
  return fit;
}

}  // namespace shardsim
