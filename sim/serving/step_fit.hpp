// sim/serving/step_fit.hpp — step timings made from executed ones: weighted sums, the attention
// swapped, and the local linear fit that times a mixed step from executed mixed steps near it.
//
// Owns: weighted(), with_attention(), MixedFeatures, MixedFit. A step with prompt chunks (beside
// decode tokens or alone: a "mixed" step here) costs, apart from its core attention (priced
// exactly for every step and swapped in, StepCosts), what its tokens in all decide (experts,
// all-to-all sizes, GEMMs) and, under attention-DP, what the tokens of its largest group holding
// chunks decide (that group's projections and its share of the dispatch: the critical path runs
// through it). MixedFit keeps the executed mixed steps of each stratum (whether decode tokens are
// beside the chunks, cost class) and times a new step by
// weighted least squares of the rest (makespan less critical attention) in its tokens and in the
// tokens outside that group, over the nearest executed steps within 2× (`span`) of its tokens (at least
// four, a triangular kernel in log tokens). The timing is the fit's weights applied to every
// field of those steps' timings, attention swapped — once they bracket the step (10% slack) and
// the fit is either precise (standard error within 0.5% of the rest, from their scatter about
// it) or as steady as the line between two executed steps. Otherwise the step is executed and
// joins its stratum. Not thread-safe (one per StepCache).
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "sim/step/executor.hpp"

namespace shardsim {

// Σ wᵢ·tᵢ field by field (weights summing to 1; negative ones allowed for a fitted line), each
// field at least 0; kernels from the heaviest part.
StepTiming weighted(const std::vector<std::pair<const StepTiming*, double>>& parts);

// `t` (a step whose attention was `from`) with its attention replaced by `to`: the makespan and
// critical path move by the difference, the stages in proportion.
StepTiming with_attention(StepTiming t, const AttentionCost& from, const AttentionCost& to);

// What a mixed step's rest follows: its tokens in all, and the tokens of its largest group holding
// prompt chunks (decode tokens there included).
struct MixedFeatures {
  double tokens = 0, group_tokens = 0;
  double outside() const { return tokens - group_tokens; }  // tokens in the other groups
};

class MixedFit {
 public:
  // `steady_line`: a fit that is not precise may still stand when it is as steady as the line
  // between two executed steps (mixed steps); false: only a precise fit stands, from at least
  // three degrees of freedom (decode-only steps, whose families otherwise wait for five samples).
  // `span`: executed steps within this ratio of a step's tokens are its neighbours (a decode
  // step's rest is concave in its tokens — distinct experts saturate — so a line across a wide
  // span would run below it).
  explicit MixedFit(bool steady_line = true, double span = 2.0) : steady_line_(steady_line), span_(span) {}
  // The timing of a step of `stratum` with features `x` and attention `attention`, fitted from the
  // executed steps near it; false when they do not pin it (execute it and add() it).
  bool predict(const std::vector<int>& stratum, const MixedFeatures& x, const AttentionCost& attention,
               StepTiming& out) const;
  void add(const std::vector<int>& stratum, const MixedFeatures& x, const AttentionCost& attention,
           const StepTiming& timing);

 private:
  struct Anchor {
    MixedFeatures x;
    AttentionCost attention;
    StepTiming timing;
  };
  std::map<std::vector<int>, std::vector<Anchor>> strata_;  // each sorted by tokens
  bool steady_line_ = true;
  double span_ = 2.0;
};

}  // namespace shardsim
