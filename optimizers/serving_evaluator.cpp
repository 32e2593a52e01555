// optimizers/serving_evaluator.cpp — serve_at_fidelity → Metrics → Score.
#include "optimizers/serving_evaluator.hpp"

#include <stdexcept>

#include "sim/serving/metrics.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

ServingEvaluator::ServingEvaluator(EvaluatorInputs in) : in_(std::move(in)) {
  if (!in_.model || !in_.cluster || !in_.trace) throw std::invalid_argument("ServingEvaluator: missing inputs");
  if (in_.tier != "analytic" && !in_.runner) throw std::invalid_argument("ServingEvaluator: SimGrid tier without a runner");
}

std::string ServingEvaluator::objective_unit() const {
  return in_.objective == Objective::Throughput ? "output tok/s" : "goodput req/s";
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
  s.objective = objective == Objective::Throughput ? m.steady_output_tok_s : m.goodput_req_s;
  return s;
}

}  // namespace

Evaluation ServingEvaluator::evaluate_detailed(const Plan& plan) const {
  FidelityReport report;
  ServingOptions so = in_.serving;
  so.timeline_steps = 0;
  ServingResult r = serve_at_fidelity(in_.tier, plan, *in_.model, *in_.cluster, in_.cluster_spec, *in_.trace,
                                      in_.routing, so, in_.runner, report, in_.samples);
  Metrics m = summarize(r, so, in_.cluster->num_gpus());
  return Evaluation{score_of(r, m, in_.objective), faults_of(report)};
}

}  // namespace shardsim
