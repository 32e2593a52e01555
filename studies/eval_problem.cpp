// studies/eval_problem.cpp — options through search's declared options, plans in three forms, scores as JSON.
#include "studies/eval_problem.hpp"

#include <chrono>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "common/input_error.hpp"
#include "sim/plan/plan_check.hpp"
#include "sim/serving/metrics.hpp"
#include "common/worker_pool.hpp"
#include "studies/eval_study.hpp"
#include "studies/search_runs.hpp"
#include "studies/simulate_json.hpp"

namespace shardsim {

namespace {

// A JSON integer as an index below `size`, read at its own width (a 2^32 read as int was 0:
// another plan scored in its place); -1 when it is not one.
int value_index(const json& v, std::size_t size) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>() < size ? static_cast<int>(v.get<std::uint64_t>()) : -1;
  const std::int64_t x = v.get<std::int64_t>();
  return x >= 0 && static_cast<std::uint64_t>(x) < size ? static_cast<int>(x) : -1;
}


constexpr const char* kProblemSource = "problem";

}  // namespace

ProblemOptions parse_problem_options(const json& options) {
  if (!options.is_object()) throw InputError(kProblemSource, "", "expected an object of search options, got " + std::string(options.type_name()));
  ProblemOptions o;
  o.in.requests = 300;  // as `shardsim search`
  OptionReader().add(sim_option_decls(), o.in).add(problem_option_decls(), static_cast<ProblemSettings&>(o)).read(options, kProblemSource);
  // The tier and the objective are read where their names live; their errors name the option.
  Objective objective{};
  try {
    o.tier = parse_tier(o.fidelity, "fidelity");
    objective = parse_objective(o.objective, "objective");
  } catch (const InputError& e) {
    throw InputError(kProblemSource, "/" + e.source(), e.field() + ": " + e.reason());
  }
  if (objective_sets_load(objective) && (o.in.rate > 0 || o.in.concurrency > 0 || o.in.offline))
    throw InputError(kProblemSource, "/objective",
                     std::string(objective_name(objective)) + " chooses the load itself: drop rate, concurrency and offline");
  o.given = options;
  return o;
}

EvalProblem::EvalProblem(const json& options, WorkerPool* pool) : opt_(parse_problem_options(options)) {
  if (opt_.tier != Tier::Analytic && !pool)
    throw InputError(kProblemSource, "/fidelity", opt_.fidelity + " needs the SimGrid worker pool, which this process did not start");
  L_ = load_inputs(opt_.in);
  so_ = L_.serving;
  so_.offline = search_replays_offline(opt_.in, opt_.objective, opt_.online);
  Plan base = default_plan(L_.model);
  if (!opt_.base.empty()) base = load_plan(opt_.base, L_.model, *L_.cluster);
  space_ = make_search_space(L_.model, *L_.cluster, base, parse_space_options(opt_.space, "/space"));
  rules_ = portfolio_genes(*space_);
  if (pool) runner_ = make_pool_runner(*pool);
  const EvaluatorInputs ei =
      search_evaluator_inputs(opt_.in, L_, so_, opt_.tier, opt_.objective, opt_.goal, opt_.samples, runner_.get(), "/goal");
  evaluator_ = std::make_unique<ServingEvaluator>(ei);
}

EvalProblem::~EvalProblem() = default;

json EvalProblem::describe() const {
  json decisions = json::array();
  for (const auto& d : space_->decisions())
    decisions.push_back({{"name", d.name}, {"block", to_string(d.block)}, {"ordinal", d.ordinal}, {"values", d.labels}});
  json rules = json::array();
  for (const auto& r : rules_)
    rules.push_back({{"rule", r.rule}, {"plan", plan_to_string(space_->decode(r.genes))}, {"genes", r.genes}});
  Genes base;
  const bool base_in = space_->encode(space_->base(), base);
  return {{"model", L_.model.name},
          {"cluster", L_.cluster->name()},
          {"gpus", L_.cluster->num_gpus()},
          {"requests", L_.trace.requests.size()},
          {"offline", so_.offline},
          {"fidelity", opt_.fidelity},
          {"objective", opt_.objective},
          {"unit", evaluator_->objective_unit()},
          {"space", to_string(space_->options())},
          {"size", space_->canonical_size()},
          {"base", {{"plan", plan_to_string(space_->base())}, {"genes", base_in ? json(space_->canonical(base)) : json(nullptr)}}},
          {"decisions", decisions},
          {"rules", rules}};
}

