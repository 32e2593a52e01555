// optimizers/space/score.hpp — what one evaluation of a plan says, and how two scores compare.
//
// Owns: Score and Deb's feasibility rules (docs/references.md §C.2): a feasible plan beats an infeasible
// one; between infeasible plans the smaller violation wins; between feasible plans the larger
// objective wins. Objectives are maximised (output tokens/s, or goodput requests/s).
// Violation: 1 per structural violation (divisibility, products, groups across NVLink domains)
// plus the memory overflow as a fraction of usable HBM, so "over by 10%" ranks above "over by 50%"
// and both rank above a plan that breaks a divisibility rule.
// Thread-safety: value types and pure functions.
#pragma once

#include <string>

namespace shardsim {

struct PlanCheck;

struct Score {
  bool feasible = false;
  double objective = 0;     // valid when feasible; larger is better
  double violation = 0;     // > 0 when infeasible: how far the plan misses
  bool failed = false;      // the evaluator failed (e.g. a SimGrid worker died); ranks as infeasible
  std::string reason;       // the first violation or the failure, for logs
};

// True when `a` is strictly better than `b` under Deb's rules.
bool better(const Score& a, const Score& b);

// The infeasible score of a failed check_plan (requires !check.feasible()).
Score infeasible_score(const PlanCheck& check);

}  // namespace shardsim
