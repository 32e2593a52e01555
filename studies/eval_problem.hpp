// studies/eval_problem.hpp — one search problem opened for an outside optimizer (issue 16): the
// inputs `shardsim search` would load, its search space, and scoring of plans given as text,
// decision dicts or genomes, with results as JSON.
//
// Owns: EvalProblem. Options are a JSON object whose keys are `shardsim search`'s option names
// without the dashes ({"model": "deepseek-v3", "cluster": "dgx-h100:8", "requests": 300,
// "offline": true, "fidelity": "analytic", "objective": "capacity", "space": "degrees"}); they
// are read by the declarations `search` registers (sim_option_decls, problem_option_decls), so
// checks and error messages are the command's; the defaults too, but for the tier (analytic here). The throughput objectives replay offline unless
// "online" or a load is given, as in `search`.
// A plan is one of: a compact plan string or plan file ("tp=8,ep=8,dp=2", "megatron", "p.json");
// an object of decisions {"<decision name>": label or value index} (decisions not named keep the
// base plan's value, or their first value when the base plan lies outside the space); an array of gene values (one per decision). Plans inside the space are
// scored as the search scores them (check, then the evaluator, cached by canonical key); a plan
// text the space cannot express is scored on its own (key null).
// Scoring never throws for an infeasible plan: the result says "feasible": false with every
// violation ({field, reason}); a malformed plan is an InputError naming the field.
// Thread-safety: score() and simulate() may be called from many threads at once (the evaluator
// is Constant-safe; the cache is locked). Construct it before any thread if its tier needs the
// SimGrid worker pool (`pool`), which must outlive it.
#pragma once

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/json_reader.hpp"
#include "optimizers/space/megatron_portfolio.hpp"
#include "optimizers/space/search_space.hpp"
#include "optimizers/space/serving_evaluator.hpp"
#include "studies/eval_backend.hpp"
#include "studies/problem_options.hpp"
#include "studies/sim_inputs.hpp"

namespace shardsim {
class WorkerPool;
}

namespace shardsim {

struct ProblemOptions : ProblemSettings {
  SimInputs in;
  Tier tier = Tier::Analytic;   // `fidelity`, read by parse_problem_options
  json given = json::object();  // the options as given (what results.json records)
};

// Parses `options` (InputError("problem", "/<key>", reason) for an unknown key or a bad value).
ProblemOptions parse_problem_options(const json& options);

// A plan resolved against the space.
struct ResolvedPlan {
  Plan plan;
  std::string text;      // as given (text form) or the compact string of the decoded plan
  bool in_space = false; // the space has a genome for it (genes, key)
  bool exact = false;    // … which decodes to this very plan (else the space snaps fields it does not
                         // search, such as batching limits, to its base plan's)
  Genes genes;           // canonical, when in_space
  std::string key;       // canonical key, when in_space
};

class EvalProblem : public EvalProblemApi {
 public:
  // Loads everything (InputError for bad options or inputs). `pool` is needed unless the tier is analytic.
  EvalProblem(const json& options, WorkerPool* pool);
  ~EvalProblem() override;

  const ProblemOptions& options() const { return opt_; }
  const SearchSpace& space() const { return *space_; }
  const std::vector<RuleGenes>& rules() const { return rules_; }
  const ServingEvaluator& evaluator() const { return *evaluator_; }
  const LoadedInputs& inputs() const { return L_; }
  const ServingOptions& serving() const { return so_; }

  // The problem: inputs, objective, decisions with their values, the Megatron rule plans.
  json describe() const override;
  // What results.json records as the study's inputs.
  json study_inputs() const;

  ResolvedPlan resolve(const json& plan) const;
  // A plan already built (`text` names it): its genome, key and exactness in the space.
  ResolvedPlan resolve_plan(Plan plan, std::string text) const;
  // {"plan", "key", "feasible", "objective", "unit", "violation", "reason", "failed",
  //  "violations": [{field, reason}], "metrics": {...} (when it ran), "faults": {...}, "cached"}.
  json score(const json& plan) const override;
  // Scored in parallel on `threads` TBB threads (0 = all cores); each plan answers for itself.
  std::vector<json> score_many(const json& plans, int threads) const override;
  // The score of a resolved in-space plan, also as the search's Evaluation.
  json score_resolved(const ResolvedPlan& p, Evaluation* eval = nullptr) const;
  // The result JSON `shardsim simulate --json` writes for this plan and the problem's options.
  json simulate(const json& plan) const override;
  // An EvalStudy of this problem (studies/eval_study.hpp).
  std::unique_ptr<EvalStudyApi> study(long budget) const override;

 private:
  struct Entry {
    Evaluation eval;
    json result;
  };
  Entry compute(const ResolvedPlan& p) const;

  ProblemOptions opt_;
  LoadedInputs L_;
  ServingOptions so_;
  std::unique_ptr<SimgridRunner> runner_;
  std::unique_ptr<SearchSpace> space_;
  std::vector<RuleGenes> rules_;
  std::unique_ptr<ServingEvaluator> evaluator_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_future<Entry>> cache_;
};

// What EvalService opens problems with: EvalProblem on `pool` (null = analytic tier only).
ProblemOpener problem_opener(WorkerPool* pool);

}  // namespace shardsim