json EvalProblem::study_inputs() const {
  json j = {{"model", opt_.in.model},   {"cluster", opt_.in.cluster}, {"trace", L_.trace_spec},
            {"requests", L_.trace.requests.size()}, {"offline", so_.offline},
            {"routing", L_.routing ? L_.routing_spec : ""},
            {"slo", opt_.in.slo},       {"seed", opt_.in.seed},       {"fidelity", opt_.fidelity},
            {"objective", opt_.objective}, {"space", opt_.space},     {"base", opt_.base},
            {"samples", opt_.samples},  {"exact", opt_.in.exact},     {"options", opt_.given}};
  if (load_given(opt_.in)) j["load"] = load_to_json(opt_.in);
  if (opt_.in.routed_tokens >= 0) j["routed_tokens"] = opt_.in.routed_tokens;
  return j;
}

ResolvedPlan EvalProblem::resolve_plan(Plan plan, std::string text) const {
  ResolvedPlan r;
  r.plan = std::move(plan);
  r.text = std::move(text);
  Genes g;
  if (!space_->encode(r.plan, g)) return r;
  r.in_space = true;
  r.genes = space_->canonical(g);
  r.key = space_->key(r.genes);
  json given = plan_to_json(r.plan), decoded = plan_to_json(space_->decode(r.genes));
  given.erase("name"), decoded.erase("name");
  r.exact = given == decoded;
  return r;
}

ResolvedPlan EvalProblem::resolve(const json& plan) const {
  ResolvedPlan r;
  const SearchSpace& s = *space_;
  Genes g;
  if (plan.is_string()) {
    const std::string text = plan.get<std::string>();
    return resolve_plan(load_plan(text, L_.model, *L_.cluster), text);
  } else if (plan.is_object()) {
    if (!s.encode(s.base(), g)) g.assign(static_cast<std::size_t>(s.num_decisions()), 0);  // base outside: first values
    for (auto it = plan.begin(); it != plan.end(); ++it) {
      int d = 0;
      while (d < s.num_decisions() && s.decisions()[static_cast<std::size_t>(d)].name != it.key()) ++d;
      if (d == s.num_decisions()) throw InputError("plan", "/" + it.key(), "not a decision of this space (see \"decisions\")");
      const auto& labels = s.decisions()[static_cast<std::size_t>(d)].labels;
      int v = -1;
      if (it->is_number_integer()) v = value_index(*it, labels.size());
      else if (it->is_string())
        for (std::size_t k = 0; k < labels.size(); ++k)
          if (labels[k] == it->get<std::string>()) v = static_cast<int>(k);
      if (v < 0 || v >= static_cast<int>(labels.size()))
        throw InputError("plan", "/" + it.key(), "expected one of its values or a value index below " + std::to_string(labels.size()) +
                                                     ", got " + it->dump());
      g[static_cast<std::size_t>(d)] = v;
    }
  } else if (plan.is_array()) {
    if (plan.size() != static_cast<std::size_t>(s.num_decisions()))
      throw InputError("plan", "", "a genome needs " + std::to_string(s.num_decisions()) + " values, got " + std::to_string(plan.size()));
    for (const auto& v : plan) {
      if (!v.is_number_integer()) throw InputError("plan", "/" + std::to_string(g.size()), "expected an integer value index");
      const auto& labels = s.decisions()[g.size()].labels;
      const int index = value_index(v, labels.size());
      if (index < 0)
        throw InputError("plan", "/" + std::to_string(g.size()),
                         "expected a value index below " + std::to_string(labels.size()) + ", got " + v.dump());
      g.push_back(index);
    }
    if (!s.in_range(g)) throw InputError("plan", "", "a value index is out of its decision's range");
  } else {
    throw InputError("plan", "", "expected a plan string, an object of decisions or an array of value indices");
  }
  r.in_space = r.exact = true;
  r.genes = s.canonical(g);
  r.key = s.key(r.genes);
  r.plan = s.decode(r.genes);
  r.text = plan_to_string(r.plan);
  return r;
}

namespace {

json metrics_json(const Metrics& m) {
  auto pct = [](const Percentiles& p) { return json{{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}}; };
  return {{"requests", m.requests},
          {"completed", m.completed},
          {"output_tok_s", m.output_tok_s},
          {"steady_output_tok_s", m.steady_output_tok_s},
          {"steady_output_tok_s_per_gpu", m.steady_output_tok_s_per_gpu},
          {"goodput_req_s", m.goodput_req_s},
          {"slo_attainment", m.slo_attainment},
          {"makespan_s", m.makespan_s},
          {"ttft_ms", pct(m.ttft_ms)},
          {"tpot_ms", pct(m.tpot_ms)},
          {"e2e_ms", pct(m.e2e_ms)}};
}

json violations_json(const PlanCheck& chk) {
  json v = json::array();
  for (const auto& x : chk.violations) v.push_back({{"field", x.field}, {"reason", x.reason}});
  return v;
}

}  // namespace

