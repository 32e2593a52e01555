// sim/analytic_executor.cpp — list scheduling with formula durations and critical-path attribution.
#include "sim/analytic_executor.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "topologies/cluster.hpp"

namespace shardsim {

double AnalyticExecutor::op_time(const StepProgram& p, const StepOp& op) const {
  switch (op.type) {
    case OpType::Compute: return compute_time(cluster_.gpu(), op.flops, op.hbm_bytes, op.math, compute_);
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

  StepTiming t;
  int pp = 1;
  for (const auto& op : p.ops) pp = std::max(pp, op.stage + 1);
  std::vector<double> stage_first(static_cast<std::size_t>(pp), 1e300), stage_last(static_cast<std::size_t>(pp), 0);
  // Expert compute per (layer, rank) for imbalance.
  std::map<int, std::vector<double>> expert_by_layer;

  for (std::size_t i = 0; i < n; ++i) {
    const StepOp& op = p.ops[i];
    double ready = 0;
    int why = -1;
    for (const int* d = p.deps_begin(static_cast<int>(i)); d != p.deps_end(static_cast<int>(i)); ++d)
      if (end[static_cast<std::size_t>(*d)] > ready || why < 0) {
        if (end[static_cast<std::size_t>(*d)] >= ready) {
          ready = end[static_cast<std::size_t>(*d)];
          why = *d;
        }
      }
    std::vector<int> involved;
    if (op.type == OpType::Compute) involved = {op.rank};
    else if (op.type == OpType::Send) involved = {op.rank, op.peer};
    else involved = p.groups[static_cast<std::size_t>(op.group)];
    const int s = static_cast<int>(op.stream());
    for (int r : involved) {
      int prev = last[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)];
      if (prev >= 0 && end[static_cast<std::size_t>(prev)] > ready) {
        ready = end[static_cast<std::size_t>(prev)];
        why = prev;
      }
    }
    double dur;
    if (op.type == OpType::Collective && op.matrix < 0) {
      auto key = std::make_tuple(op.group, static_cast<int>(op.coll), op.bytes);
      auto it = coll_cache.find(key);
      if (it == coll_cache.end()) it = coll_cache.emplace(key, op_time(p, op)).first;
      dur = it->second;
    } else {
      dur = op_time(p, op);
    }
    start[i] = ready;
    end[i] = ready + dur;
    pred[i] = why;
    for (int r : involved) last[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)] = static_cast<int>(i);
    auto st = static_cast<std::size_t>(op.stage);
    stage_first[st] = std::min(stage_first[st], start[i]);
    stage_last[st] = std::max(stage_last[st], end[i]);
    double share = dur * static_cast<double>(involved.size()) / std::max(ranks, 1);
    t.busy[static_cast<std::size_t>(op.cls)] += share;
    if (op.type != OpType::Compute) {
      t.comm_busy += share;
      t.coll_by_kind[op.type == OpType::Send ? 3 : static_cast<std::size_t>(op.coll)] += share;
    }
    if (op.cls == OpClass::Experts) {
      auto& v = expert_by_layer[op.layer * 100000 + op.stage];
      if (v.empty()) v.assign(static_cast<std::size_t>(ranks), 0);
      v[static_cast<std::size_t>(op.rank)] += dur;
    }
    if (timeline)
      for (int r : involved)
        timeline->push_back({r, op.stream(), op.cls, op.layer, start[i], dur,
                             op.type == OpType::Compute ? to_string(op.cls)
                                                        : std::string(to_string(op.cls)) + " " +
                                                              (op.type == OpType::Send ? "send" : to_string(op.coll))});
  }
  // Critical path: back from the op that ends last.
  int cur = -1;
  for (std::size_t i = 0; i < n; ++i)
    if (cur < 0 || end[i] > end[static_cast<std::size_t>(cur)]) cur = static_cast<int>(i);
  if (cur >= 0) t.makespan = end[static_cast<std::size_t>(cur)];
  while (cur >= 0) {
    const StepOp& op = p.ops[static_cast<std::size_t>(cur)];
    double dur = end[static_cast<std::size_t>(cur)] - start[static_cast<std::size_t>(cur)];
    t.critical[static_cast<std::size_t>(op.cls)] += dur;
    if (op.type != OpType::Compute) t.comm_exposed += dur;
    int prev = pred[static_cast<std::size_t>(cur)];
    if (prev >= 0) t.idle_on_path += start[static_cast<std::size_t>(cur)] - end[static_cast<std::size_t>(prev)];
    cur = prev;
  }
  for (int s = 0; s < pp; ++s)
    t.stage_time.push_back(stage_last[static_cast<std::size_t>(s)] > 0
                               ? stage_last[static_cast<std::size_t>(s)] - stage_first[static_cast<std::size_t>(s)]
                               : 0);
  for (const auto& [key, v] : expert_by_layer) {
    // Mean over the ranks of one stage (every rank of a unit is an EP rank; idle ones count as 0).
    double mx = 0, sum = 0;
    for (double x : v) {
      mx = std::max(mx, x);
      sum += x;
    }
    t.expert_time += mx;
    t.expert_imbalance += mx - sum / (static_cast<double>(ranks) / pp);
  }
  return t;
}

}  // namespace shardsim
