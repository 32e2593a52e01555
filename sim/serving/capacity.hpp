// sim/serving/capacity.hpp — what a plan can serve, measured so that no run length can fool it:
// saturated throughput and capacity under an SLO.
//
// Owns: capacity_sample(), saturated_throughput() and capacity_under_slo().
//
// Saturated throughput. A backlog (every request waiting at t = 0, MLPerf Offline's arrangement)
// keeps every replica's batch and KV as full as its scheduler allows — for any plan, disaggregated
// ones included, and without guessing a client count that might under-fill a batch. It is measured
// in the run's saturated window (SteadyWindow: from every replica's first batch turnover to the
// first replica's last admission; each replica of a backlog run stops at its own last admission,
// ServingOptions::stop_at_last_admission, since its drain only costs steps), and only trusted
// when that window holds at least
// `min_turnovers` batch turnovers and its rate has converged: the window is cut into `batches`
// equal spans, and the 95% interval of the mean of their rates (Student t) must be within
// ±`rel_halfwidth` of it. The first backlog holds the whole trace (at least `start_requests`,
// at most `max_requests`), so the figure does not depend on how many requests a command was given.
// Otherwise the run extends itself: more requests, drawn from the same
// trace (capacity_sample), as many more as the window lacked turnovers or precision
// (at least twice, at most sixteen times as many each time), up to `max_requests`; a figure
// that never converged says so (converged = false, with its evidence) and is never called steady.
//
// Capacity under an SLO. The highest Poisson rate (or the trace's arrival shape rescaled) whose run
// meets the goal's percentiles, bracketed from above by the saturated request rate: a rate above
// what the plan sustains is never reported (at most the saturated rate, flagged `at_saturation`).
// The bound's backlog runs stop once their window holds `min_turnovers` turnovers (growing by what
// they lack, not doubling): its interval is narrowed to ±`rel_halfwidth` only when the bound
// itself meets the goal (then it is the figure: the converged rate is used, probed first if it is
// higher) or when the caller reports it (`converge_saturated`); the probes never depend on it.
// Each probe replays the whole trace (at least 16 requests, at most `max_requests`); one that meets
// the goal without turning its own batch over `min_turnovers` times (completions over the mean
// number of sequences it held) is replayed longer at the same rate, up to `max_requests`, and that
// verdict counts. A probe meets the goal only when
// all its requests meet it and so do those that arrived in the second half of its arrivals (a
// queue that grows slowly shows there as a tail) and, in a probe longer than the trace, the
// trace's own first pass on its own (its bursts, as the trace's replay meets them, are not diluted
// by the shuffled passes after it); a probe stops as soon as its misses decide that
// it fails (ServingOptions::slo_stop). Probes: the saturated rate, then 0.9 of it (0.7, 0.5, an
// eighth, a thirty-second while those fail), then geometric bisection to `rel_tol`. Each probe that
// meets the goal records the share of it used (SloGoal::load), and the figure says when the goal
// barely tightens near it (SloCapacity::flat: then another arrival draw may move it by more than
// rel_tol).
//
// Alike replicas (CapacityOptions::replicas > 1, alike_replicas()): every run simulates replica 0
// alone with its share of the requests — every replicas-th, as open-loop round-robin deals them —
// (ServingOptions::replica_share); its rates are multiplied by `replicas` and its requests judged
// for all. Replica 0's run is step for step the one it has in the whole run; what is given up is
// the other replicas' requests in the percentiles (a p99 over n/replicas requests) and in the
// backlog's batch means (one replica's emissions vary more than their sum, so its interval may
// need more requests). Costs about 1/replicas of the runs; `tools/bench objective` measures what
// it does to the figure.
//
// All runs of one measure share one step cache (ServingOptions::step_cache), unless the caller
// gives its own: one plan, one tier, so a probe executes only the step shapes no earlier run met.
// Both are pure given a pure `serve`; every random choice flows from `seed`. Units: seconds,
// tokens per second, requests per second.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/serving/load_sweep.hpp"
#include "sim/serving/metrics.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

struct CapacityOptions {
  long start_requests = 300;      // the first sample's size, if larger than the trace (a command's --requests)
  long max_requests = 65536;      // the extension stops here (converged = false beyond)
  int batches = 10;               // batch means over the window
  double rel_halfwidth = 0.02;    // the 95% interval's half-width, relative to the mean
  double min_turnovers = 3;       // batch turnovers the window must hold
  double rel_tol = 0.04;          // capacity under an SLO: bisection stops within this factor
  bool stop_early = true;         // a probe stops once its misses decide that it fails (the same verdict)
  bool converge_saturated = true; // capacity_under_slo: narrow the saturated figure it reports even when it is only the bound
  Arrival arrivals = Arrival::Poisson;
  std::uint64_t seed = 1;
  // Alike replicas one simulated replica stands for (see above; the serve callback must honour
  // ServingOptions::replica_share when > 1). Request counts below are the whole plan's.
  int replicas = 1;
};

// `n` requests from `population`, all arriving at 0: seeded shuffles of it, one per pass (each
// request once per pass), or with `trace_order_first` the trace in its own order first (its bursts
// of long prompts are part of the workload an arrival-paced replay meets), then the shuffles. The
// sample of n is a prefix of the sample of 2n, so an extended run keeps the requests it had. The
// backlog runs use shuffles (a stationary sample, whose window converges); the SLO probes the
// trace's order.
RequestTrace capacity_sample(const RequestTrace& population, long n, std::uint64_t seed, bool trace_order_first);

