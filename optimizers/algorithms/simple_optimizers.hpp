// optimizers/algorithms/simple_optimizers.hpp — the three optimizers with no search state worth a file each:
//   megatron    proposes the Megatron rule portfolio (optimizers/space/megatron_portfolio), then stops;
//               the best of those plans is *the* Megatron baseline.
//   random      uniform genomes (canonicalised), never the same canonical plan twice per run
//               (up to 50 redraws, then it accepts a repeat).
//   exhaustive  every canonical genome in a fixed order; refuses (InputError) when the space has
//               more canonical genomes than its budget or than exhaustive.limit (default
//               kExhaustiveLimit), saying the space size. Its budget is normally the space size.
// Thread-safety: one thread at a time (Optimizer contract).
#pragma once

#include <memory>
#include <set>
#include <string>

#include "optimizers/algorithms/optimizer.hpp"

namespace shardsim {

class MegatronOptimizer : public Optimizer {
 public:
  explicit MegatronOptimizer(const OptimizerContext& ctx);
  std::vector<Genes> ask(int n) override;
  void tell(const std::vector<Evaluated>&) override {}
  int batch_size() const override { return 8; }

 private:
  std::vector<Genes> plans_;
  std::size_t next_ = 0;
};

class RandomOptimizer : public Optimizer {
 public:
  explicit RandomOptimizer(const OptimizerContext& ctx);
  std::vector<Genes> ask(int n) override;
  void tell(const std::vector<Evaluated>&) override {}
  int batch_size() const override { return batch_; }

 private:
  const SearchSpace& space_;
  Rng rng_;
  int batch_;
  std::set<std::string> seen_;
};

inline constexpr long kExhaustiveLimit = 50'000;

class ExhaustiveOptimizer : public Optimizer {
 public:
  explicit ExhaustiveOptimizer(const OptimizerContext& ctx);
  std::vector<Genes> ask(int n) override;
  void tell(const std::vector<Evaluated>&) override {}
  int batch_size() const override { return 16; }

 private:
  std::vector<Genes> all_;
  std::size_t next_ = 0;
};

}  // namespace shardsim
