// sim/serving/metrics.hpp — what a serving run means to a user: throughput, latency percentiles, goodput.
//
// Owns: Metrics and summarize(). Definitions (docs/references.md §F): TTFT = first token − arrival
// (queueing + prefill); TPOT = (finish − first token) / (output tokens − 1) per request;
// percentiles by nearest rank over completed requests; goodput = requests per second that meet
// both SLOs (TTFT and TPOT thresholds), over the run's makespan; throughput_tok_s counts prompt +
// generated tokens per second, output_tok_s generated tokens only, both over the makespan
// (ramp-up and drain included); steady_output_tok_s counts generated tokens inside the saturated
// window only (MLPerf's tokens/s are steady-state figures from long runs).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/serving/serving.hpp"

namespace shardsim {

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
};
Percentiles percentiles(std::vector<double> values);
// The nearest rank: of n sorted values (n ≥ 1), the index of quantile q (0.5, 0.9, 0.99).
std::size_t percentile_index(std::size_t n, double q);

struct Metrics {
  int requests = 0, completed = 0, met_slo = 0;
  double makespan_s = 0;
  double throughput_tok_s = 0;   // prompt + output tokens per second
  double output_tok_s = 0;       // generated tokens per second
  double output_tok_s_per_gpu = 0;
  // Steady state (ServingResult::steady): generated tokens per second inside the saturated
  // window, where ramp-up and drain are excluded (MLPerf's tokens/s are of this kind). When the
  // run has no window, these equal the makespan figures and steady_trusted is false.
  double steady_output_tok_s = 0;
  double steady_output_tok_s_per_gpu = 0;
  double steady_start_s = 0, steady_end_s = 0;
  bool steady_trusted = false;
  std::string steady_note;
  double request_s = 0;          // completed requests per second
  double goodput_req_s = 0;      // requests per second meeting both SLOs
  double slo_attainment = 0;     // fraction of completed requests meeting both SLOs
  Percentiles ttft_ms, tpot_ms, e2e_ms, queue_ms;
};

Metrics summarize(const ServingResult& r, const ServingOptions& o, int gpus);

}  // namespace shardsim
