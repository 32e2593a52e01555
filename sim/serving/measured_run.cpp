// sim/serving/measured_run.cpp — engine benchmark results read as load + measurements (see measured_run.hpp).
#include "sim/serving/measured_run.hpp"

#include <cmath>
#include <limits>
#include <sstream>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"

namespace shardsim {

namespace {

// A number, or the strings "inf" / "Infinity" the clients write for an unpaced run; `fallback` when absent or null.
double number_or(const json& j, const std::string& key, double fallback, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const json& v = j[key];
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "inf" || s == "Infinity" || s == "infinity") return std::numeric_limits<double>::infinity();
  }
  throw InputError(source, key, "expected a number, got " + v.dump());
}

std::vector<double> numbers(const json& j, const std::string& key, const std::string& source) {
  std::vector<double> out;
  if (!j.contains(key)) return out;
  if (!j[key].is_array()) throw InputError(source, key, "expected an array of numbers");
  for (const auto& x : j[key]) {
    if (!x.is_number()) throw InputError(source, key, "expected an array of numbers, found " + x.dump());
    out.push_back(x.get<double>());
  }
  return out;
}

// Python's json.dumps writes an unpaced rate as the bare token Infinity (SGLang's output file):
// outside strings, Infinity / -Infinity / NaN become the strings "inf" / "-inf" / "nan".
std::string python_tokens_as_strings(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (const auto& [token, as] : {std::pair{"-Infinity", "\"-inf\""}, std::pair{"Infinity", "\"inf\""}, std::pair{"NaN", "\"nan\""}})
      if (text.compare(i, std::char_traits<char>::length(token), token) == 0) {
        out += as;
        i += std::char_traits<char>::length(token) - 1;
        replaced = true;
        break;
      }
    if (!replaced) out += c;
  }
  return out;
}

}  // namespace

MeasuredRun read_measured_run(const std::string& text, const std::string& source) {
  MeasuredRun run;
  run.source = source;
  // SGLang appends one JSON object per run to its output file: the last non-empty line is this run.
  json j;
  const std::string clean = python_tokens_as_strings(text);
  const std::size_t first = clean.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) throw InputError(source, "", "empty file");
  try {
    j = parse_json(clean, source);
    run.client = "vllm / trtllm bench serve (JSON)";
  } catch (const InputError&) {
    std::stringstream ss(clean);
    std::string last;
    for (std::string line; std::getline(ss, line);)
      if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
    j = parse_json(last, source);
    run.client = "sglang bench_serving (JSON lines, last run)";
  }
  if (!j.is_object()) throw InputError(source, "", "expected a benchmark result object");
  const double rate = number_or(j, "request_rate", std::numeric_limits<double>::infinity(), source);
  if (!(rate > 0)) throw InputError(source, "request_rate", "expected a positive rate or inf");
  run.rate = std::isinf(rate) ? 0 : rate;
  const double conc = number_or(j, "max_concurrency", 0, source);
  if (conc < 0 || conc > 1e7 || conc != std::floor(conc)) throw InputError(source, "max_concurrency", "expected a whole number");
  run.concurrency = static_cast<int>(conc);
  const std::vector<double> in = numbers(j, "input_lens", source), out = numbers(j, "output_lens", source);
  if (in.size() != out.size()) throw InputError(source, "output_lens", "holds " + std::to_string(out.size()) + " lengths, input_lens " + std::to_string(in.size()));
  run.trace.source = source;
  if (!in.empty()) {
    run.per_request = true;
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (!(in[i] >= 1 && out[i] >= 1 && in[i] < 1e7 && out[i] < 1e7))
        throw InputError(source, "input_lens", "request " + std::to_string(i) + ": lengths must be whole numbers ≥ 1");
      run.trace.requests.push_back(Request{0.0, static_cast<int>(in[i]), static_cast<int>(out[i]), {}});
    }
  } else {
    // Without per-request lengths: the client's fixed random lengths, or the totals' means.
    const double n = number_or(j, "completed", -1, source);
    if (!(n >= 1)) throw InputError(source, "completed", "missing: needs completed requests (or input_lens / output_lens)");
    const double in_total = number_or(j, "total_input_tokens", -1, source), out_total = number_or(j, "total_output_tokens", -1, source);
    if (!(in_total >= n) || !(out_total >= n))
      throw InputError(source, in_total >= n ? "total_output_tokens" : "total_input_tokens", "missing or below one token per request");
    const int pin = static_cast<int>(std::lround(in_total / n)), pout = static_cast<int>(std::lround(out_total / n));
    for (long i = 0; i < static_cast<long>(n); ++i) run.trace.requests.push_back(Request{0.0, pin, pout, {}});
  }
  if (run.trace.requests.empty()) throw InputError(source, "input_lens", "no requests");
  run.output_tok_s = number_or(j, "output_throughput", -1, source);
  run.ttft_p50 = number_or(j, "median_ttft_ms", -1, source);
  run.ttft_p99 = number_or(j, "p99_ttft_ms", -1, source);
  run.ttft_mean = number_or(j, "mean_ttft_ms", -1, source);
  run.tpot_p50 = number_or(j, "median_tpot_ms", -1, source);
  run.tpot_p99 = number_or(j, "p99_tpot_ms", -1, source);
  run.tpot_mean = number_or(j, "mean_tpot_ms", -1, source);
  if (run.output_tok_s < 0 && run.ttft_p50 < 0 && run.tpot_p50 < 0)
    throw InputError(source, "output_throughput", "missing: the file holds no measured figure to compare");
  return run;
}

std::vector<ValidationRow> measured_run_rows(const MeasuredRun& run, const Metrics& sim, const std::string& setup,
                                             const std::string& gpu, int nodes) {
  std::vector<ValidationRow> rows;
  auto add = [&](const std::string& metric, const char* unit, double measured, double simulated, double tolerance) {
    if (measured < 0) return;
    ValidationRow r;
    r.name = "your run (" + run.source + "), " + metric;
    r.group = "your runs";
    r.unit = unit;
    r.published = measured;
    r.simulated = simulated;
    r.tolerance = tolerance;
    r.role = RowRole::Check;
    r.source = run.source + " (" + run.client + ")";
    r.setup = setup;
    r.metric = metric;
    r.gpu = gpu;
    r.nodes = nodes;
    rows.push_back(r);
  };
  add("throughput", "tok/s", run.output_tok_s, sim.output_tok_s, 0.10);
  add("TTFT p50", "ms", run.ttft_p50, sim.ttft_ms.p50, 0.15);
  add("TTFT p99", "ms", run.ttft_p99, sim.ttft_ms.p99, 0.25);
  add("TTFT mean", "ms", run.ttft_mean, sim.ttft_ms.mean, 0.15);
  add("TPOT p50", "ms", run.tpot_p50, sim.tpot_ms.p50, 0.15);
  add("TPOT p99", "ms", run.tpot_p99, sim.tpot_ms.p99, 0.25);
  add("TPOT mean", "ms", run.tpot_mean, sim.tpot_ms.mean, 0.15);
  return rows;
}

}  // namespace shardsim
