// sim/serving/step_costs.hpp — what a serving step costs on the fast path: memoised by shape,
// interpolated from executed steps with its own attention, or executed.
//
// Owns: StepCosts (one per replica; the cache behind it is shared by the replicas of one cost
// class and by the simgrid tier's two passes) and StepCache. A step's shape is, per attention
// group, its decode tokens, prefill tokens and context tokens, summarised by their sums and
// maxima over groups plus the tokens it emits, each in ~2^(1/b) buckets (exact up to 2b; b =
// ServingOptions::shape_buckets_per_octave). A step whose bucketed shape was seen reuses that
// timing. Otherwise one mechanism serves both kinds of step it interpolates: context reaches a
// step's cost only through its attention, and the attention of any batch is priced exactly and
// cheaply (an AttentionEstimator: Lowering::price_attention, what lower_attention run by the executor gives, no routing), so
// an executed step of the same *family* stands for the new one once its attention is swapped for
// the new step's. A decode-only step's family is the same bucketed decode tokens, largest
// group's decode tokens and emitted tokens; its timing is the family's mean over at least five
// executed steps (each a routing sample), attention swapped — or, before it has five, the line
// in decode tokens through its own and its neighbouring batch sizes' samples (two buckets either
// way) once they bracket it (10% slack) and pin its rest to 0.5% standard error — or, failing
// both, the precise local fit (MixedFit, as below, without its steady-line clause, within 25% of
// its tokens) of all the
// executed decode-only steps of its cost class near it, in its decode tokens and those outside its
// largest group: a batch that shrinks or hovers (a drain, a paced run below saturation) visits a
// new family almost every step, most of all under attention-DP, where the largest group moves
// on its own. A step with prompt chunks
// (about one per arriving request, and the costliest to execute; beside decode tokens or alone)
// is fitted from the executed steps of its kind near it in tokens (MixedFit, step_fit.hpp).
// Every other step is executed. Thread-safety: one StepCosts per thread; a shared StepCache is not
// synchronised (serve() runs replicas one after the other).
#pragma once

#include <array>
#include <functional>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "sim/serving/step_fit.hpp"
#include "sim/step/executor.hpp"

namespace shardsim {

struct ReplicaBatch;

// Prices a batch's attention the way the executor prices it inside a whole step.
using AttentionEstimator = std::function<AttentionCost(const ReplicaBatch&)>;

// The executed decode-only steps of one family: their mean timing and mean attention.
struct CostFamily {
  StepTiming mean;
  AttentionCost attention;
  long count = 0;
  double at = 0;                  // mean decode tokens of those steps
  double rest_m2 = 0;             // Σ squared deviations of their rest from its mean
  double rest() const { return count > 0 ? mean.makespan - attention.critical : 0; }  // mean makespan less critical attention
};

// A step's bucketed shape: decode, prefill and context tokens summed and maximised over groups,
// the tokens emitted, and the cost class.
using ShapeKey = std::array<int, 8>;
// A decode family: bucketed decode tokens, the largest group's, the tokens emitted, the cost class.
using FamilyKey = std::array<int, 4>;

// A shape key's hash (FNV-1a over its buckets): the cache is looked up once a step.
struct ShapeKeyHash {
  std::size_t operator()(const ShapeKey& k) const {
    std::uint64_t h = 14695981039346656037ULL;
    for (int x : k) h = (h ^ static_cast<std::uint32_t>(x)) * 1099511628211ULL;
    return static_cast<std::size_t>(h);
  }
};

struct StepCache {
  std::unordered_map<ShapeKey, StepTiming, ShapeKeyHash> by_shape;  // bucketed shape → timing
  std::map<FamilyKey, CostFamily> families;  // decode family → its executed steps
  MixedFit mixed;                                    // executed mixed steps, by stratum
  MixedFit decode{false, 1.25};                      // executed decode-only steps, by cost class (precise fits within ±25%)
};

class StepCosts {
 public:
  // `buckets_per_octave` ≤ 0 memoises nothing (every step executed); `interpolate` = false keeps
  // memoisation but executes every new decode shape, `interpolate_mixed` = false every new mixed
  // one; without an `attention` estimator nothing is interpolated.
  StepCosts(int buckets_per_octave, bool interpolate, bool interpolate_mixed, int cost_class, StepCache& cache,
            AttentionEstimator attention = {});

  // The timing of `batch`: memoised, interpolated or `execute()`d.
  StepTiming timing(const ReplicaBatch& batch, const std::function<StepTiming()>& execute);

  // Whether steps are memoised at all (buckets_per_octave > 0).
  bool memoises() const { return b_ > 0; }
  // The bucketed shape key of sums and maxima over groups of (decode, prefill, context) tokens and
  // the tokens emitted (REQUIRES: memoises()); the key of the last step timed.
  ShapeKey key(const double* sums, const double* maxs, int emits) const;
  const ShapeKey& last_key() const { return last_key_; }
  long interpolated() const { return interpolated_; }
  long interpolated_mixed() const { return interpolated_mixed_; }

 private:
  StepTiming mixed(const ReplicaBatch& batch, const ShapeKey& key, const std::function<StepTiming()>& execute);
  bool from_neighbours(const FamilyKey& family, double tokens, const ReplicaBatch& batch, StepTiming& out) const;

  int b_;
  bool interpolate_;
  bool interpolate_mixed_;
  int cost_class_;
  std::vector<int> decode_stratum_;  // the decode fit's stratum: the cost class
  StepCache& cache_;
  AttentionEstimator attention_;
  ShapeKey last_key_{};
  long interpolated_ = 0;
  long interpolated_mixed_ = 0;
};

}  // namespace shardsim
