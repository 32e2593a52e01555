// sim/serving/load_sweep.hpp — throughput and latency against offered load, and the highest load
// that meets a service-level objective.
//
// Owns: SloGoal (what "meets the SLO" means), sweep_loads() (score a list of loads, in parallel)
// and max_load_meeting() (the capacity search: geometric bisection between a load that meets the
// goal and one that does not, as Vidur's capacity search and DistServe's goodput do).
// Two goals (docs/references.md §F): a percentile of TTFT and of TPOT each within its bound (MLPerf
// Server uses p99), or the fraction of requests meeting both bounds at least a target (DistServe's
// "SLO attainment", 90%). The scorer is given (load → Metrics; the command line builds the trace
// at that rate, or the client count, and serves it), so this module knows no trace or plan.
// A load is a request rate (req/s) or a number of closed-loop clients; the search treats both as
// a positive number and rounds nothing (the caller rounds client counts).
// Thread-safety: sweep_loads() calls the scorer from several threads; it must be thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sim/serving/metrics.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

struct SloGoal {
  enum class Kind { Percentile, Attainment };
  Kind kind = Kind::Attainment;
  double value = 0.9;                   // Percentile: 50, 90 or 99; Attainment: a fraction in (0, 1]
  double ttft_s = 2.0, tpot_s = 0.2;    // the bounds
  bool met(const Metrics& m) const;
  // How much of the goal a run used: its judged TTFT and TPOT percentiles over their bounds, the
  // larger (Percentile), or its misses over those the goal allows (Attainment; NaN when none are
  // allowed); met() needs ≤ 1. NaN for a run with an unfinished request.
  double load(const Metrics& m) const;
  double quantile() const;              // Percentile: the one judged, 0.5, 0.9 or 0.99
  double judged(const Percentiles& p) const;  // Percentile: p's value at quantile()
  std::string describe() const;         // "p99 TTFT ≤ 2000 ms and p99 TPOT ≤ 200 ms"
  // The early stop of a run that met() will judge on all of `requests` and on those arriving at
  // `late_from` or later (ServingOptions::slo_stop): the misses each count allows before met()
  // must fail. `o` holds the bounds summarize() counts met_slo by (an attainment goal's).
  SloStop stop_when_missed(const std::vector<Request>& requests, double late_from, const ServingOptions& o) const;
};

// "p50" | "p90" | "p99" | "attain=F" (0 < F ≤ 1); InputError(source, text, …) otherwise.
SloGoal parse_slo_goal(const std::string& text, double ttft_s, double tpot_s, const std::string& source);

// Requests per second a run served at saturation: completions per second in its steady window
// when that window is trusted, else over its makespan (drain included, so lower). Applied to an
// offline run, the scale of a capacity search.
double saturated_request_rate(const ServingResult& r, const Metrics& m);

struct LoadPoint {
  double load = 0;
  Metrics metrics;
  bool meets = false;
};

using LoadScorer = std::function<Metrics(double load)>;

// Scores every load (up to `threads` at a time; 0 = one per core); points in the order given.
std::vector<LoadPoint> sweep_loads(const std::vector<double>& loads, const LoadScorer& score, const SloGoal& goal,
                                   int threads = 0);

struct CapacityResult {
  enum class Bound { Found, AllMeet, NoneMeet };
  Bound bound = Bound::NoneMeet;
  double max_meeting = 0;        // the highest load probed that met the goal (0 when none did)
  double min_failing = 0;        // the lowest load probed above it that failed (0 when none did)
  std::vector<LoadPoint> probes; // in probing order
  std::string describe(const std::string& unit) const;
};

// Finds the highest load in [lo, hi_limit] that meets `goal`: probes hi, doubling it (lo = the
// last that met) while it meets and stays ≤ hi_limit; then lo; then bisects geometrically until
// max_meeting and min_failing are within a factor (1 + rel_tol) or after `max_probes` bisection
// steps. AllMeet: hi_limit meets it; NoneMeet: lo already fails. hi_limit ≤ hi = no expansion.
// `integer` rounds probes to whole numbers (client counts) and stops when they are adjacent.
// Assumes meeting the goal is monotone in load (it is for rate and concurrency up to noise).
// Loads already scored (`known`, e.g. a sweep's points) are reused, not scored again.
CapacityResult max_load_meeting(const LoadScorer& score, double lo, double hi, const SloGoal& goal, double rel_tol = 0.02,
                                int max_probes = 16, bool integer = false, const std::vector<LoadPoint>& known = {},
                                double hi_limit = 0);

}  // namespace shardsim
