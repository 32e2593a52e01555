// sim/serving/router.hpp — the router in front of a plan's dp replicas: which replica an
// open-loop request goes to.
//
// Owns: Router. RoundRobin deals requests in turn and needs nothing else. LeastLoaded and
// PrefixAffinity read what a real router reads — the requests it has sent each replica that have
// not come back (`load`; SGLang's router counts them per worker, Worker::load()) — so serve()
// runs the replicas in lockstep, each advanced to the arrival before the router decides.
//   LeastLoaded     the replica with the fewest requests in flight ("shortest queue"); ties go to
//                   the next replica in turn, so an idle cluster is still dealt round-robin.
//   PrefixAffinity  SGLang's cache-aware policy (sgl-router src/policies/cache_aware.rs) with the
//                   defaults its launcher gives (RouterArgs, py_src/sglang_router/router_args.py):
//                   when the loads are imbalanced (max − min > 64 and max > 1.5 × min) the least
//                   loaded replica; otherwise the replica whose sent prompts share the longest
//                   leading run of this prompt's blocks when that covers more than 30% of it
//                   (cache_threshold 0.3), else the replica with the smallest tree — the fewest
//                   distinct prompt tokens sent (the router's approximate radix tree per worker,
//                   never evicted here: the router trims it every 120 s to 2^26 nodes).
// The router sees prefix blocks only where the trace has them (RequestTrace::prefix_block_tokens);
// without them every prompt is its own content and prefix affinity balances distinct tokens.
// Thread-safety: one Router per serving run.
#pragma once

#include <cstdint>
#include <unordered_set>
#include <vector>

#include "sim/plan/engine.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

class Router {
 public:
  Router(Dispatch policy, int replicas, const RequestTrace& trace);
  // The replica request `req` (an index into the trace) goes to, given each replica's requests in
  // flight; records the choice.
  int route(int req, const std::vector<int>& load);
  // True when the policy reads the replicas' loads (serve() must run them in lockstep).
  static bool reads_load(Dispatch policy) { return policy != Dispatch::RoundRobin; }

  static constexpr int kBalanceAbs = 64;         // RouterArgs.balance_abs_threshold
  static constexpr double kBalanceRel = 1.5;     // RouterArgs.balance_rel_threshold
  static constexpr double kCacheThreshold = 0.3; // RouterArgs.cache_threshold

 private:
  int least_loaded(const std::vector<int>& load);
  int prefix_choice(int req, const std::vector<int>& load);

  Dispatch policy_;
  int replicas_;
  const RequestTrace& trace_;
  int next_ = 0;                                          // the next replica in turn
  std::vector<std::unordered_set<std::uint64_t>> sent_;   // per replica: prefix blocks sent
  std::vector<double> tree_tokens_;                       // per replica: distinct prompt tokens sent
};

}  // namespace shardsim
