// optimizers/algorithms/scripted_optimizer.hpp — an outside optimizer's run, replayed: the plans it proposed,
// in the order it proposed them (issue 16: Optuna, a user's own method in Python, a client of
// `shardsim serve-evaluator`).
//
// Owns: ScriptedOptimizer. It asks the script's plans one at a time and stops at its end, so the
// TBB driver (optimizers/search/search_driver) treats an outside run exactly like a built-in one: the
// same budget accounting, anytime curve, cache, journal and report. It learns nothing from tell().
// A SearchRun with a non-empty `script` is built as one (its optimizer name must not be a
// registered one: search_driver refuses that, so "ga" always means the built-in GA).
// Thread-safety: one thread at a time (Optimizer contract).
#pragma once

#include <vector>

#include "optimizers/algorithms/optimizer.hpp"

namespace shardsim {

class ScriptedOptimizer : public Optimizer {
 public:
  explicit ScriptedOptimizer(std::vector<Genes> script) : script_(std::move(script)) {}
  std::vector<Genes> ask(int n) override;
  void tell(const std::vector<Evaluated>&) override {}

 private:
  std::vector<Genes> script_;
  std::size_t next_ = 0;
};

}  // namespace shardsim
