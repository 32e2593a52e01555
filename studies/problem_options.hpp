// studies/problem_options.hpp — what a search problem is scored by beyond its inputs, declared once
// for `shardsim search` and the open evaluator: the tier, the objective and its SLO goal, the
// space searched and its base plan, SimGrid's samples, and whether the drain objectives keep the
// trace's arrival times.
//
// Owns: ProblemSettings and problem_option_decls().
#pragma once

#include <string>
#include <vector>

#include "studies/option_table.hpp"

namespace shardsim {

struct ProblemSettings {
  std::string fidelity = "analytic";  // analytic | simgrid | full
  std::string objective = "capacity";
  std::string goal = "p99";
  std::string space = "all";
  std::string base;  // the plan for everything not searched ("" = the model's defaults)
  int samples = 16;  // steps sampled into SimGrid per evaluation (simgrid tier)
  bool online = false;
};

// --fidelity --objective --goal --online --samples --space --base.
const std::vector<OptionDecl<ProblemSettings>>& problem_option_decls();

}  // namespace shardsim
