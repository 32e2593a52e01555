// optimizers/space/evaluator.hpp — how the search scores a plan, and the shared evaluation cache.
//
// Owns:
//  * Evaluator — the scorer interface: plan in, Score out, plus its declared thread-safety
//    (docs/architecture.md, Conventions): Constant = one instance may be called from many threads at once; None = the
//    driver calls it from one thread at a time. evaluate_detailed() adds the faults met on the
//    way (EvalFaults: SimGrid samples that failed and fell back), which the search reports.
//  * EvalCache — evaluations by canonical plan key, shared by every optimizer run of a search. A key
//    being computed by one thread is waited for, not computed twice. Hits are counted (a hit still
//    costs the asking optimizer one evaluation of its budget: see optimizers/algorithms/optimizer.hpp).
// Thread-safety: EvalCache is safe for concurrent use.
#pragma once

#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <unordered_map>

#include "optimizers/space/score.hpp"
#include "sim/plan/plan.hpp"

namespace shardsim {

enum class ThreadSafety { None, Constant };

// Faults one evaluation met without failing: SimGrid samples (sim/simgrid/fidelity.hpp
// FidelityReport) whose failure made their strata fall back to another sample or to ratio 1.
struct EvalFaults {
  long sampled = 0;             // steps executed in SimGrid
  long failed = 0;              // of those, failed (worker died, error)
  std::string error;            // the first failure message
};

// A score and the faults met computing it.
struct Evaluation {
  Score score;
  EvalFaults faults;
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual Score evaluate(const Plan& plan) const = 0;
  // The score with its faults; by default evaluate() and none.
  virtual Evaluation evaluate_detailed(const Plan& plan) const { return Evaluation{evaluate(plan), {}}; }
  virtual ThreadSafety thread_safety() const = 0;
  // What the objective is, for reports ("output tok/s", "goodput req/s").
  virtual std::string objective_unit() const = 0;
};

class EvalCache {
 public:
  // The evaluation of `key`, computing it with `compute` unless cached (or in flight elsewhere).
  // Sets `hit` when this call did not compute. A throwing `compute` gives a failed score.
  Evaluation get(const std::string& key, const std::function<Evaluation()>& compute, bool& hit);
  long hits() const;
  long misses() const;
  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_future<Evaluation>> map_;
  long hits_ = 0, misses_ = 0;
};

}  // namespace shardsim
