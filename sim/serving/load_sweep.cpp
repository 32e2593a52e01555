// sim/serving/load_sweep.cpp — load sweeps and the capacity search.
#include "common/readable_number.hpp"
#include "sim/serving/load_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "common/input_error.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

bool SloGoal::met(const Metrics& m) const {
  if (m.requests <= 0) return false;
  if (kind == Kind::Attainment)  // a refused request misses both bounds
    return static_cast<double>(m.met_slo) >= value * static_cast<double>(m.requests) - 1e-9;
  if (m.completed < m.requests) return false;
  return judged(m.ttft_ms) <= ttft_s * 1e3 && judged(m.tpot_ms) <= tpot_s * 1e3;
}

double SloGoal::load(const Metrics& m) const {
  if (m.requests <= 0 || m.completed < m.requests) return NAN;
  if (kind == Kind::Attainment) {
    const double allowed = (1 - value) * static_cast<double>(m.requests);
    return allowed > 0 ? static_cast<double>(m.requests - m.met_slo) / allowed : NAN;
  }
  return std::max(judged(m.ttft_ms) / (ttft_s * 1e3), judged(m.tpot_ms) / (tpot_s * 1e3));
}

double SloGoal::quantile() const { return value >= 99 ? 0.99 : value >= 90 ? 0.90 : 0.50; }

double SloGoal::judged(const Percentiles& p) const {
  const double q = quantile();
  return q == 0.99 ? p.p99 : q == 0.90 ? p.p90 : p.p50;
}

SloStop SloGoal::stop_when_missed(const std::vector<Request>& requests, double late_from, const ServingOptions& o) const {
  SloStop st;
  st.late_from = late_from;
  long n[2][2] = {};  // [all, late][every request, those generating more than one token (TPOT)]
  for (const auto& r : requests)
    for (int w = 0; w < (r.arrival_s >= late_from ? 2 : 1); ++w) {
      n[w][0]++;
      if (r.output_tokens > 1) n[w][1]++;
    }
  if (kind == Kind::Attainment) {  // met_slo ≥ value × n − 1e-9, all requests counted
    st.joint = true;
    st.ttft_s = o.slo_ttft;
    st.tpot_s = o.slo_tpot;
    for (int w = 0; w < 2; ++w) {
      const double need = value * static_cast<double>(n[w][0]) - 1e-9;
      long m = n[w][0];  // the most misses that still meet it
      while (m > 0 && static_cast<double>(n[w][0] - m) < need) --m;
      st.allowed[w][0] = m;
    }
    return st;
  }
  // A nearest-rank percentile stays within its bound while fewer than n − index values exceed it.
  st.ttft_s = ttft_s;
  st.tpot_s = tpot_s;
  const double q = quantile();
  for (int w = 0; w < 2; ++w)
    for (int k = 0; k < 2; ++k)
      if (n[w][k] > 0)
        st.allowed[w][k] = n[w][k] - static_cast<long>(percentile_index(static_cast<std::size_t>(n[w][k]), q)) - 1;
  return st;
}

std::string SloGoal::describe() const {
  char buf[160];
  if (kind == Kind::Attainment)
    std::snprintf(buf, sizeof buf, "%g%% of requests within TTFT ≤ %g ms and TPOT ≤ %g ms", value * 100, ttft_s * 1e3,
                  tpot_s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "p%g TTFT ≤ %g ms and p%g TPOT ≤ %g ms", value, ttft_s * 1e3, value, tpot_s * 1e3);
  return buf;
}

SloGoal parse_slo_goal(const std::string& text, double ttft_s, double tpot_s, const std::string& source) {
  SloGoal g;
  g.ttft_s = ttft_s;
  g.tpot_s = tpot_s;
  if (text == "p50" || text == "p90" || text == "p99") {
    g.kind = SloGoal::Kind::Percentile;
    g.value = std::stod(text.substr(1));
    return g;
  }
  double f = 0;
  if (text.rfind("attain=", 0) == 0 && parse_double(std::string_view(text).substr(7), f) && f > 0 && f <= 1) {
    g.kind = SloGoal::Kind::Attainment;
    g.value = f;
    return g;
  }
  throw InputError(source, text, "expected p50, p90, p99 or attain=F with 0 < F ≤ 1");
}

