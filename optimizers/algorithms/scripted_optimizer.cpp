// optimizers/algorithms/scripted_optimizer.cpp — the script's next plans.
#include "optimizers/algorithms/scripted_optimizer.hpp"

#include <algorithm>

namespace shardsim {

std::vector<Genes> ScriptedOptimizer::ask(int n) {
  std::vector<Genes> out;
  while (static_cast<int>(out.size()) < n && next_ < script_.size()) out.push_back(script_[next_++]);
  return out;
}

}  // namespace shardsim
