// optimizers/algorithms/genetic.hpp — "ga": a genetic algorithm over the search space's genes
// (docs/references.md §C.1–C.2).
//
// Owns: GeneticOptimizer. The genome is the SearchSpace's Genes; a population of P scored,
// pairwise distinct genomes evolves generation by generation:
//   first generation  the Megatron portfolio (ga.seed_portfolio, at most P of it, proposed as given),
//                     then random genomes, each repaired, until P distinct plans;
//   each generation   P − elite offspring: two parents by tournament (k members drawn with
//                     replacement, best under Deb's rules), crossover with probability
//                     ga.crossover — block crossover on the degree block (the whole block of one
//                     parent, or one-point on the factor genes with the etp split and sp from either
//                     parent) and uniform crossover on the other genes — then per-gene mutation
//                     (±1 for ordinal genes, another value uniformly for categorical ones), a rare
//                     macro mutation that resamples the whole degree block, and repair
//                     (Lamarckian: the repaired genome is the one proposed);
//   survivors         the `elite` best of the old population always stay; the other P − elite
//                     places go to the best of (rest of the old population ∪ offspring) under
//                     Deb's rules, at most ga.niche members per degree tuple (the degree-block
//                     genes); places the niche limit leaves empty go to the best skipped ones.
// Parameters (ctx.params, "ga.key=value"; bad values throw InputError naming key and value):
//   population 32 [4, 4096] · tournament 3 [2, 16] · elite 2 [0, P−1] · crossover 0.9 [0, 1] ·
//   mutation 1/num_decisions [0, 1] (per gene) · macro 0.05 [0, 1] · niche max(1, P/4) [1, P] ·
//   seed_portfolio 1 {0, 1}.
// Invariants: every proposed genome is in range and canonical; a run never proposes a plan (key)
// twice unless a few retries, stronger mutations and random draws all fail to find a new one;
// ask(n) returns at most n genomes (at most what the current generation still needs) and never
// returns empty, so the budget is what ends a run. Deterministic given ctx.seed and the scores told
// (one Rng stream "ga"; no clocks).
// Thread-safety: one thread at a time (Optimizer contract).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "optimizers/algorithms/optimizer.hpp"

namespace shardsim {

class GeneticOptimizer : public Optimizer {
 public:
  explicit GeneticOptimizer(const OptimizerContext& ctx);
  std::vector<Genes> ask(int n) override;
  void tell(const std::vector<Evaluated>& results) override;
  // P until the first generation is scored, then P − elite.
  int batch_size() const override;

 private:
  // Two tournament parents, crossover, mutation, macro mutation; not yet repaired.
  Genes make_offspring();
  const Evaluated& tournament();
  Genes crossover(const Genes& a, const Genes& b);
  void mutate(Genes& g, double rate);
  void mutate_gene(Genes& g, int i);
  void resample_degrees(Genes& g);
  // A repaired offspring whose key this run has not proposed yet (or, failing that, any).
  Genes novel_offspring();
  // `out` = repair(raw); false when its key was proposed already (then `out` may be unrepaired).
  bool repaired_if_new(const Genes& raw, Genes& out) const;
  std::string degree_key(const Genes& g) const;
  void select_survivors(std::vector<Evaluated> offspring);

  // Fixed after construction.
  const SearchSpace& space_;
  int population_, tournament_, elite_, niche_;
  double crossover_, mutation_, macro_;
  std::vector<int> degree_genes_, factor_genes_, degree_other_genes_, other_genes_;

  Rng rng_;
  std::vector<Genes> initial_;          // the first generation, proposed in order
  std::size_t next_initial_ = 0;
  std::vector<Evaluated> members_;      // the population; best first once evolving_
  bool evolving_ = false;               // the whole first generation has been scored
  std::set<std::string> proposed_;      // keys of every genome this run has proposed
};

}  // namespace shardsim
