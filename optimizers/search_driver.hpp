// optimizers/search_driver.hpp — runs several optimizer runs concurrently on one evaluator (TBB).
//
// Owns: run_search(). Every (optimizer, seed) run is one task of a tbb::task_group inside a
// task_arena of `threads` threads; each run loops ask → score the batch in parallel
// (tbb::parallel_for; through the shared EvalCache; a None-thread-safe evaluator is serialised
// by a mutex) → tell, until its budget is spent or it has nothing more to propose. Optimizers are
// built before any task starts, so bad parameters fail early and nothing runs.
// Determinism: a run's proposals depend only on its seed and the scores it is told; scores depend
// only on the plan; so best plans and anytime curves are the same for any thread count. Only
// wall times and the split of cache hits between runs vary.
// Thread-safety: run_search is called from one thread; it owns all the parallelism.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optimizers/evaluator.hpp"
#include "optimizers/optimizer.hpp"

namespace shardsim {

struct SearchRun {
  std::string optimizer;
  std::uint64_t seed = 1;
  long budget = 0;                   // 0 = the settings' budget
};

struct RunRecord {
  std::string optimizer;
  std::uint64_t seed = 1;
  long evaluations = 0;              // budget spent
  long cache_hits = 0;               // of those, scores taken from the cache
  bool has_best = false;
  Evaluated best;                    // best under Deb's rules
  std::vector<double> anytime;       // best feasible objective after each evaluation (0 = none yet)
  std::vector<Evaluated> history;    // every evaluation in order (genes canonical)
  double wall_s = 0;                 // from the run's first ask to its last tell
  std::string state;                 // the optimizer's learned state (RL policy), if any
};

struct SearchSettings {
  long budget = 100;                 // evaluations per run
  int threads = 1;                   // TBB threads (≥ 1)
  std::vector<Genes> portfolio;      // Megatron rule plans, encoded
  const OptimizerParams* params = nullptr;
};

struct SearchOutcome {
  std::vector<RunRecord> runs;       // in the order of the `runs` argument
  long evaluations = 0, computed = 0, cache_hits = 0;
  double wall_s = 0;
};

// Called after every told batch (from worker threads, serialised): run index, its record so far.
using ProgressFn = std::function<void(std::size_t run, const RunRecord& record)>;

SearchOutcome run_search(const SearchSpace& space, const Evaluator& evaluator, const std::vector<SearchRun>& runs,
                         const SearchSettings& settings, const ProgressFn& progress = {});

}  // namespace shardsim
