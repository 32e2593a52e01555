// optimizers/space/serving_evaluator.cpp — serve_at_fidelity → Metrics → Score.
#include "common/readable_number.hpp"
#include "optimizers/space/serving_evaluator.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <stdexcept>

#include "common/input_error.hpp"
#include "sim/serving/energy.hpp"
#include "sim/serving/metrics.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

Objective parse_objective(const std::string& text, const std::string& source) {
  if (text == "capacity" || text == "max-rate") return Objective::Capacity;
  if (text == "saturated") return Objective::Saturated;
  if (text == "drain") return Objective::Drain;
  if (text == "goodput") return Objective::Goodput;
  if (text == "drain-tpot") return Objective::DrainTpot;
  if (text == "tokens-per-joule") return Objective::TokensPerJoule;
  if (text == "throughput" || text == "throughput-tpot")
    throw InputError(source, text,
                     "renamed: the output of a run of the given requests is now '" + std::string(text == "throughput" ? "drain" : "drain-tpot") +
                         "' (it depends on how many are given); what a plan sustains is 'saturated' (output tok/s) or "
                         "'capacity' (req/s within the SLO, the default)");
  throw InputError(source, text, std::string("unknown objective (expected ") + objective_names() + ")");
}

const char* objective_name(Objective o) {
  switch (o) {
    case Objective::Capacity: return "capacity";
    case Objective::Saturated: return "saturated";
    case Objective::Drain: return "drain";
    case Objective::Goodput: return "goodput";
    case Objective::DrainTpot: return "drain-tpot";
    case Objective::TokensPerJoule: return "tokens-per-joule";
  }
  return "";
}

const char* objective_names() { return "capacity, saturated, drain, goodput, drain-tpot or tokens-per-joule"; }

bool objective_uses_goal(Objective o) {
  return o == Objective::Capacity || o == Objective::DrainTpot || o == Objective::TokensPerJoule;
}

bool objective_sets_load(Objective o) {
  return o == Objective::Capacity || o == Objective::Saturated || o == Objective::TokensPerJoule;
}

ServingEvaluator::ServingEvaluator(EvaluatorInputs in) : in_(std::move(in)) {
  if (!in_.model || !in_.cluster || !in_.trace) throw std::invalid_argument("ServingEvaluator: missing inputs");
  if (in_.tier != Tier::Analytic && !in_.runner) throw std::invalid_argument("ServingEvaluator: SimGrid tier without a runner");
  if (!in_.serving.cost_classes) in_.serving.cost_classes = std::make_shared<CostClassMemo>();  // one layout, many plans
}

