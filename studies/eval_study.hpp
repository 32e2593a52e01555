// studies/eval_study.hpp — an outside optimizer's study on an EvalProblem: its evaluations
// counted against a budget, and its report beside the built-in optimizers' (issue 16).
//
// Owns: EvalStudy. An outside optimizer (any name that is not a built-in one) scores plans of
// the problem's space through evaluate(name, seed, plan); each costs one evaluation of that
// run's budget, cache hits included (as for built-in runs), and a run past its budget is refused.
// report() then runs the chosen built-in optimizers at the same budget, with the outside runs
// replayed in the same TBB driver as scripted runs (optimizers/algorithms/scripted_optimizer: their
// recorded scores, nothing simulated again), and writes the `shardsim search` output set
// (results.json, summary.md, anytime.csv/.gp/.png, best-plan.json) into a study folder: the
// outside optimizer is one more row of the same table and curve of the same plot.
// Thread-safety: evaluate() may be called from many threads (runs are locked); report() alone.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/json_reader.hpp"
#include "optimizers/space/evaluator.hpp"
#include "studies/eval_problem.hpp"

namespace shardsim {

class EvalStudy : public EvalStudyApi {
 public:
  EvalStudy(const EvalProblem& problem, long budget);
  long budget() const override { return budget_; }
  // The score of `plan` (EvalProblem::score's JSON) plus "evaluation" (1-based in its run) and
  // "remaining"; InputError when the run's budget is spent, the name is a built-in optimizer's or
  // the plan lies outside the space.
  json evaluate(const std::string& optimizer, std::uint64_t seed, const json& plan) override;
  // Several plans as consecutive evaluations of one run, scored in parallel on `threads` (0 = all
  // cores); all or nothing: a bad plan (InputError naming /plans/i) or too small a remaining
  // budget refuses the batch before anything is scored.
  std::vector<json> evaluate_many(const std::string& optimizer, std::uint64_t seed, const json& plans, int threads) override;
  // Runs and writes the comparison; returns {"summary": markdown, "out", "files", "evaluations", …}.
  json report(const StudyReportOptions& o) const override;

 private:
  struct OutsideRun {
    std::vector<Genes> genes;
    std::vector<Evaluation> evals;
  };
  // Reserves the next evaluations of the run for `plans` (resolved, in the space); returns the first number.
  long reserve(const std::string& optimizer, std::uint64_t seed, const std::vector<ResolvedPlan>& plans);
  ResolvedPlan resolve_in_space(const json& plan, const std::string& field) const;
  json fill(const std::string& optimizer, std::uint64_t seed, long n, const ResolvedPlan& p);

  const EvalProblem& problem_;
  long budget_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::uint64_t>, OutsideRun> runs_;
};

}  // namespace shardsim
