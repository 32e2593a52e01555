// studies/eval_study.cpp — outside runs recorded with their budget; the report through run_search.
#include "studies/eval_study.hpp"

#include <sstream>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "common/display_text.hpp"
#include "common/input_error.hpp"
#include "optimizers/search/search_driver.hpp"
#include "optimizers/report/search_report.hpp"
#include "studies/search_runs.hpp"

namespace shardsim {

namespace {

constexpr const char* kStudySource = "study";

bool is_builtin(const std::string& name) {
  const auto names = optimizer_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The problem as the driver's evaluator: built-in runs share the problem's cache with the
// outside runs (a plan an outside optimizer scored is not simulated again).
class ProblemEvaluator : public Evaluator {
 public:
  explicit ProblemEvaluator(const EvalProblem& p) : p_(p) {}
  Score evaluate(const Plan& plan) const override { return evaluate_detailed(plan).score; }
  Evaluation evaluate_detailed(const Plan& plan) const override {
    Evaluation e;
    p_.score_resolved(p_.resolve_plan(plan, plan_to_string(plan)), &e);
    return e;
  }
  ThreadSafety thread_safety() const override { return ThreadSafety::Constant; }
  std::string objective_unit() const override { return p_.evaluator().objective_unit(); }

 private:
  const EvalProblem& p_;
};

}  // namespace

EvalStudy::EvalStudy(const EvalProblem& problem, long budget) : problem_(problem), budget_(budget) {
  if (budget < 1 || budget > 10'000'000) throw InputError(kStudySource, "/budget", "expected 1 … 10,000,000 evaluations per run");
}

ResolvedPlan EvalStudy::resolve_in_space(const json& plan, const std::string& field) const {
  ResolvedPlan p;
  try {
    p = problem_.resolve(plan);
  } catch (const InputError& e) {
    if (field.empty()) throw;
    throw InputError(e.source(), field + e.field(), e.reason());
  }
  if (!p.in_space)
    throw InputError("plan", field, p.text + " lies outside the study's search space (" + to_string(problem_.space().options()) +
                                        "): a study's plans are decisions of its space");
  // A study scores the space's plan of these decisions (what fields the space does not search
  // are its base plan's), so its runs replay like built-in ones.
  return p.exact ? p : problem_.resolve(json(p.genes));
}

long EvalStudy::reserve(const std::string& optimizer, std::uint64_t seed, const std::vector<ResolvedPlan>& plans) {
  if (optimizer.empty()) throw InputError(kStudySource, "/optimizer", "an outside optimizer needs a name");
  if (const std::string why = name_problem(optimizer); !why.empty())
    throw InputError(kStudySource, "/optimizer", "an optimizer's name " + why);
  if (is_builtin(optimizer))
    throw InputError(kStudySource, "/optimizer", optimizer + " is a built-in optimizer: an outside optimizer needs another name");
  std::lock_guard<std::mutex> lock(mu_);
  OutsideRun& r = runs_[std::make_pair(optimizer, seed)];
  const long used = static_cast<long>(r.genes.size());
  if (used + static_cast<long>(plans.size()) > budget_)
    throw InputError(kStudySource, "/budget", optimizer + " seed " + std::to_string(seed) + " has " + std::to_string(budget_ - used) +
                                             " of its " + std::to_string(budget_) + " evaluations left, asked for " +
                                             std::to_string(plans.size()));
  for (const auto& p : plans) {  // in call order; the scores fill in as they come
    r.genes.push_back(p.genes);
    r.evals.emplace_back();
  }
  return used + 1;
}

json EvalStudy::fill(const std::string& optimizer, std::uint64_t seed, long n, const ResolvedPlan& p) {
  Evaluation e;
  json j = problem_.score_resolved(p, &e);
  {
    std::lock_guard<std::mutex> lock(mu_);
    runs_[std::make_pair(optimizer, seed)].evals[static_cast<std::size_t>(n - 1)] = e;
  }
  j["evaluation"] = n;
  j["remaining"] = budget_ - n;
  return j;
}

json EvalStudy::evaluate(const std::string& optimizer, std::uint64_t seed, const json& plan) {
  const std::vector<ResolvedPlan> p = {resolve_in_space(plan, "")};
  const long n = reserve(optimizer, seed, p);
  return fill(optimizer, seed, n, p.front());
}

std::vector<json> EvalStudy::evaluate_many(const std::string& optimizer, std::uint64_t seed, const json& plans, int threads) {
  std::vector<ResolvedPlan> p;
  for (std::size_t i = 0; i < plans.size(); ++i) p.push_back(resolve_in_space(plans[i], "/plans/" + std::to_string(i)));
  const long first = reserve(optimizer, seed, p);
  std::vector<json> out(p.size());
  tbb::task_arena arena(threads > 0 ? threads : tbb::task_arena::automatic);
  arena.execute([&] {
    tbb::parallel_for(std::size_t{0}, p.size(), [&](std::size_t i) { out[i] = fill(optimizer, seed, first + static_cast<long>(i), p[i]); });
  });
  return out;
}

json EvalStudy::report(const StudyReportOptions& o) const {
  if (o.out.empty()) throw InputError(kStudySource, "/out", "a study folder is required");
  const SearchSpace& space = problem_.space();
  std::vector<std::string> names = split_list(o.optimizers);
  for (const auto& n : names)
    if (!is_builtin(n)) throw InputError(kStudySource, "/optimizers", n + " is not a built-in optimizer (outside runs join by their evaluations)");
  std::vector<SearchRun> runs = make_runs(names, problem_.rules(), space, parse_seeds(o.seeds));
  std::vector<std::vector<ReplayEval>> replay(runs.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, r] : runs_) {  // by (name, seed): the same report whatever order they were scored in
      runs.push_back({id.first, id.second, budget_, r.genes});
      std::vector<ReplayEval> rp;
      for (std::size_t k = 0; k < r.genes.size(); ++k) rp.push_back({space.key(r.genes[k]), r.evals[k], 0});
      replay.push_back(std::move(rp));
    }
  }
  if (runs.empty()) throw InputError(kStudySource, "/optimizers", "nothing to report: no outside evaluations and no built-in optimizer");
  if (!o.reference.empty()) {
    bool found = false;
    for (const auto& r : runs) found = found || (r.optimizer == o.reference && r.optimizer != "megatron" && r.optimizer != "exhaustive");
    if (!found) throw InputError(kStudySource, "/reference", o.reference + " is not a stochastic or outside optimizer of this report");
  }
  SearchSettings settings;
  settings.budget = budget_;
  settings.threads = std::max(1, o.threads);
  for (const auto& r : problem_.rules()) settings.portfolio.push_back(r.genes);
  OptimizerParams params;
  settings.params = &params;
  settings.replay = &replay;
  settings.replay_source = kStudySource;
  const ProblemEvaluator evaluator(problem_);
  SearchOutcome out = run_search(space, evaluator, runs, settings);
  out.replayed = 0;  // the outside runs' scores, not a resumed journal
  const SearchReport rep = summarize_search(out, problem_.rules(), space, o.reference, problem_.options().in.seed);
  const LoadedInputs& L = problem_.inputs();
  const std::string unit = problem_.evaluator().objective_unit();
  const std::string title = "shardsim study: " + L.model.name + " on " + L.cluster->name() + " (" + std::to_string(L.cluster->num_gpus()) +
                            " GPUs), " + std::to_string(L.trace.requests.size()) + " requests" +
                            (problem_.serving().offline ? " offline" : "") + ", " + problem_.options().fidelity + " fidelity";
  const std::string md = summary_markdown(rep, out, space, problem_.rules(), unit, title, budget_);
  json inputs = problem_.study_inputs();
  inputs["budget"] = budget_;
  inputs["optimizers"] = o.optimizers;
  inputs["seeds"] = seeds_json(o.seeds);
  json outside = json::array();
  for (const auto& r : runs)
    if (!r.script.empty()) outside.push_back({{"optimizer", r.optimizer}, {"seed", r.seed}, {"evaluations", r.script.size()}});
  inputs["outside_runs"] = outside;
  const bool plotted = write_study_outputs(o.out, inputs, rep, out, space, unit, md, budget_, o.log_evals);
  json files = {"results.json", "anytime.csv", "summary.md", "anytime.gp"};
  if (plotted) files.push_back("anytime.png");
  if (rep.best_known > 0) files.push_back("best-plan.json");
  return {{"summary", md},          {"out", o.out},         {"files", files},
          {"evaluations", out.evaluations}, {"simulated", out.computed}, {"best_known", rep.best_known},
          {"megatron_best", rep.megatron_best}};
}

}  // namespace shardsim