EvalProblem::Entry EvalProblem::compute(const ResolvedPlan& p) const {
  Entry e;
  const bool keyed = p.in_space && p.exact;
  const PlanCheck chk = keyed ? space_->check(p.genes) : check_plan(p.plan, L_.model, *L_.cluster);
  json j = {{"plan", p.text}, {"key", keyed ? json(p.key) : json(nullptr)}, {"unit", evaluator_->objective_unit()}};
  j["violations"] = violations_json(chk);
  if (!chk.feasible()) {
    e.eval = Evaluation{infeasible_score(chk), {}};
  } else {
    Metrics m;
    try {
      e.eval = evaluator_->evaluate_reporting(p.plan, &m);
      j["metrics"] = metrics_json(m);
    } catch (const std::exception& ex) {  // as the search's cache records a throwing evaluation
      e.eval.score.failed = true;
      e.eval.score.reason = ex.what();
    }
    if (!e.eval.score.feasible && !e.eval.score.failed)  // memory or SLO: the evaluator's reason
      j["violations"].push_back({{"field", e.eval.score.reason.substr(0, e.eval.score.reason.find(':'))},
                                 {"reason", e.eval.score.reason.substr(e.eval.score.reason.find(':') + 1)}});
  }
  const Score& s = e.eval.score;
  j["feasible"] = s.feasible;
  j["objective"] = s.feasible ? s.objective : 0.0;
  j["violation"] = s.violation;
  j["failed"] = s.failed;
  j["reason"] = s.reason;
  j["faults"] = {{"simgrid_steps", e.eval.faults.sampled}, {"failed_samples", e.eval.faults.failed}, {"error", e.eval.faults.error}};
  e.result = std::move(j);
  return e;
}

json EvalProblem::score_resolved(const ResolvedPlan& p, Evaluation* eval) const {
  const std::string key = p.in_space && p.exact ? p.key : "text:" + plan_to_json(p.plan).dump();
  std::shared_future<Entry> f;
  bool mine = false;
  std::promise<Entry> promise;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      f = promise.get_future().share();
      cache_.emplace(key, f);
      mine = true;
    } else {
      f = it->second;
    }
  }
  if (mine) {
    try {
      promise.set_value(compute(p));
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard<std::mutex> lock(mu_);
      cache_.erase(key);
    }
  }
  const Entry& e = f.get();
  if (eval) *eval = e.eval;
  json j = e.result;
  j["plan"] = p.text;
  j["cached"] = !mine;
  return j;
}

json EvalProblem::score(const json& plan) const { return score_resolved(resolve(plan)); }

std::vector<json> EvalProblem::score_many(const json& plans, int threads) const {
  std::vector<json> out(plans.size());
  tbb::task_arena arena(threads > 0 ? threads : tbb::task_arena::automatic);
  arena.execute([&] {
    tbb::parallel_for(std::size_t{0}, plans.size(), [&](std::size_t i) {
      try {
        out[i] = score(plans[i]);
      } catch (const InputError& e) {
        out[i] = {{"error", {{"source", e.source()}, {"field", "/plans/" + std::to_string(i) + e.field()}, {"message", e.what()}}}};
      }
    });
  });
  return out;
}

std::unique_ptr<EvalStudyApi> EvalProblem::study(long budget) const { return std::make_unique<EvalStudy>(*this, budget); }

json EvalProblem::simulate(const json& plan) const {
  const auto t0 = std::chrono::steady_clock::now();
  const ResolvedPlan p = resolve(plan);
  const PlanCheck chk = check_plan(p.plan, L_.model, *L_.cluster);
  if (!chk.feasible())
    throw InputError(p.text, chk.violations.front().field, "infeasible plan: " + chk.violations.front().reason + " (see 'shardsim plan check')");
  ServingOptions so = so_;
  so.link_traffic = true;  // as `shardsim simulate`: the report's "links" section
  FidelityReport fr;
  ServingResult r = serve_at_fidelity(opt_.tier, p.plan, L_.model, *L_.cluster, opt_.in.cluster, L_.trace, L_.routing.get(), so,
                                      runner_.get(), fr, opt_.samples);
  Metrics m = summarize(r, so, L_.cluster->num_gpus());
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  SimInputs in = opt_.in;
  in.offline = so_.offline;
  RunInputs ri{in.model, in.cluster, p.text, L_.trace_spec, L_.routing ? L_.routing_spec : "", opt_.fidelity,
               in.requests, in.offline, in.seed, load_to_json(in)};
  return simulate_result_json(ri, p.plan, *L_.cluster, r, m, so, wall, fr);
}

ProblemOpener problem_opener(WorkerPool* pool) {
  return [pool](const json& options) -> std::unique_ptr<EvalProblemApi> { return std::make_unique<EvalProblem>(options, pool); };
}

}  // namespace shardsim
