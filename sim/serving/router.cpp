// sim/serving/router.cpp — round-robin, least-loaded and cache-aware dispatch over replicas.
#include "sim/serving/router.hpp"

#include <algorithm>
#include <cstddef>

namespace shardsim {

Router::Router(Dispatch policy, int replicas, const RequestTrace& trace)
    : policy_(policy), replicas_(std::max(1, replicas)), trace_(trace),
      sent_(static_cast<std::size_t>(replicas_)), tree_tokens_(static_cast<std::size_t>(replicas_), 0.0) {}

namespace {

// The replica with the smallest value, ties going to the first in turn from `next`.
template <class T>
int smallest_in_turn(const std::vector<T>& value, int next) {
  const int n = static_cast<int>(value.size());
  int best = next;
  for (int k = 1; k < n; ++k) {
    const int r = (next + k) % n;
    if (value[static_cast<std::size_t>(r)] < value[static_cast<std::size_t>(best)]) best = r;
  }
  return best;
}

// How many of `q`'s leading prefix blocks cover its prompt (a synthetic conversation's ids also
// cover its answer, which the router never sees).
std::size_t prompt_blocks(const Request& q, int block_tokens) {
  return std::min(q.prefix_blocks.size(), static_cast<std::size_t>((q.prompt_tokens + block_tokens - 1) / block_tokens));
}

}  // namespace

int Router::least_loaded(const std::vector<int>& load) { return smallest_in_turn(load, next_); }

int Router::prefix_choice(int req, const std::vector<int>& load) {
  const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
  if (*hi - *lo > kBalanceAbs && *hi > kBalanceRel * *lo) return least_loaded(load);
  const Request& q = trace_.requests[static_cast<std::size_t>(req)];
  const int bt = trace_.prefix_block_tokens;
  const double prompt = std::max(1, q.prompt_tokens);
  if (bt > 0) {
    const std::size_t n = prompt_blocks(q, bt);
    int best = -1;
    std::size_t best_run = 0;
    for (int r = 0; r < replicas_; ++r) {
      std::size_t run = 0;
      while (run < n && sent_[static_cast<std::size_t>(r)].count(q.prefix_blocks[run])) ++run;
      if (run > best_run) best = r, best_run = run;
    }
    if (best >= 0 && std::min(1.0, static_cast<double>(best_run) * bt / prompt) > kCacheThreshold) return best;
  }
  return smallest_in_turn(tree_tokens_, next_);  // the smallest tree
}

int Router::route(int req, const std::vector<int>& load) {
  int rep = next_;
  switch (policy_) {
    case Dispatch::RoundRobin: break;
    case Dispatch::LeastLoaded: rep = least_loaded(load); break;
    case Dispatch::PrefixAffinity: rep = prefix_choice(req, load); break;
  }
  next_ = (rep + 1) % replicas_;
  if (policy_ == Dispatch::PrefixAffinity) {  // the chosen replica's tree takes the prompt
    const Request& q = trace_.requests[static_cast<std::size_t>(req)];
    const int bt = trace_.prefix_block_tokens;
    auto& sent = sent_[static_cast<std::size_t>(rep)];
    double fresh = std::max(1, q.prompt_tokens);
    if (bt > 0) {
      const std::size_t n = prompt_blocks(q, bt);
      for (std::size_t b = 0; b < n; ++b)
        if (!sent.insert(q.prefix_blocks[b]).second) fresh -= bt;  // already in the tree
      fresh = std::max(0.0, fresh);
    }
    tree_tokens_[static_cast<std::size_t>(rep)] += fresh;
  }
  return rep;
}

}  // namespace shardsim
