// optimizers/algorithms/annealing.hpp — "sa": simulated annealing over the search space's genes
// (docs/references.md §C.1, §C.3).
//
// Owns: AnnealingOptimizer. One current point walks the space:
//   start        the Megatron portfolio (sa.seed_portfolio; each distinct plan proposed once, the
//                evaluations count toward the budget) and the best of it under Deb's rules, else
//                one random repaired genome;
//   each ask     up to sa.batch neighbours of the current point, then Metropolis over them
//                sequentially, in order, as their scores are told. A neighbour is one move, then
//                repair: (a) one Factor gene to another dimension (a prime factor moves between
//                degrees), (b) one sharding gene to another choice, (c) the etp split ±1, (c') sp
//                toggled, (d) the mapping gene to another order or a batching gene ±1 — a kind
//                drawn uniformly among those the space has — or, with probability sa.macro, (e)
//                the whole degree block resampled. Neighbours equal to the current point or in the
//                tabu list (the last 50 keys proposed) are redrawn, up to 32 times.
//   acceptance   feasible → feasible: better or equal always; worse with probability
//                exp(−Δ / (T·|f_cur|)), Δ = f_cur − f_new (relative, so T is scale-free);
//                feasible → infeasible: with probability 0.02·T/T0; infeasible → anything not
//                worse under Deb's rules (smaller or equal violation, or feasible).
//   temperature  T_k = T0·(T_end/T0)^(k/K), k = evaluations told, K = ctx.budget,
//                T_end = 1e-3·T0. T0 = sa.t0, or ("auto") the T at which 80% of the worsening
//                moves seen so far would be accepted (mean of exp(−d_i/T) = 0.8 over their relative
//                changes d_i), fixed after 8 samples or 10% of the budget; until then worsening
//                moves are accepted with probability 0.8.
//   restart      after sa.restart × budget evaluations without a new best, the walk resumes at the
//                best point so far.
// Parameters (ctx.params, "sa.key=value"; bad values throw InputError naming key and value):
//   batch 4 [1, 256] · macro 0.05 [0, 1] · restart 0.1 [0.001, 1] · t0 auto (or a number in
//   [1e-9, 1e9]) · seed_portfolio 1 {0, 1}.
// Invariants: proposed genomes are repaired (canonical) and in range; ask(n) returns at most n
// genomes and never returns empty. Deterministic given ctx.seed and the scores told (one Rng
// stream "sa"; no clocks).
// Thread-safety: one thread at a time (Optimizer contract).
#pragma once

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "optimizers/algorithms/optimizer.hpp"

namespace shardsim {

class AnnealingOptimizer : public Optimizer {
 public:
  explicit AnnealingOptimizer(const OptimizerContext& ctx);
  std::vector<Genes> ask(int n) override;
  void tell(const std::vector<Evaluated>& results) override;
  // The portfolio still to propose while seeding, then sa.batch.
  int batch_size() const override;

 private:
  Genes neighbour();
  Genes move(const Genes& from);
  void step_gene(Genes& g, int i);
  void other_value(Genes& g, int i);
  bool accept(const Score& cand);
  double temperature() const;
  void remember(const std::string& key);
  bool tabu(const std::string& key) const { return tabu_count_.count(key) != 0; }

  // Fixed after construction.
  const SearchSpace& space_;
  long budget_;
  int batch_;
  double macro_, restart_, t0_param_;  // t0_param_ 0 = auto
  std::vector<int> factor_genes_, shard_genes_, tune_genes_, degree_genes_;
  std::vector<int> etp_genes_, sp_genes_;  // one of each per pool

  Rng rng_;
  std::vector<Genes> seeds_;          // portfolio plans still to propose
  std::size_t next_seed_ = 0;
  bool started_ = false;              // a current point exists
  Evaluated current_, best_;
  long evaluations_ = 0, since_best_ = 0;
  double t0_ = 0;                     // 0 until estimated (or set)
  std::vector<double> worsening_;     // relative worsening deltas seen while estimating T0
  std::deque<std::string> tabu_;
  std::map<std::string, int> tabu_count_;
};

}  // namespace shardsim
