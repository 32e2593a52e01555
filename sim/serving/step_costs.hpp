// sim/serving/step_costs.hpp — what a serving step costs on the fast path: memoised by shape,
// interpolated along context, or executed.
//
// Owns: StepCosts (one per replica; the cache behind it may be shared by the replicas of one cost
// class and by the simgrid tier's two passes) and StepCache. A step's shape is, per attention
// group, its decode tokens, prefill tokens and context tokens, summarised by their sums and
// maxima over groups plus the tokens it emits, each in ~2^(1/b) buckets (exact up to 2b; b =
// ServingOptions::shape_buckets_per_octave). A step whose bucketed shape was seen reuses that
// timing. A decode-only step of a new shape is timed from the executed steps of its family — the
// same bucketed decode tokens, largest group's decode tokens and emitted tokens — once the family
// has three: a decode step's context enters its cost only through the attention's KV reads,
// linear in the context (sim/step/compute_cost.hpp). The attention on its critical path — the
// longest group's, which does not depend on the other groups — is the line, in the longest
// group's context, through the two executed decode steps with as many tokens in their largest
// group (of any batch size) nearest it (bracketing it
// within an octave, or both on one side at least 25% apart and it within an octave of the
// nearer, or the family's ends when it is within a quarter of their span beyond them); its
// attention per GPU the same line in the context in all; and the rest — what each
// step's routing sample decided — is the family's mean. A step that mixes
// decode tokens with prompt chunks (about one per arriving request, and the costliest to execute)
// of a new shape is timed from the executed mixed steps of its family — the same chunks, emitting
// chunks and groups holding them, their unevenness over those groups (4 buckets per octave), the
// octave of the decode context and of the chunks' context, and the decode sequences' share of
// the tokens (25 buckets) — along its tokens in all: a step with as many tokens, or the line
// through the two bracketing it at most 2× apart, its attention on the same two steps' line in
// attention work (a fresh chunk's grows as its square). Every other step is executed. Thread-safety: one StepCosts per thread; a shared StepCache is not
// synchronised (serve() runs replicas one after the other).
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "sim/step/executor.hpp"

namespace shardsim {

struct ReplicaBatch;

// An executed mixed step of a family, at its place along the family's axis (its tokens), its
// attention work (Σ new tokens × (context + half of them), over the sequences of the groups
// holding chunks, and over all) and its timing.
struct CostAnchor {
  double at = 0;
  double work_beside = 0, work_all = 0;
  StepTiming timing;
};

// Points (x, y) sorted by x: one of the lines a family's attention is read from.
using CostLine = std::vector<std::pair<double, double>>;

// The executed decode-only steps of one family: their attention per GPU against the context in
// all, their mean timing and mean context. (Their critical attention joins the line of all decode
// steps with as many tokens in their largest group: StepCache::longest.)
struct CostFamily {
  CostLine busy;
  StepTiming mean;
  double mean_context = 0;
  long count = 0;
};

struct StepCache {
  std::map<std::vector<int>, StepTiming> by_shape;   // bucketed shape (+ cost class) → timing
  std::map<std::vector<int>, CostFamily> families;   // decode family → its executed steps
  // (bucketed decode tokens of the largest group, cost class) → critical attention of executed
  // decode steps against the longest group's context, whatever the batch's size
  std::map<std::vector<int>, CostLine> longest;
  std::map<std::vector<int>, std::vector<CostAnchor>> mixed;  // mixed family → its executed steps, by tokens
};

class StepCosts {
 public:
  // `buckets_per_octave` ≤ 0 memoises nothing (every step executed); `interpolate` = false keeps
  // memoisation but executes every new decode shape, `interpolate_mixed` = false every new mixed one.
  StepCosts(int buckets_per_octave, bool interpolate, bool interpolate_mixed, int cost_class, StepCache& cache);

  // The timing of `batch`: memoised, interpolated or `execute()`d. `fresh` executes regardless
  // (timeline steps) but still records the result.
  StepTiming timing(const ReplicaBatch& batch, const std::function<StepTiming()>& execute, bool fresh = false);

  // The bucketed shape key of sums and maxima over groups of (decode, prefill, context) tokens and
  // the tokens emitted; the key of the last step timed (empty = no memoisation).
  std::vector<int> key(const double* sums, const double* maxs, int emits) const;
  const std::vector<int>& last_key() const { return last_key_; }
  long interpolated() const { return interpolated_; }
  long interpolated_mixed() const { return interpolated_mixed_; }

 private:
  bool interpolate_into(const std::vector<int>& family, const std::vector<int>& line, double context_sum,
                        double context_max, StepTiming& out) const;
  StepTiming mixed(const ReplicaBatch& batch, std::vector<int> key, const std::function<StepTiming()>& execute);
  bool from_mixed_family(const std::vector<int>& family, const CostAnchor& at, StepTiming& out) const;

  int b_;
  bool interpolate_;
  bool interpolate_mixed_;
  int cost_class_;
  StepCache& cache_;
  std::vector<int> last_key_;
  long interpolated_ = 0;
  long interpolated_mixed_ = 0;
};


}  // namespace shardsim
