// optimizers/algorithms/optimizer.hpp — the ask/tell interface every optimizer implements, the one wrapper
// that enforces budgets, and the registry of optimizers by name.
//
// Owns:
//  * Optimizer — a plain class: ask(n) proposes up to n genomes, tell() receives their scores in
//    the same order. An optimizer is deterministic given its seed and the scores it is told; it
//    must not look at clocks or thread counts (so results do not depend on them).
//  * OptimizerParams — "name.key=value" settings from the command line; each optimizer reads its
//    own keys with checked getters and the factory refuses keys nobody read.
//  * BudgetedOptimizer — owns one optimizer (docs/architecture.md, Conventions: one owner per rule): it is the only place that caps asks at
//    the remaining budget, checks proposed genomes are in range, canonicalises them, checks that
//    tell() answers the last ask, counts evaluations and keeps the best-so-far curve.
//  * make_optimizer / optimizer_names — the registry (optimizers/algorithms/registry.cpp, one line each).
// Budget accounting: every genome an optimizer asks to be scored costs one evaluation, whether or
// not the shared evaluation cache already had its score (the cache saves time, never budget).
// Thread-safety: an optimizer and its BudgetedOptimizer are used by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optimizers/space/score.hpp"
#include "optimizers/space/search_space.hpp"

namespace shardsim {

struct Evaluated {
  Genes genes;
  Score score;
};

// Settings for optimizers, "ga.population=64" → params["ga"]["population"] = "64".
class OptimizerParams {
 public:
  // Parses a comma list "ga.population=64,sa.restart=0.1". Throws InputError(source, item, reason).
  static OptimizerParams parse(const std::string& text, const std::string& source);
  void set(const std::string& optimizer, const std::string& key, const std::string& value);
  // Checked getters: the value of `optimizer.key` or `fallback`; throw InputError naming the key
  // and the value when it is not a number in [lo, hi].
  double real(const std::string& optimizer, const std::string& key, double fallback, double lo, double hi) const;
  long integer(const std::string& optimizer, const std::string& key, long fallback, long lo, long hi) const;
  std::string text(const std::string& optimizer, const std::string& key, const std::string& fallback) const;
  // Keys of `optimizer` never read by a getter (a typo): the factory refuses them.
  std::vector<std::string> unread(const std::string& optimizer) const;
  bool has(const std::string& optimizer) const { return values_.count(optimizer) != 0; }

 private:
  std::map<std::string, std::map<std::string, std::string>> values_;
  mutable std::map<std::string, std::map<std::string, bool>> read_;
};

// What every optimizer is built from.
struct OptimizerContext {
  const SearchSpace* space = nullptr;
  std::uint64_t seed = 1;
  long budget = 0;                       // evaluations this run may spend
  std::vector<Genes> portfolio;          // the Megatron rule plans, encoded (may be empty)
  const OptimizerParams* params = nullptr;

  // The optimizer's settings: params' checked getters, or the fallback when params is null.
  long integer(const std::string& optimizer, const std::string& key, long fallback, long lo, long hi) const {
    return params ? params->integer(optimizer, key, fallback, lo, hi) : fallback;
  }
  double real(const std::string& optimizer, const std::string& key, double fallback, double lo, double hi) const {
    return params ? params->real(optimizer, key, fallback, lo, hi) : fallback;
  }
  std::string text(const std::string& optimizer, const std::string& key, const std::string& fallback) const {
    return params ? params->text(optimizer, key, fallback) : fallback;
  }
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Up to `n` (≥ 1) genomes to score next, each in range. Empty = nothing more to propose.
  virtual std::vector<Genes> ask(int n) = 0;
  // The scores of the last ask's genomes, in order (genes as canonicalised by the wrapper).
  virtual void tell(const std::vector<Evaluated>& results) = 0;
  // How many genomes this optimizer likes to have scored at once (a GA generation, …).
  virtual int batch_size() const { return 1; }
  // Learned state worth keeping after the run (the RL policy as text); empty when none.
  virtual std::string state() const { return {}; }
};

class BudgetedOptimizer {
 public:
  BudgetedOptimizer(std::string name, std::unique_ptr<Optimizer> opt, const SearchSpace& space, long budget);
  const std::string& name() const { return name_; }
  long budget() const { return budget_; }
  long used() const { return used_; }
  bool done() const { return done_ || used_ >= budget_; }
  // Asks for the next batch (≤ batch_size, ≤ remaining budget), canonicalised. Empty when done.
  std::vector<Genes> ask();
  // Passes the batch's scores on (must match the last ask) and records them.
  void tell(const std::vector<Evaluated>& results);
  const Evaluated* best() const { return has_best_ ? &best_ : nullptr; }
  // Best feasible objective after each evaluation (0 until the first feasible plan).
  const std::vector<double>& anytime() const { return anytime_; }
  const Optimizer& optimizer() const { return *opt_; }

 private:
  std::string name_;
  std::unique_ptr<Optimizer> opt_;
  const SearchSpace& space_;
  long budget_, used_ = 0;
  bool done_ = false;
  std::vector<Genes> pending_;
  Evaluated best_;
  bool has_best_ = false;
  std::vector<double> anytime_;
};

// The registered optimizer names, in registry order.
std::vector<std::string> optimizer_names();
// megatron and exhaustive: deterministic, one run whatever --seeds says, never a test's reference.
bool runs_once(const std::string& optimizer);
// Builds `name` (throws InputError("--optimizers", name, …) when unknown, or naming a bad
// parameter). Unread parameters of `name` are refused too.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const OptimizerContext& ctx);

// A seeded random source for optimizers (SplitMix64 under a stream derived from name and seed).
class Rng {
 public:
  Rng(const std::string& stream, std::uint64_t seed);
  std::uint64_t next();
  double uniform();                  // [0, 1)
  int below(int n);                  // [0, n), n ≥ 1
  double normal();

 private:
  std::uint64_t state_;
};

}  // namespace shardsim
