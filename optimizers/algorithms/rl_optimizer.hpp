// optimizers/algorithms/rl_optimizer.hpp — the RL optimizers "rl" and "rl-noattn" (issue 6): a policy that
// attends over an elite history and decodes plans decision by decision (optimizers/algorithms/rl_policy),
// trained by policy gradient on the evaluator's reward.
//
// Owns: RlOptimizer (and RlNoAttnOptimizer, the same without attention — the ablation).
//  * Elite history: the top-K distinct plans told so far (key = SearchSpace::key), ranked by Deb's
//    rules (better(), ties by key), with at most `per_degree` entries sharing one degree block;
//    failed evaluations never enter it. Each ask samples against a snapshot of it.
//  * ask: first the Megatron portfolio (ctx.portfolio, when seed_portfolio = 1), then plans sampled
//    from the policy under decision_mask. Never the same plan twice in a run: a sample that repeats
//    a proposed plan is redrawn at a temperature rising by 0.25 per redraw (`retries` times: when
//    π has settled on known plans it is flattened, which is where its exploration comes from);
//    then it is drawn at that last temperature without replacement from the PlanTrie of proposed
//    plans. The loss scores every sample under π at temperature 1 with the masks it was drawn
//    under. An ask returns fewer plans (none) once every plan reachable under the masks was
//    proposed.
//  * Screening: the decision masks keep samples inside the space's divisibility rules, but not
//    every rule can be checked decision by decision (a TP group crossing nodes depends on the
//    mapping; memory on the whole plan). Up to `screen` samples per ask that check_plan refuses
//    are screened out before they are proposed: they cost no budget, are never proposed again,
//    and still teach the policy (they join the next update with their infeasible reward).
//  * Reward of a score (unitless, in [−1, 1]): feasible → objective / best feasible objective seen
//    so far (this batch included); infeasible → −0.2 − 0.8·min(1, violation); failed → −1.
//  * tell: one update per batch of ≥ 2 sampled plans. Policy-gradient weights: the batch's rewards
//    shaped (`shaping` rank: their ranks in the batch, ties halved; zscore: the rewards), minus a
//    baseline (the batch mean when risk = 1; the (1 − risk) quantile when risk < 1, and only the
//    samples at or above it learn — risk-seeking), over their standard deviation, over the batch
//    size; or, with baseline = critic, per decision the reward less the PrefixCritic's expected
//    reward given the decisions before it (rl_critic.hpp; fitted on the samples of earlier
//    batches, the batch mean until 2 batches are in), over the rewards' standard deviation, over
//    the batch size (shaping and risk then do not apply, and are refused if given); entropy bonus `entropy` per decision
//    (over the batch size); self-imitation of the elites whose reward beats the batch mean,
//    weight imitate · (r − mean)/sd shared among them; one Adam step (`lr`). Portfolio plans and
//    local moves only feed the elite history.
// Parameters (under the optimizer's own name, "rl." or "rl-noattn."): elite 16, per_degree 3,
//   batch 16, lr 0.05, entropy 0.05, dim 16, seed_portfolio 1, shaping rank, risk 1, imitate 0.5,
//   retries 20, screen 64, copy 1 (initial β of a fresh policy: how strongly it copies the elites' choices),
//   baseline batch (or critic), critic_history 256 (samples the critic is fitted on),
//   local auto (share of proposals that are local moves: one of the top three elites with
//   local_free 1 decisions redrawn from π given the rest; they feed the elites, not the policy
//   gradient; a repeat is redrawn from the anchor's untried neighbours). auto: 0.25 when
//   the budget is under 1% of the space's distinct plans, else 0 — measured in docs/rl.md,
//   policy_in "" (a saved policy to start from: its dim wins, a different explicit dim
//   is refused; entries the space needs and the file lacks are initialised from the seed).
// Determinism: proposals depend only on ctx.seed (streams "rl"/"rl-noattn" and the policy's
//   initialisation) and the scores told.
// Thread-safety: one thread at a time (Optimizer contract).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "optimizers/algorithms/optimizer.hpp"
#include "optimizers/algorithms/rl_critic.hpp"
#include "optimizers/algorithms/rl_policy.hpp"

namespace shardsim {

class RlOptimizer : public Optimizer {
 public:
  explicit RlOptimizer(const OptimizerContext& ctx) : RlOptimizer(ctx, "rl", true) {}
  std::vector<Genes> ask(int n) override;
  void tell(const std::vector<Evaluated>& results) override;
  int batch_size() const override { return batch_; }
  std::string state() const override { return policy_.save(); }

  const RlPolicy& policy() const { return policy_; }
  // The mean reward of each policy-gradient batch's samples, in order.
  const std::vector<double>& mean_rewards() const { return mean_rewards_; }
  // Sampled plans check_plan refused before they were proposed (they cost no budget), so far.
  long screened() const { return screened_total_; }
  // The share of proposals that are local moves (rl.local, or what auto chose).
  double local_share() const { return local_; }
  // The elite history, best first, and as the policy sees it now.
  std::vector<Evaluated> elites() const;
  std::vector<EliteToken> elite_tokens() const;

 protected:
  RlOptimizer(const OptimizerContext& ctx, const std::string& name, bool attention);

 private:
  struct Elite {
    Genes genes;
    Score score;
    std::string key, degrees;  // canonical key; key of the degree-block genes
  };
  struct Pending {
    Episode episode;       // the sampled genome and its masks
    bool sampled = false;  // false for a portfolio plan and a local move
  };
  double reward(const Score& s) const;
  void learn(const std::vector<Episode>& samples, const std::vector<double>& rewards);
  void update_elites(const std::vector<Evaluated>& results);

  // Fixed after construction.
  const SearchSpace& space_;
  std::string name_;
  int elite_size_, per_degree_, batch_, retries_, screen_;
  double entropy_, risk_, imitate_;
  bool rank_shaping_;
  bool seed_portfolio_;
  double local_ = 0;
  int local_free_ = 1;
  // One of the top three elites with `local_free_` decisions freed (−1), for a local move.
  Genes local_anchor();
  std::vector<Genes> portfolio_;  // distinct, in the given order
  // Learning state.
  RlPolicy policy_;
  Adam adam_;
  Rng rng_;
  std::size_t next_portfolio_ = 0;
  std::set<std::string> proposed_;  // keys of every genome proposed
  PlanTrie trie_;                   // the same genomes, for sampling without replacement
  std::vector<Elite> elites_;
  double best_objective_ = 0;
  std::vector<Pending> pending_;
  std::vector<std::pair<Episode, Score>> screened_;  // this ask's samples check_plan refused
  long screened_total_ = 0;
  std::vector<EliteToken> pending_tokens_;  // the elite snapshot the pending samples were drawn with
  std::vector<double> mean_rewards_;
  std::unique_ptr<PrefixCritic> critic_;  // rl.baseline=critic
};

class RlNoAttnOptimizer final : public RlOptimizer {
 public:
  explicit RlNoAttnOptimizer(const OptimizerContext& ctx) : RlOptimizer(ctx, "rl-noattn", false) {}
};

}  // namespace shardsim
