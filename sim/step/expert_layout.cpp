// sim/step/expert_layout.cpp — contiguous and EPLB expert layouts, and the load sample they use.
#include "sim/step/expert_layout.hpp"

#include <numeric>
#include <queue>
#include <span>
#include <tuple>

#include "workloads/routing_trace.hpp"

namespace shardsim {

MeasuredLoads measure_expert_loads(const RoutingSource& routing, std::uint32_t first_request) {
  const RoutingShape& shape = routing.shape();
  ExpertLoad load(shape);
  std::vector<ExpertId> ids(static_cast<std::size_t>(MeasuredLoads::kSampleTokens) * shape.moe_layers * shape.top_k);
  for (std::uint32_t r = first_request; r < first_request + static_cast<std::uint32_t>(MeasuredLoads::kSampleRequests); ++r) {
    routing.route_tokens(r, 0, MeasuredLoads::kSampleTokens, ids);
    load.add(ids);
  }
  MeasuredLoads out;
  out.tokens = static_cast<long>(load.tokens());
  for (int l = 0; l < shape.moe_layers; ++l) {
    auto c = load.layer(l);
    out.per_layer.emplace_back(c.begin(), c.end());
  }
  return out;
}

ExpertLayout::ExpertLayout(int experts, int ep) : ep_(std::max(1, ep)), slots_(experts) { index_ranks(); }

void ExpertLayout::index_ranks() {
  rank_of_.resize(static_cast<std::size_t>(std::max(0, slots_)));
  for (int s = 0; s < slots_; ++s) rank_of_[static_cast<std::size_t>(s)] = std::min(ep_ - 1, s / std::max(1, slots_ / ep_));
}

namespace {

// Max/mean of per-rank loads (1 when there is no load).
double ratio(const std::vector<double>& rank_load) {
  const double total = std::accumulate(rank_load.begin(), rank_load.end(), 0.0);
  if (total <= 0) return 1;
  return *std::max_element(rank_load.begin(), rank_load.end()) * static_cast<double>(rank_load.size()) / total;
}

// Step 1: replicas per expert, each extra one to the highest load per replica (≤ ep each).
std::vector<int> replica_counts(const std::vector<double>& w, int extra, int ep) {
  std::vector<int> count(w.size(), 1);
  using Item = std::pair<double, int>;  // (load per replica, −expert): ties go to the lower expert
  std::priority_queue<Item> q;
  for (std::size_t x = 0; x < w.size(); ++x) q.push({w[x], -static_cast<int>(x)});
  while (extra > 0 && !q.empty()) {
    auto [per, neg] = q.top();
    q.pop();
    const auto x = static_cast<std::size_t>(-neg);
    if (count[x] >= ep) continue;
    ++count[x];
    --extra;
    q.push({w[x] / count[x], neg});
  }
  return count;
}

}  // namespace

ExpertLayout::ExpertLayout(const MeasuredLoads& loads, int ep, int redundant) : ep_(std::max(1, ep)) {
  const int layers = static_cast<int>(loads.per_layer.size());
  const int E = layers > 0 ? static_cast<int>(loads.per_layer.front().size()) : 0;
  slots_ = E + redundant;
  index_ranks();
  const int S = slots_ / ep_;
  replicas_.resize(static_cast<std::size_t>(layers));
  for (int l = 0; l < layers; ++l) {
    std::vector<double> w = loads.per_layer[static_cast<std::size_t>(l)];
    if (std::accumulate(w.begin(), w.end(), 0.0) <= 0) std::fill(w.begin(), w.end(), 1.0);
    const std::vector<int> count = replica_counts(w, redundant, ep_);
    // Step 2: heaviest replica first onto the least-loaded rank with room that lacks the expert.
    std::vector<std::pair<double, int>> reps;  // (load, expert)
    for (int x = 0; x < E; ++x)
      for (int c = 0; c < count[static_cast<std::size_t>(x)]; ++c) reps.push_back({w[static_cast<std::size_t>(x)] / count[static_cast<std::size_t>(x)], x});
    std::stable_sort(reps.begin(), reps.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<double> rank_load(static_cast<std::size_t>(ep_), 0.0);
    std::vector<int> used(static_cast<std::size_t>(ep_), 0);
    auto& layer = replicas_[static_cast<std::size_t>(l)];
    layer.assign(static_cast<std::size_t>(E), {});
    for (const auto& [load, x] : reps) {
      int best = -1;
      for (bool distinct : {true, false}) {
        for (int r = 0; r < ep_; ++r) {
          if (used[static_cast<std::size_t>(r)] >= S) continue;
          const auto& held = layer[static_cast<std::size_t>(x)];
          if (distinct && std::any_of(held.begin(), held.end(), [&](int slot) { return slot / S == r; })) continue;
          if (best < 0 || rank_load[static_cast<std::size_t>(r)] < rank_load[static_cast<std::size_t>(best)]) best = r;
        }
        if (best >= 0) break;
      }
      layer[static_cast<std::size_t>(x)].push_back(best * S + used[static_cast<std::size_t>(best)]++);
      rank_load[static_cast<std::size_t>(best)] += load;
    }
  }
}

std::pair<double, double> ExpertLayout::imbalance(const MeasuredLoads& loads) const {
  double before = 0, after = 0;
  const int layers = static_cast<int>(loads.per_layer.size());
  for (int l = 0; l < layers; ++l) {
    const auto& w = loads.per_layer[static_cast<std::size_t>(l)];
    const int E = static_cast<int>(w.size());
    std::vector<double> contiguous(static_cast<std::size_t>(ep_), 0.0), mine(static_cast<std::size_t>(ep_), 0.0);
    for (int x = 0; x < E; ++x) {
      contiguous[static_cast<std::size_t>(std::min(ep_ - 1, x * ep_ / std::max(1, E)))] += w[static_cast<std::size_t>(x)];
      if (replicas_.empty()) {
        mine[static_cast<std::size_t>(rank_of_slot(x))] += w[static_cast<std::size_t>(x)];
        continue;
      }
      const auto& reps = replicas_[static_cast<std::size_t>(l)][static_cast<std::size_t>(x)];
      for (int slot : reps) mine[static_cast<std::size_t>(rank_of_slot(slot))] += w[static_cast<std::size_t>(x)] / reps.size();
    }
    before += ratio(contiguous);
    after += ratio(mine);
  }
  return layers > 0 ? std::pair{before / layers, after / layers} : std::pair{1.0, 1.0};
}

void ExpertLayout::judge(const MeasuredLoads& held_out) {
  std::tie(before_, after_) = imbalance(held_out);
  sample_tokens_ = held_out.tokens;
}

}  // namespace shardsim
