// sim/step/expert_layout.hpp — where each routed expert lives on a stage's EP ranks, and which
// replica serves a token's copy.
//
// Owns: ExpertLayout. Without redundant experts, expert x is in slot x and slot s on EP rank
// ⌊s / (E/ep)⌋: contiguous blocks, as vLLM and SGLang place them. With N redundant slots
// (Plan::redundant_experts, EPLB), each MoE layer gets its own layout from measured loads:
//   1. replicate: the N extra replicas go one at a time to the expert with the highest load per
//      replica (at most ep replicas of one expert, one per rank);
//   2. pack: the E + N replicas, heaviest first, each go to the least-loaded EP rank that has a
//      free slot and does not hold that expert yet ((E + N) / ep slots per rank).
// That is the idea of DeepSeek's EPLB (replicate the hot experts, then balance the packing); the
// code is our own. A token's copy for an expert goes to replica (token index mod replicas): an
// even split. Loads are measured by routing a fixed sample (measure_expert_loads), so a layout is
// a pure function of (routing, ep, N).
// Thread-safety: immutable after construction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace shardsim {

class RoutingSource;

// Tokens per expert at each MoE layer ([layer][expert]) over a fixed sample of the routing:
// kSampleRequests requests from `first_request` on × kSampleTokens tokens from position 0.
struct MeasuredLoads {
  static constexpr int kSampleRequests = 64;
  static constexpr int kSampleTokens = 32;
  std::vector<std::vector<double>> per_layer;
  long tokens = 0;
};
MeasuredLoads measure_expert_loads(const RoutingSource& routing, std::uint32_t first_request = 0);
// The requests a layout is judged on: a sample disjoint from the one it was fitted to.
constexpr std::uint32_t kHeldOutRequests = 1u << 20;

class ExpertLayout {
 public:
  // Contiguous blocks, no replicas (every layer the same).
  ExpertLayout(int experts, int ep);
  // EPLB: `redundant` extra slots (experts + redundant a multiple of ep), placed per layer from `loads`.
  ExpertLayout(const MeasuredLoads& loads, int ep, int redundant);
  // EP-rank load max/mean under `loads` (mean over layers), each expert's load split evenly over
  // its replicas: {with contiguous placement, with this layout}.
  std::pair<double, double> imbalance(const MeasuredLoads& loads) const;
  // Records what imbalance() says on a held-out sample (the figures the report shows).
  void judge(const MeasuredLoads& held_out);

  int ep() const { return ep_; }
  int slots() const { return slots_; }                  // experts + redundant
  int slots_per_rank() const { return slots_ / ep_; }
  bool balanced() const { return !replicas_.empty(); }
  // The slot serving expert x's copy of token t at MoE layer l.
  int slot_of(int moe_layer, int expert, long token) const {
    if (replicas_.empty()) return expert;
    const auto& r = replicas_[static_cast<std::size_t>(moe_layer)][static_cast<std::size_t>(expert)];
    return r[static_cast<std::size_t>(token % static_cast<long>(r.size()))];
  }
  // How many slots hold expert x at MoE layer l; slot_of(l, x, i) for i below it names each once.
  int replicas(int moe_layer, int expert) const {
    if (replicas_.empty()) return 1;
    return static_cast<int>(replicas_[static_cast<std::size_t>(moe_layer)][static_cast<std::size_t>(expert)].size());
  }
  int rank_of_slot(int slot) const { return rank_of_[static_cast<std::size_t>(slot)]; }

  // Rank load max/mean of the held-out sample (judge()), mean over layers: contiguous vs this layout.
  double imbalance_before() const { return before_; }
  double imbalance_after() const { return after_; }
  long sample_tokens() const { return sample_tokens_; }

 private:
  void index_ranks();  // fills rank_of_ from ep_ and slots_
  int ep_ = 1, slots_ = 0;
  std::vector<int> rank_of_;  // per slot: its EP rank (looked up per routed pick)
  // Per MoE layer, per expert: the slots holding it (empty = contiguous, no replicas).
  std::vector<std::vector<std::vector<int>>> replicas_;
  double before_ = 1, after_ = 1;
  long sample_tokens_ = 0;
};

}  // namespace shardsim