// Serves a trace with options; returns the run and its Metrics (the caller's tier and plan).
using CapacityServe = std::function<ServingResult(const RequestTrace&, const ServingOptions&, Metrics&)>;

struct SaturatedThroughput {
  bool feasible = false;          // false: some request was rejected or never completed (note)
  bool converged = false;         // the window met the turnover and interval rule
  double output_tok_s = 0;        // generated tokens per second in the window
  double total_tok_s = 0;         // + prompt tokens of the requests whose first token fell in it
  double request_s = 0;           // completions per second in the window
  long requests = 0;              // the sample size of the last run (all replicas')
  int replicas = 1;               // CapacityOptions::replicas: 1 simulated stood for this many
  long turnover_requests = 0;     // the first sample whose window held min_turnovers turnovers (0: none)
  int runs = 0;                   // serving runs spent (the extensions)
  long simulated_requests = 0;    // what those runs cost: requests simulated (one replica's share when replicas > 1)
  long executed_steps = 0;        //   and steps lowered and run (the rest memoised, fitted or fast-forwarded)
  double window_start = 0, window_end = 0;
  double turnovers = 0;           // completions in the window ÷ one batch turnover
  double rel_halfwidth = 0;       // of the 95% interval of the batch means, relative
  std::string note;               // why not feasible / not converged
  Metrics metrics;                // of the last run (a backlog stopped at its last admission: the requests finished by
                                  // then; its TTFT is queueing, not latency); with replicas > 1
                                  // its rates are the plan's, its counts those of the simulated replica
  std::string describe() const;   // "12,345 tok/s (converged: ±1.2%, 7.5 turnovers, 2,400 requests)"
};

SaturatedThroughput saturated_throughput(const CapacityServe& serve, const RequestTrace& population,
                                         const ServingOptions& base, const CapacityOptions& opt);

struct SloCapacity {
  // One probe, in the order run: its rate, its verdict, and — stopped as soon as its misses
  // decided it — the requests of its replica finished by then (of `probe_requests`' share).
  struct Probe {
    double rate = 0;
    bool met = false;
    bool stopped = false;
    long finished = 0;
    double load = NAN;  // met: the share of the goal it used (SloGoal::load; the largest of its whole run's, its second half's and its first trace pass's)
    long simulated = 0;  // what it cost: requests admitted (its replica's share; a stopped one's up to its stop)
    long executed = 0;   //   and steps executed
    bool extended = false;  // it met the goal without turning its batch over min_turnovers times: re-judged on the next, longer probe
    long requests = 0;      // its length: requests of the sample replayed (before a replica's share)
  };
  bool feasible = false;          // some probed rate met the goal
  double bound = 0;               // req/s: the saturated rate the search started from (its first probe)
  double rate = 0;                // req/s: the highest probed rate that met it
  double min_failing = 0;         // the lowest probed rate above it that did not (0: none did)
  bool at_saturation = false;     // the saturated rate itself met the goal (the capacity is the plan's throughput)
  double output_tok_s = 0;        // rate × the sample's mean output tokens
  long probe_requests = 0;        // requests per probe (the longest, when a passing probe was extended for its turnovers)
  long simulated_requests = 0;    // what the probes cost: requests admitted (a stopped one's up to its stop; one replica's share when replicas > 1)
  long executed_steps = 0;        //   and steps executed (the saturated runs' are in `saturated`)
  std::vector<Probe> probe_log;   // every probe, in order
  SaturatedThroughput saturated;
  Metrics at_rate;                // the second half of the run at `rate` (its whole met the goal too); as `metrics` above
  std::string note;
  // How steeply the goal tightens near the capacity: d log(load) / d log(rate) between the two
  // highest probed rates that met it, `flat_from` and `rate` (NaN with fewer than two), and the
  // share of the goal used at `rate`. The figure is ill-conditioned (flat(); describe() says so)
  // when the percentile that decides it sits at its bound (load_at_rate ≥ kNearBound) and moves so
  // little with the rate (elasticity < kFlatElasticity) that a change of it smaller than another
  // arrival draw makes moves the capacity by more than the search's rel_tol. A goal with room left
  // at the capacity failed above it by a cliff (a queue that grows), which a draw moves little.
  double elasticity = NAN;
  double flat_from = 0;
  double load_at_rate = NAN;
  static constexpr double kFlatElasticity = 0.5;
  static constexpr double kNearBound = 0.95;
  bool flat() const {
    return std::isfinite(elasticity) && elasticity < kFlatElasticity && load_at_rate >= kNearBound;
  }
  // When flat(): "flat near it: the goal's binding percentile, at 100% of its bound, moves only
  // +1.8% from 34.5 to 36 req/s (elasticity 0.41), so another arrival draw may move this capacity
  // by more than the search's tolerance"; else empty.
  std::string flatness() const;
  // Sets elasticity, flat_from and load_at_rate from probe_log and rate (capacity_under_slo calls it last).
  void measure_flatness();
  // Rate runs (the saturated runs are in saturated.runs), and those stopped as soon as they missed.
  int probes() const { return static_cast<int>(probe_log.size()); }
  int stopped_probes() const;
  // The length of the probe whose verdict the reported rate is (the last that met the goal at it;
  // longer than the trace's when a passing probe there was extended for its turnovers).
  long verdict_requests() const;
  int runs() const { return probes() + saturated.runs; }
  std::string describe() const;
};

SloCapacity capacity_under_slo(const CapacityServe& serve, const RequestTrace& population, const ServingOptions& base,
                               const SloGoal& goal, const CapacityOptions& opt);

}  // namespace shardsim