std::string ServingEvaluator::objective_unit() const {
  switch (in_.objective) {
    case Objective::Capacity: return "req/s within the SLO";
    case Objective::Saturated: return "saturated output tok/s";
    case Objective::Drain: return "output tok/s of the drain";
    case Objective::Goodput: return "goodput req/s";
    case Objective::DrainTpot: return "output tok/s of the drain within the TPOT bound";
    case Objective::TokensPerJoule: return "generated tokens per joule, batch kept full, within the TPOT bound";
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

// A capacity run where some request was rejected or never completed: violation = the fraction lost.
Score score_of_infeasible_run(const SaturatedThroughput& t) {
  Score s;
  s.feasible = false;
  const Metrics& m = t.metrics;
  s.violation = m.requests > 0 ? 1.0 - static_cast<double>(m.completed) / m.requests : 1.0;
  if (s.violation <= 0) s.violation = 1e-6;
  s.reason = "/memory: " + t.note;
  return s;
}

Score infeasible_capacity(const std::string& note) {
  Score s;
  s.feasible = false;
  s.violation = 1e-3;
  s.reason = note;
  return s;
}

CapacityOptions capacity_options(const EvaluatorInputs& in) {
  CapacityOptions o;
  o.start_requests = in.capacity_start > 0 ? in.capacity_start : static_cast<long>(in.trace->requests.size());
  o.arrivals = in.arrivals;
  o.seed = in.seed;
  o.converge_saturated = in.capacity_converge_saturated;
  return o;
}

}  // namespace

CapacityServe ServingEvaluator::runner_for(const Plan& plan, EvalFaults& faults) const {
  return [this, &plan, &faults](const RequestTrace& trace, const ServingOptions& o, Metrics& m) {
    FidelityReport report;
    ServingResult r = serve_at_fidelity(in_.tier, plan, *in_.model, *in_.cluster, in_.cluster_spec, trace, in_.routing, o,
                                        in_.runner, report, in_.samples);
    add_faults(faults, report);
    m = summarize(r, o, in_.cluster->num_gpus());
    return r;
  };
}

// The capacity options for `plan`: one simulated replica stands for its alike ones (capacity.hpp),
// unless the runs are not open-loop round-robin (decode only) or the caller asked for every replica.
CapacityOptions ServingEvaluator::capacity_options_for(const Plan& plan) const {
  CapacityOptions o = capacity_options(in_);
  if (in_.capacity_one_replica && !in_.serving.prefilled)
    o.replicas = alike_replicas(plan, *in_.cluster, in_.serving.cost_classes.get());
  return o;
}

SloCapacity ServingEvaluator::capacity(const Plan& plan, EvalFaults* faults) const {
  EvalFaults local;
  return capacity_under_slo(runner_for(plan, faults ? *faults : local), in_.population ? *in_.population : *in_.trace,
                            in_.serving, in_.goal, capacity_options_for(plan));
}

SaturatedThroughput ServingEvaluator::saturated(const Plan& plan, EvalFaults* faults) const {
  EvalFaults local;
  return saturated_throughput(runner_for(plan, faults ? *faults : local), in_.population ? *in_.population : *in_.trace,
                              in_.serving, capacity_options_for(plan));
}

Evaluation ServingEvaluator::evaluate_reporting(const Plan& plan, Metrics* metrics) const {
  EvalFaults faults;
  if (in_.objective == Objective::Capacity) {
    const SloCapacity c = capacity(plan, &faults);
    if (metrics) *metrics = c.feasible ? c.at_rate : c.saturated.metrics;
    if (!c.saturated.feasible) return Evaluation{score_of_infeasible_run(c.saturated), faults};
    if (!c.feasible) return Evaluation{infeasible_capacity("/slo: " + c.note), faults};
    Score s;
    s.feasible = true;
    s.objective = c.rate;
    return Evaluation{s, faults};
  }
  if (in_.objective == Objective::TokensPerJoule) {
    // The saturated measure's runs, the last one's energy kept (one simulated replica's when it
    // stands for its alike ones: its GPUs, its tokens).
    std::vector<EnergyPool> pools;
    double seconds = 0, tokens = 0;
    const CapacityOptions co = capacity_options_for(plan);
    const CapacityServe inner = runner_for(plan, faults);
    const CapacityServe keep = [&](const RequestTrace& trace, const ServingOptions& o, Metrics& m) {
      ServingResult r = inner(trace, o, m);
      pools = energy_pools(r, plan, *in_.cluster, o.replica_share);
      seconds = r.emissions.empty() ? r.makespan : std::max(r.makespan, r.emissions.back().first);
      tokens = 0;
      for (const auto& e : r.emissions) tokens += e.second;
      return r;
    };
    const SaturatedThroughput t =
        saturated_throughput(keep, in_.population ? *in_.population : *in_.trace, in_.serving, co);
    if (metrics) *metrics = t.metrics;
    if (!t.feasible) return Evaluation{score_of_infeasible_run(t), faults};
    // One simulated replica of k alike ones carries 1/k of the cluster's network.
    const RunEnergy e = run_energy(pools, seconds, network_ports(*in_.cluster).share(1.0 / std::max(1, co.replicas)));
    if (!e.modelled) return Evaluation{infeasible_capacity("/energy: " + e.describe(tokens)), faults};
    Score s;
    s.feasible = true;
    s.objective = e.tokens_per_joule(tokens);
    return Evaluation{within_tpot(s, t.metrics, in_.goal), faults};
  }
  if (in_.objective == Objective::Saturated) {
    const SaturatedThroughput t = saturated(plan, &faults);
    if (metrics) *metrics = t.metrics;
    if (!t.feasible) return Evaluation{score_of_infeasible_run(t), faults};
    Score s;
    s.feasible = true;
    s.objective = t.output_tok_s;
    return Evaluation{s, faults};
  }
  ServingOptions so = in_.serving;
  so.timeline_steps = 0;
  const CapacityServe run = runner_for(plan, faults);
  Metrics m;
  ServingResult r = run(*in_.trace, so, m);
  if (metrics) *metrics = m;
  Score s = score_of(r, m, in_.objective);
  if (in_.objective == Objective::DrainTpot) s = within_tpot(s, m, in_.goal);
  return Evaluation{s, faults};
}


}  // namespace shardsim
