// sim/serving/metrics.cpp — percentiles and rates over the requests of a serving run.
#include "sim/serving/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace shardsim {

std::size_t percentile_index(std::size_t n, double q) {
  std::size_t i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
  return std::min(n - 1, i == 0 ? 0 : i - 1);
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) { return v[percentile_index(v.size(), q)]; };
  p.p50 = rank(0.50);
  p.p90 = rank(0.90);
  p.p99 = rank(0.99);
  p.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  p.max = v.back();
  return p;
}

Metrics summarize(const ServingResult& r, const ServingOptions& o, int gpus) {
  Metrics m;
  m.requests = static_cast<int>(r.requests.size());
  std::vector<double> ttft, tpot, e2e, queue;
  double tokens = 0, out_tokens = 0;
  for (const auto& q : r.requests) {
    if (!q.completed) continue;
    ++m.completed;
    ttft.push_back(q.ttft() * 1e3);
    if (q.output_tokens > 1) tpot.push_back(q.tpot() * 1e3);
    e2e.push_back((q.finish - q.arrival) * 1e3);
    queue.push_back((q.admitted - q.arrival) * 1e3);
    tokens += q.prompt_tokens + q.output_tokens;
    out_tokens += q.output_tokens;
    if (q.ttft() <= o.slo_ttft && q.tpot() <= o.slo_tpot) ++m.met_slo;
  }
  m.makespan_s = r.makespan;
  if (r.makespan > 0) {
    m.throughput_tok_s = tokens / r.makespan;
    m.output_tok_s = out_tokens / r.makespan;
    m.output_tok_s_per_gpu = m.output_tok_s / std::max(gpus, 1);
    m.request_s = m.completed / r.makespan;
    m.goodput_req_s = m.met_slo / r.makespan;
  }
  const SteadyWindow& w = r.steady;
  if (w.seconds() > 0) {
    m.steady_output_tok_s = static_cast<double>(w.tokens) / w.seconds();
    m.steady_start_s = w.start;
    m.steady_end_s = w.end;
    m.steady_trusted = w.trusted;
  } else {
    m.steady_output_tok_s = m.output_tok_s;
    m.steady_end_s = r.makespan;
  }
  m.steady_output_tok_s_per_gpu = m.steady_output_tok_s / std::max(gpus, 1);
  m.steady_note = w.note;
  m.slo_attainment = m.completed > 0 ? static_cast<double>(m.met_slo) / m.completed : 0;
  m.ttft_ms = percentiles(ttft);
  m.tpot_ms = percentiles(tpot);
  m.e2e_ms = percentiles(e2e);
  m.queue_ms = percentiles(queue);
  return m;
}

}  // namespace shardsim
