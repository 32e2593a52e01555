// optimizers/algorithms/rl_critic.hpp — the RL optimizer's learned baseline: how much reward to expect once
// the first d decisions of a plan are made (`rl.baseline=critic`, docs/rl.md).
//
// Owns: PrefixCritic. A state value per decision, additive in the choices made so far:
//   V_d(g) = c_d + Σ_{j<d} θ_j[g_j]
// (c_d one intercept per decision, θ_j one weight per value of decision j), fitted by ridge least
// squares on the (decision, reward) rows of the last `history` sampled plans — so V_0 is the mean
// reward of recent samples and V_d moves with the choices that have been made. Subtracting V_d
// from a sample's reward gives each decision its own advantage: a decision taken after the plan's
// fate was already sealed by earlier ones gets little credit or blame. The baseline depends only
// on earlier decisions, so the policy gradient stays unbiased; it is refitted after each batch
// from the samples before it. Rewards are stored as scores and re-read through the caller's
// reward function at each fit (the reward is relative to the best objective so far, which moves).
// Determinism: a pure function of the samples added, in order. Thread-safety: one thread at a time.
#pragma once

#include <functional>
#include <vector>

#include "optimizers/algorithms/optimizer.hpp"

namespace shardsim {

class PrefixCritic {
 public:
  // values[j]: how many values decision j has. `history` samples are kept; `ridge` is the L2
  // penalty on θ (the intercepts are not penalised).
  PrefixCritic(std::vector<int> values, int history, double ridge);

  void add(const Genes& genes, const Score& score);
  // Refits on the kept samples with their current rewards; false (and unfitted) below `min_samples`.
  bool fit(const std::function<double(const Score&)>& reward, int min_samples);
  bool fitted() const { return fitted_; }
  // V_d for every decision d of `genes`. REQUIRES: fitted().
  std::vector<double> values(const Genes& genes) const;

 private:
  std::vector<int> offset_;  // first θ index of each decision; θ after the n intercepts
  int n_ = 0, params_ = 0;
  std::size_t history_;
  double ridge_;
  std::vector<std::pair<Genes, Score>> kept_;  // oldest first
  std::vector<double> w_;                       // [c_0 … c_{n−1}, θ]
  bool fitted_ = false;
};

}  // namespace shardsim
