// sim/schedule_summary.cpp — StepTiming from a finished schedule.
#include "sim/schedule_summary.hpp"

#include <algorithm>
#include <map>

namespace shardsim {

void involved_ranks(const StepProgram& p, const StepOp& op, std::vector<int>& out) {
  out.clear();
  if (op.type == OpType::Compute) out.push_back(op.rank);
  else if (op.type == OpType::Send) out = {op.rank, op.peer};
  else out = p.groups[static_cast<std::size_t>(op.group)];
}

std::string op_name(const StepOp& op) {
  if (op.type == OpType::Compute) return to_string(op.cls);
  return std::string(to_string(op.cls)) + " " + (op.type == OpType::Send ? "send" : to_string(op.coll));
}

StepTiming summarize_schedule(const StepProgram& p, const std::vector<double>& start, const std::vector<double>& end,
                              const std::vector<int>& pred, std::vector<TimelineEvent>* timeline) {
  const std::size_t n = p.ops.size();
  const int ranks = p.num_ranks();
  StepTiming t;
  int pp = 1;
  for (const auto& op : p.ops) pp = std::max(pp, op.stage + 1);
  std::vector<double> stage_first(static_cast<std::size_t>(pp), 1e300), stage_last(static_cast<std::size_t>(pp), 0);
  std::map<int, std::vector<double>> expert_by_layer;  // (layer, stage) → expert seconds per rank
  std::vector<int> involved;
  for (std::size_t i = 0; i < n; ++i) {
    const StepOp& op = p.ops[i];
    involved_ranks(p, op, involved);
    const double dur = end[i] - start[i];
    const auto st = static_cast<std::size_t>(op.stage);
    stage_first[st] = std::min(stage_first[st], start[i]);
    stage_last[st] = std::max(stage_last[st], end[i]);
    const double share = dur * static_cast<double>(involved.size()) / std::max(ranks, 1);
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
      for (int r : involved) timeline->push_back({r, op.stream(), op.cls, op.layer, start[i], dur, op_name(op)});
  }
  // Critical path: back from the operation that ends last.
  int cur = -1;
  for (std::size_t i = 0; i < n; ++i)
    if (cur < 0 || end[i] > end[static_cast<std::size_t>(cur)]) cur = static_cast<int>(i);
  if (cur >= 0) t.makespan = end[static_cast<std::size_t>(cur)];
  while (cur >= 0) {
    const StepOp& op = p.ops[static_cast<std::size_t>(cur)];
    const double dur = end[static_cast<std::size_t>(cur)] - start[static_cast<std::size_t>(cur)];
    t.critical[static_cast<std::size_t>(op.cls)] += dur;
    if (op.type != OpType::Compute) t.comm_exposed += dur;
    const int prev = pred[static_cast<std::size_t>(cur)];
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
