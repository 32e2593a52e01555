// optimizers/serving_evaluator.cpp — serve_at_fidelity → Metrics → Score.
#include "common/readable_number.hpp"
#include "optimizers/serving_evaluator.hpp"

#include <cstdio>
#include <functional>
#include <stdexcept>

#include "sim/serving/metrics.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

ServingEvaluator::ServingEvaluator(EvaluatorInputs in) : in_(std::move(in)) {
  if (!in_.model || !in_.cluster || !in_.trace) throw std::invalid_argument("ServingEvaluator: missing inputs");
  if (in_.tier != "analytic" && !in_.runner) throw std::invalid_argument("ServingEvaluator: SimGrid tier without a runner");
  if (!in_.serving.cost_classes) in_.serving.cost_classes = std::make_shared<CostClassMemo>();  // one layout, many plans
}

std::string ServingEvaluator::objective_unit() const {
  switch (in_.objective) {
    case Objective::Throughput: return "output tok/s";
    case Objective::Goodput: return "goodput req/s";
    case Objective::ThroughputTpot: return "output tok/s within the TPOT bound";
    case Objective::MaxRate: return "req/s within the SLO";
  }
  return "";
}

namespace {

EvalFaults faults_of(const FidelityReport& report) {
  EvalFaults f;
  f.sampled = report.sampled_steps;
  f.failed = report.failed;
  if (!report.errors.empty()) f.error = report.errors.front();
  return f;
}

Score score_of(const ServingResult& r, const Metrics& m, Objective objective) {
  Score s;
  if (r.rejected_any || m.completed < m.requests) {
    s.feasible = false;
    s.violation = m.requests > 0 ? 1.0 - static_cast<double>(m.completed) / m.requests : 1.0;
    if (s.violation <= 0) s.violation = 1e-6;
    s.reason = "/memory: " + (r.note.empty() ? std::string("not every request completed") : r.note);
    return s;
  }
  s.feasible = true;
  s.objective = objective == Objective::Goodput ? m.goodput_req_s : m.steady_output_tok_s;
  return s;
}

// ThroughputTpot: the throughput, unless TPOT at the goal's percentile exceeds the bound.
Score within_tpot(Score s, const Metrics& m, const SloGoal& goal) {
  if (!s.feasible) return s;
  const double p = goal.kind == SloGoal::Kind::Percentile ? goal.value : 99;
  const double tpot = p >= 99 ? m.tpot_ms.p99 : p >= 90 ? m.tpot_ms.p90 : m.tpot_ms.p50;
  if (tpot <= goal.tpot_s * 1e3) return s;
  s.feasible = false;
  s.violation = tpot / (goal.tpot_s * 1e3) - 1;
  char buf[128];
  std::snprintf(buf, sizeof buf, "/slo: TPOT p%g %.1f ms exceeds %.1f ms", p, tpot, goal.tpot_s * 1e3);
  s.reason = buf;
  return s;
}

void add_faults(EvalFaults& total, const FidelityReport& report) {
  EvalFaults f = faults_of(report);
  total.sampled += f.sampled;
  total.failed += f.failed;
  if (total.error.empty()) total.error = f.error;
}

// The capacity search from the offline run `r` (its completions per second set the scale).
using RunFn = std::function<ServingResult(const RequestTrace&, const ServingOptions&, Metrics&)>;

Score max_rate(const EvaluatorInputs& in, const ServingResult& r, const Metrics& m, const ServingOptions& so, const RunFn& run) {
  const double capacity = saturated_request_rate(r, m);
  ServingOptions open = so;
  open.offline = false;
  auto score = [&](double rate) {
    Metrics x;
    run(at_rate(*in.trace, rate, in.arrivals, in.seed), open, x);
    return x;
  };
  CapacityResult c = max_load_meeting(score, capacity / 8, capacity, in.goal, 0.05, 6, false, {}, 64 * capacity);
  Score s;
  s.feasible = c.bound != CapacityResult::Bound::NoneMeet;
  s.objective = c.max_meeting;
  if (!s.feasible) {
    s.violation = 1e-3;
    s.reason = "/slo: even " + readable(c.min_failing, 3) + " req/s misses " + in.goal.describe();
  }
  return s;
}

}  // namespace

Evaluation ServingEvaluator::evaluate_reporting(const Plan& plan, Metrics* metrics) const {
  ServingOptions so = in_.serving;
  so.timeline_steps = 0;
  EvalFaults faults;
  if (in_.objective == Objective::MaxRate) {  // the first run measures the offline capacity
    so.offline = true;
    so.concurrency = 0;
  }
  RunFn run = [&](const RequestTrace& trace, const ServingOptions& o, Metrics& m) {
    FidelityReport report;
    ServingResult r = serve_at_fidelity(in_.tier, plan, *in_.model, *in_.cluster, in_.cluster_spec, trace, in_.routing, o,
                                        in_.runner, report, in_.samples);
    add_faults(faults, report);
    m = summarize(r, o, in_.cluster->num_gpus());
    return r;
  };
  Metrics m;
  ServingResult r = run(*in_.trace, so, m);
  if (metrics) *metrics = m;
  Score s = score_of(r, m, in_.objective);
  if (in_.objective == Objective::ThroughputTpot) s = within_tpot(s, m, in_.goal);
  if (in_.objective == Objective::MaxRate && s.feasible) s = max_rate(in_, r, m, so, run);
  return Evaluation{s, faults};
}


}  // namespace shardsim
