// sim/step/analytic_executor.cpp — list scheduling with formula durations and critical-path attribution.
#include "sim/step/analytic_executor.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "sim/step/schedule_summary.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

double AnalyticExecutor::op_time(const StepProgram& p, const StepOp& op) const {
  switch (op.type) {
    case OpType::Compute: return compute_time(cluster_.gpu(), op, compute_);
    case OpType::Send:
      return p2p_time(cluster_, p.rank_gpu[static_cast<std::size_t>(op.rank)], p.rank_gpu[static_cast<std::size_t>(op.peer)],
                      op.bytes, collective_);
    case OpType::Collective: {
      std::vector<int> gpus;
      for (int r : p.groups[static_cast<std::size_t>(op.group)]) gpus.push_back(p.rank_gpu[static_cast<std::size_t>(r)]);
      if (op.coll == CollKind::AllToAll && op.matrix >= 0)
        return all_to_all_time(cluster_, gpus, p.a2a[static_cast<std::size_t>(op.matrix)], collective_);
      return collective_time(cluster_, op.coll, gpus, op.bytes, op.algo, collective_).seconds;
    }
  }
  return 0;
}

StepTiming AnalyticExecutor::run(const StepProgram& p, std::vector<TimelineEvent>* timeline) const {
  const std::size_t n = p.ops.size();
  const int ranks = p.num_ranks();
  std::vector<double> start(n, 0), end(n, 0);
  std::vector<int> pred(n, -1);
  // Last op on each rank's stream: [rank][stream].
  std::vector<std::array<int, 2>> last(static_cast<std::size_t>(ranks), {-1, -1});
  std::map<std::tuple<int, int, double>, double> coll_cache;  // (group, kind, bytes) → seconds
  std::vector<std::vector<int>> group_gpus(p.groups.size());  // per group, built on first use
  int pair[2];
  const StepOp* last_compute = nullptr;  // and its unweighted time
  double last_compute_time = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const StepOp& op = p.ops[i];
    double ready = op.not_before;
    int why = -1;
    for (const int* d = p.deps_begin(static_cast<int>(i)); d != p.deps_end(static_cast<int>(i)); ++d)
      if (end[static_cast<std::size_t>(*d)] > ready || (why < 0 && end[static_cast<std::size_t>(*d)] == ready)) {
        ready = end[static_cast<std::size_t>(*d)];
        why = *d;
      }
    const std::span<const int> occupied = op_ranks(p, op, pair);
    const int s = static_cast<int>(op.stream());
    for (const int r : occupied) {
      int prev = last[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)];
      if (prev >= 0 && end[static_cast<std::size_t>(prev)] > ready) {
        ready = end[static_cast<std::size_t>(prev)];
        why = prev;
      }
    }
    double dur;
    if (op.type == OpType::Collective) {
      auto& gpus = group_gpus[static_cast<std::size_t>(op.group)];
      if (gpus.empty())
        for (const int r : occupied) gpus.push_back(p.rank_gpu[static_cast<std::size_t>(r)]);
      if (op.matrix >= 0 && op.coll == CollKind::AllToAll) {
        dur = all_to_all_time(cluster_, gpus, p.a2a[static_cast<std::size_t>(op.matrix)], collective_);
      } else {
        auto key = std::make_tuple(op.group, static_cast<int>(op.coll), op.bytes);
        auto it = coll_cache.find(key);
        if (it == coll_cache.end())
          it = coll_cache.emplace(key, collective_time(cluster_, op.coll, gpus, op.bytes, op.algo, collective_).seconds).first;
        dur = it->second;
      }
    } else if (op.type == OpType::Compute) {
      // A tensor-parallel group issues the same kernel on each of its ranks, one after the other.
      if (!(last_compute && last_compute->kernel == op.kernel && last_compute->rows == op.rows &&
            last_compute->flops == op.flops && last_compute->hbm_bytes == op.hbm_bytes && last_compute->math == op.math))
        last_compute_time = compute_time(cluster_.gpu(), op, compute_);
      last_compute = &op;
      dur = last_compute_time;
    } else {
      dur = op_time(p, op);
    }
    dur *= op.weight;
    start[i] = ready;
    end[i] = ready + dur;
    pred[i] = why;
    for (const int r : occupied) last[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)] = static_cast<int>(i);
  }
  return summarize_schedule(p, start, end, pred, timeline);
}

}  // namespace shardsim
