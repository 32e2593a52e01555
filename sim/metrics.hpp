// sim/metrics.hpp — what a serving run means to a user: throughput, latency percentiles, goodput.
//
// Owns: Metrics and summarize(). Definitions (REFERENCE.md §F): TTFT = first token − arrival
// (queueing + prefill); TPOT = (finish − first token) / (output tokens − 1) per request;
// percentiles by nearest rank over completed requests; goodput = requests per second that meet
// both SLOs (TTFT and TPOT thresholds), over the run's makespan; throughput_tok_s counts prompt +
// generated tokens per second, output_tok_s generated tokens only (MLPerf's tokens/s).
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "sim/serving.hpp"

namespace shardsim {

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
};
Percentiles percentiles(std::vector<double> values);

struct Metrics {
  int requests = 0, completed = 0, met_slo = 0;
  double makespan_s = 0;
  double throughput_tok_s = 0;   // prompt + output tokens per second
  double output_tok_s = 0;       // generated tokens per second
  double output_tok_s_per_gpu = 0;
  double request_s = 0;          // completed requests per second
  double goodput_req_s = 0;      // requests per second meeting both SLOs
  double slo_attainment = 0;     // fraction of completed requests meeting both SLOs
  Percentiles ttft_ms, tpot_ms, e2e_ms, queue_ms;
};

Metrics summarize(const ServingResult& r, const ServingOptions& o, int gpus);

}  // namespace shardsim
