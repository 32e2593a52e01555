// optimizers/search/search_driver.hpp — runs several optimizer runs concurrently on one evaluator (TBB).
//
// Owns: run_search() and its records (RunRecord, SearchOutcome, FaultTally; ReplayEval and
// ScoredEval, what the journal reads and writes). Every (optimizer, seed) run is one task of a
// tbb::task_group inside a task_arena of `threads` threads; each run loops ask → score the batch in parallel
// (tbb::parallel_for; through the shared EvalCache; a None-thread-safe evaluator is serialised
// by a mutex) → tell, until its budget is spent or it has nothing more to propose. Optimizers are
// built before any task starts, so bad parameters fail early and nothing runs.
// Determinism: a run's proposals depend only on its seed and the scores it is told; scores depend
// only on the plan; so best plans and anytime curves are the same for any thread count. Only
// wall times and the split of cache hits between runs vary.
// Resuming (settings.replay): a run's journaled evaluations are handed to it in place of scoring,
// through the same ask/tell loop, so its batches, state and records evolve exactly as they did;
// a proposal that differs from the journal is refused. Stopping (settings.stop): polled at every
// batch boundary; a stopped run keeps what it was told and is marked incomplete.
// Thread-safety: run_search is called from one thread; it owns all the parallelism.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "optimizers/space/evaluator.hpp"
#include "optimizers/algorithms/optimizer.hpp"

namespace shardsim {

struct SearchRun {
  SearchRun() = default;
  SearchRun(std::string optimizer_name, std::uint64_t run_seed, long run_budget, std::vector<Genes> run_script = {})
      : optimizer(std::move(optimizer_name)), seed(run_seed), budget(run_budget), script(std::move(run_script)) {}
  std::string optimizer;
  std::uint64_t seed = 1;
  long budget = 0;                   // 0 = the settings' budget
  // Non-empty: an outside optimizer's run, these plans in order (optimizers/algorithms/scripted_optimizer).
  std::vector<Genes> script;
};

// Faults over evaluations: failed scores and SimGrid samples that failed and fell back.
struct FaultTally {
  long failed_evaluations = 0;       // scores with failed = true (the evaluator threw)
  long degraded_evaluations = 0;     // evaluations with ≥ 1 failed SimGrid sample
  long sampled_steps = 0, failed_samples = 0;
  std::vector<std::string> errors;   // the first few distinct messages
  long worker_restarts = 0;          // SimGrid worker processes restarted (set by the caller, per session)
  void add(const Evaluation& e);
};

// One evaluation of a resumed study as its journal recorded it.
struct ReplayEval {
  std::string key;                   // canonical plan key
  Evaluation eval;
  long line = 0;                     // journal line, for errors
};

// A newly scored evaluation (for the journal).
struct ScoredEval {
  std::size_t run = 0;
  long index = 0;                    // 1-based evaluation number within its run
  Genes genes;                       // canonical
  std::string key;
  Evaluation eval;
};

using BatchFn = std::function<void(const std::vector<ScoredEval>& batch)>;

struct RunRecord {
  std::string optimizer;
  std::uint64_t seed = 1;
  long evaluations = 0;              // budget spent
  long cache_hits = 0;               // of those, scores taken from the cache
  bool has_best = false;
  Evaluated best;                    // best under Deb's rules
  std::vector<double> anytime;       // best feasible objective after each evaluation (0 = none yet)
  std::vector<Evaluated> history;    // every evaluation in order (genes canonical)
  std::vector<EvalFaults> faults;    // parallel to history
  FaultTally tally;                  // over this run's evaluations (cache hits included)
  bool complete = true;              // false when stopped before its budget was spent
  double wall_s = 0;                 // from the run's first ask to its last tell
  std::string state;                 // the optimizer's learned state (RL policy), if any
};

struct SearchSettings {
  long budget = 100;                 // evaluations per run
  int threads = 1;                   // TBB threads (≥ 1)
  std::vector<Genes> portfolio;      // Megatron rule plans, encoded
  const OptimizerParams* params = nullptr;
  // Called once the optimizers are built, before anything is scored (e.g. to start a journal).
  std::function<void()> on_start;
  // Called with every newly scored batch before it is told (serialised; replayed ones excluded).
  BatchFn on_batch;
  // Polled from worker threads at every batch boundary; true = stop (must be thread-safe).
  std::function<bool()> stop;
  // Evaluations of a resumed study, per run in order (null = a fresh study); replay_source
  // names their journal in errors.
  const std::vector<std::vector<ReplayEval>>* replay = nullptr;
  std::string replay_source;
};

struct SearchOutcome {
  std::vector<RunRecord> runs;       // in the order of the `runs` argument
  long evaluations = 0, computed = 0, cache_hits = 0;
  long replayed = 0;                 // evaluations taken from settings.replay
  FaultTally faults;                 // over distinct plans, in run and evaluation order
  bool complete = true;              // every run spent its budget or ran out of proposals
  std::string note;                  // why not complete, and how to resume (set by the caller)
  double wall_s = 0;
};

// Called after every told batch (from worker threads, serialised): run index, its record so far.
using ProgressFn = std::function<void(std::size_t run, const RunRecord& record)>;

// Throws InputError(replay_source, "line N", …) when a replayed run diverges from its journal.
SearchOutcome run_search(const SearchSpace& space, const Evaluator& evaluator, const std::vector<SearchRun>& runs,
                         const SearchSettings& settings, const ProgressFn& progress = {});

}  // namespace shardsim
