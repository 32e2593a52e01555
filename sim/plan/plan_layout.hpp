// sim/plan/plan_layout.hpp — where each rank of a plan sits on the cluster, and its communication groups.
//
// Owns: the rank mapping (mixed radix over tp, attn_dp, pp, dp in the plan's order, fastest first)
// and the groups derived from it. Inside a unit (one pipeline stage of one replica, tp × attn_dp
// GPUs) the unit-local index is u = tp_rank + tp · attn_dp_rank; MoE folds the same GPUs as
// ep × etp with etp_rank = u mod etp and ep_rank = u / etp (expert-TP groups are contiguous in u).
// Thread-safety: immutable value; safe to share.
#pragma once

#include <string>
#include <vector>

#include "sim/plan/plan.hpp"

namespace shardsim {

enum class GroupKind { Tp, AttnDp, Ep, Etp, Pp, Dp };
const char* to_string(GroupKind k);

struct RankCoord {
  int tp = 0, attn_dp = 0, pp = 0, dp = 0;
};

// Layers [first, last) of each pipeline stage: an even split, the remainder going one layer each
// to the middle stages (the first and last stages also carry the embedding and the LM head).
struct LayerRange {
  int first = 0, last = 0;
  int size() const { return last - first; }
};
std::vector<LayerRange> stage_layers(int layers, int pp);

class PlanLayout {
 public:
  explicit PlanLayout(const Plan& plan);

  // GPU id of a coordinate; coordinate of a GPU id (requires first_gpu ≤ gpu < first_gpu + degrees.gpus()).
  // GPU ids are the cluster's: a plan's ranks start at Plan::first_gpu.
  int gpu(const RankCoord& c) const;
  RankCoord coord(int gpu) const;
  int unit_index(const RankCoord& c) const { return c.tp + deg_.tp * c.attn_dp; }
  int ep_rank(const RankCoord& c) const { return unit_index(c) / deg_.etp; }
  int etp_rank(const RankCoord& c) const { return unit_index(c) % deg_.etp; }

  // All groups of one kind, each a list of GPU ids in rank order; groups ordered by their first
  // GPU's coordinates. Pp groups list the stages of one pipeline in stage order.
  std::vector<std::vector<int>> groups(GroupKind kind) const;
  // The GPUs of one unit (stage `pp` of replica `dp`) in unit-local order u.
  std::vector<int> unit(int pp, int dp) const;
  // The GPUs of replica `dp` in rank order: stage by stage, unit order inside (a step program's ranks).
  std::vector<int> replica(int dp) const;

  const Degrees& degrees() const { return deg_; }

 private:
  Degrees deg_;
  std::array<MapDim, 4> order_;
  std::array<int, 4> stride_{};  // indexed by MapDim
  int first_ = 0;                // Plan::first_gpu
};

}  // namespace shardsim
