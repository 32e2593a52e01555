// sim/serving/power_calibration.hpp — a GPU's power model fitted to measured serving runs, and the
// steady window such runs are measured in.
//
// Owns: PowerRun and parse_power_table() (the CSV `shardsim calibrate --power` reads), PowerWindow
// and power_window() (what a simulated run drew in the measurement's steady window), PowerFit and
// fit_gpu_power().
//
// The measurement this follows is ML.ENERGY's (ml-energy/benchmark, docs/energy.md): every request
// sent at t = 0 to one engine whose batch limit is max_num_seqs; the steady window opens when
// max_num_seqs requests have their first token and closes when all but max_num_seqs + 1 have
// finished; the GPU energy of the window (NVML, summed over the engine's GPUs) over its seconds is
// the power, over its generated tokens the energy per token.
//
// The table (one run per line, `#` comments, a header line naming the columns in any order):
//   model,cluster,plan,trace,watts[,tok_s]
// model and cluster as every command takes them; plan a compact plan string (its max_seqs is the
// window's max_num_seqs); trace a request-trace spec served offline (all at t = 0); watts the
// measured mean board power of the window summed over the engine's GPUs; tok_s (optional) the
// measured output tokens/s of the window, printed beside the simulated one.
//
// The fit: with idle_w kept (it only matters where GPUs wait, which these runs do not),
// active_w, tensor_w and hbm_w by non-negative least squares of the relative error of each run's
// board power (every subset of the three solved, the best non-negative one kept), each run's work
// taken at its measured output rate when the table gives it (modelled_watts' at_tok_s): the
// power model is then fitted to what the GPU did per second, not to how fast the simulator
// thinks it did it — a throughput error stays a throughput error.
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sim/serving/energy.hpp"
#include "topologies/gpu_spec.hpp"

namespace shardsim {

struct ModelSpec;
struct RequestTrace;
class RoutingSource;

struct PowerRun {
  std::string model, cluster, plan, trace;
  double watts = 0, tok_s = 0;  // measured (tok_s 0 = not given)
  int line = 0;
};

// InputError(source, "line N" or the column, reason) for a malformed table.
std::vector<PowerRun> parse_power_table(const std::string& text, const std::string& source);

// What a simulated run drew in the steady window of `max_seqs` (see above): the window, the
// generated tokens in it, and the pool's work in it (ServingOptions::record_work must have been on).
struct PowerWindow {
  double from = 0, to = 0;
  double tokens = 0;
  EnergyPool pool;
  double seconds() const { return to - from; }
  double tok_s() const { return seconds() > 0 ? tokens / seconds() : 0; }
};
// False (and `why`) when the run has fewer than max_seqs + 2 completed requests or an empty window.
bool power_window(const ServingResult& r, int max_seqs, int gpus, int dp, const GpuSpec& gpu, PowerWindow& out,
                  std::string& why);

// The GPU board watts the model gives a window (its GPUs summed; GPU energy only, as NVML counts):
// pool_energy over the window, held at the limit by hold_at_limit (the window is working throughout,
// so that is tdp_w × GPUs on its mean). `at_tok_s` > 0: at
// that output rate instead of the simulated one — the window's work per token (what the model and
// batch make each token cost) done as fast as that; its active share kept.
double modelled_watts(const PowerWindow& w, const GpuPower& power, double at_tok_s = 0);

// The operating point the compute model itself implies: a large BF16 GEMM (8192³) priced at the
// sustained clock Hopper throttles to under MMA load (compute_cost.hpp) runs at the board's power
// limit — the model must ask for at least tdp_w there. Its active share (1), tensor and HBM work
// per second on `gpu`.
struct PowerAnchor {
  double active = 1, tensor = 0, hbm = 0;
};
PowerAnchor sustained_gemm_anchor(const GpuSpec& gpu);

struct PowerFit {
  struct Row {
    PowerRun run;
    PowerWindow window;
    double before = 0, after = 0;  // modelled watts with the spec's power model and the fitted one (at the measured tok/s)
  };
  GpuPower before, after;
  std::vector<Row> rows;
  PowerAnchor anchor;
  double anchor_after = 0;               // the anchor's modelled watts with the fitted model (before capping)
  double rms_before = 0, rms_after = 0;  // RMS of log(modelled / measured watts)
};

// How a run is served (validate's SimGrid column passes its tier); empty = serve() on the analytic tier.
using PowerServe = std::function<ServingResult(const Plan&, const ModelSpec&, const Cluster&, const std::string& cluster_spec,
                                               const RequestTrace&, const RoutingSource*, const ServingOptions&)>;

// Serves `run` as it was measured — its model, cluster and plan, its trace offline with every step's
// work recorded — and measures its window (`source` names the table in errors). InputError for a
// run that cannot be set up or has no window.
PowerFit::Row measure_power_run(const PowerRun& run, const std::string& source, const PowerServe& serve = {});


// REQUIRES: rows' windows filled and every run's GPU the same type (`gpu`, whose power model is
// the starting point). The sustained-GEMM anchor is a lower bound beside the runs.
PowerFit fit_gpu_power(std::vector<PowerFit::Row> rows, const GpuSpec& gpu);

}  // namespace shardsim
