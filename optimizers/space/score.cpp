// optimizers/space/score.cpp — Deb's rules and the violation measure.
#include "optimizers/space/score.hpp"

#include <algorithm>

#include "sim/plan/plan_check.hpp"

namespace shardsim {

bool better(const Score& a, const Score& b) {
  if (a.feasible != b.feasible) return a.feasible;
  if (a.feasible) return a.objective > b.objective;
  return a.violation < b.violation;
}

Score infeasible_score(const PlanCheck& check) {
  Score s;
  s.feasible = false;
  for (const auto& v : check.violations) {
    if (v.field == "/memory" && check.memory_valid && check.memory.usable > 0)
      s.violation += std::max(0.0, -check.memory.headroom) / check.memory.usable;
    else
      s.violation += 1;
  }
  if (s.violation <= 0) s.violation = 1e-9;
  if (!check.violations.empty()) s.reason = check.violations.front().field + ": " + check.violations.front().reason;
  return s;
}

}  // namespace shardsim
