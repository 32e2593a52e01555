// sim/serving/measured_run.hpp — a user's own measured serving run, as check rows beside its simulation.
//
// Owns: read_measured_run() and measured_run_rows(). A run measured with an engine's own benchmark
// client — `vllm bench serve --save-result [--save-detailed]` (JSON), TensorRT-LLM's
// `benchmark_serving` (the same format), SGLang's `bench_serving --output-file` (JSON lines, the
// last line read) — is read as the load it offered (request lengths, per request when the file
// has them, else the client's fixed random lengths; the Poisson rate or `inf`; the concurrency
// limit) and what it measured (output tok/s over the run, TTFT and TPOT median / p99 / mean in
// ms). `shardsim validate --run FILE` serves that load with the user's plan and reports each metric
// as a check row: nothing is fitted to it unless asked (`--fit`, sim/serving/host_cost_fit.hpp:
// then its rows are calibration rows).
// Targets are issue 42's: throughput ±10%, p50 and mean ±15%, p99 ±25%.
// Units: seconds, tokens, ms as in the files. Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/serving/metrics.hpp"
#include "sim/serving/validation.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

struct MeasuredRun {
  std::string source;         // the file
  std::string client;         // "vllm/trtllm bench serve (JSON)" or "sglang bench_serving (JSON lines)"
  RequestTrace trace;         // the requests' lengths, all arriving at 0 (the load below paces them)
  bool per_request = false;   // lengths from the file's input_lens / output_lens
  double rate = 0;            // Poisson req/s; 0: every request at once (request_rate inf)
  int concurrency = 0;        // the client's max concurrency (0: none)
  // What it measured; < 0 when the file lacks it.
  double output_tok_s = -1;
  double ttft_p50 = -1, ttft_p99 = -1, ttft_mean = -1;
  double tpot_p50 = -1, tpot_p99 = -1, tpot_mean = -1;
};

// Throws InputError(source, key, reason) naming the missing or malformed key.
MeasuredRun read_measured_run(const std::string& text, const std::string& source);

// The measured figures beside `simulated` (the run of that load), one check row per metric the file has.
std::vector<ValidationRow> measured_run_rows(const MeasuredRun& run, const Metrics& simulated, const std::string& setup,
                                             const std::string& gpu, int nodes);

}  // namespace shardsim