double saturated_request_rate(const ServingResult& r, const Metrics& m) {
  if (r.steady.trusted && r.steady.seconds() > 0) return r.steady.completions / r.steady.seconds();
  return m.makespan_s > 0 ? m.completed / m.makespan_s : 1.0;
}

std::vector<LoadPoint> sweep_loads(const std::vector<double>& loads, const LoadScorer& score, const SloGoal& goal,
                                   int threads) {
  std::vector<LoadPoint> out(loads.size());
  const int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  tbb::task_arena arena(n);
  arena.execute([&] {
    tbb::parallel_for(std::size_t{0}, loads.size(), [&](std::size_t i) {
      out[i].load = loads[i];
      out[i].metrics = score(loads[i]);
      out[i].meets = goal.met(out[i].metrics);
    });
  });
  return out;
}

namespace {

// One probe of the capacity search: scores `load` (unless it is known) and records it.
bool probe(CapacityResult& r, const LoadScorer& score, const SloGoal& goal, double load, const std::vector<LoadPoint>& known) {
  for (const auto& k : known)
    if (k.load == load) return k.meets;
  LoadPoint p;
  p.load = load;
  p.metrics = score(load);
  p.meets = goal.met(p.metrics);
  r.probes.push_back(p);
  return p.meets;
}

}  // namespace

CapacityResult max_load_meeting(const LoadScorer& score, double lo, double hi, const SloGoal& goal, double rel_tol,
                                int max_probes, bool integer, const std::vector<LoadPoint>& known, double hi_limit) {
  CapacityResult r;
  if (integer) {
    lo = std::max(1.0, std::round(lo));
    hi = std::max(lo, std::round(hi));
    hi_limit = std::round(hi_limit);
  }
  hi_limit = std::max(hi, hi_limit);
  while (probe(r, score, goal, hi, known)) {  // expand upwards while the top meets the goal
    if (hi >= hi_limit) {
      r.bound = CapacityResult::Bound::AllMeet;
      r.max_meeting = hi;
      return r;
    }
    lo = hi;
    hi = std::min(2 * hi, hi_limit);
  }
  r.min_failing = hi;
  if (lo >= hi || !probe(r, score, goal, lo, known)) {
    r.bound = CapacityResult::Bound::NoneMeet;
    r.min_failing = lo < hi ? lo : hi;
    return r;
  }
  r.bound = CapacityResult::Bound::Found;
  r.max_meeting = lo;
  for (int probes = 0; probes < max_probes; ++probes) {
    double mid = std::sqrt(r.max_meeting * r.min_failing);
    if (integer) {
      mid = std::round(mid);
      if (mid <= r.max_meeting) mid = r.max_meeting + 1;
      if (mid >= r.min_failing) break;  // adjacent whole numbers
    } else if (r.min_failing <= r.max_meeting * (1 + rel_tol)) {
      break;
    }
    if (probe(r, score, goal, mid, known)) r.max_meeting = mid;
    else r.min_failing = mid;
  }
  return r;
}

std::string CapacityResult::describe(const std::string& unit) const {
  char buf[256];
  switch (bound) {
    case Bound::Found:
      std::snprintf(buf, sizeof buf, "%s %s (meets it; %s %s does not; %zu runs)", readable(max_meeting).c_str(), unit.c_str(),
                    readable(min_failing).c_str(), unit.c_str(), probes.size());
      break;
    case Bound::AllMeet:
      std::snprintf(buf, sizeof buf, "at least %s %s (the highest load tried meets it: too few requests to build a queue?)",
                    readable(max_meeting).c_str(), unit.c_str());
      break;
    case Bound::NoneMeet:
      std::snprintf(buf, sizeof buf, "none: even %s %s misses it (the objective is tighter than one request alone can meet?)",
                    readable(min_failing).c_str(), unit.c_str());
      break;
  }
  return buf;
}

}  // namespace shardsim
