// sim/step/schedule_summary.cpp — StepTiming from a finished schedule (definitions in the header).
#include "sim/step/schedule_summary.hpp"

#include "sim/step/compute_cost.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace shardsim {

std::span<const int> op_ranks(const StepProgram& p, const StepOp& op, int (&pair)[2]) {
  if (op.type == OpType::Collective || (op.type == OpType::Compute && op.group >= 0))
    return p.groups[static_cast<std::size_t>(op.group)];
  pair[0] = op.rank;
  pair[1] = op.peer;
  return std::span<const int>(pair, op.type == OpType::Send ? 2 : 1);
}

void involved_ranks(const StepProgram& p, const StepOp& op, std::vector<int>& out) {
  int pair[2];
  const std::span<const int> r = op_ranks(p, op, pair);
  out.assign(r.begin(), r.end());
}

std::string op_name(const StepOp& op) {
  if (op.type == OpType::Compute) return to_string(op.cls);
  return std::string(to_string(op.cls)) + " " + (op.type == OpType::Send ? "send" : to_string(op.coll));
}

bool is_comm_class(OpClass c) {
  return c == OpClass::TpComm || c == OpClass::EpDispatch || c == OpClass::EpCombine || c == OpClass::EtpComm ||
         c == OpClass::PipelineP2p;
}

namespace {

using Interval = std::pair<double, double>;
using Intervals = std::vector<Interval>;

// Sorts and merges `v` into disjoint intervals (one stream's operations usually arrive in order).
void merge(Intervals& v) {
  if (!std::is_sorted(v.begin(), v.end())) std::sort(v.begin(), v.end());
  std::size_t k = 0;
  for (const auto& x : v) {
    if (k > 0 && x.first <= v[k - 1].second) v[k - 1].second = std::max(v[k - 1].second, x.second);
    else v[k++] = x;
  }
  v.resize(k);
}

// Length of `a` not covered by `b` (both merged).
double uncovered(const Intervals& a, const Intervals& b) {
  double len = 0, overlap = 0;
  std::size_t j = 0;
  for (const auto& x : a) {
    len += x.second - x.first;
    while (j < b.size() && b[j].second <= x.first) ++j;
    for (std::size_t k = j; k < b.size() && b[k].first < x.second; ++k)
      overlap += std::min(x.second, b[k].second) - std::max(x.first, b[k].first);
  }
  return std::max(0.0, len - overlap);
}

// Per GPU (mean over ranks): communication time while the same rank's compute stream is idle.
// REQUIRES: comm and compute sized alike (one list per rank); both are merged in place.
double exposed_comm(std::vector<Intervals>& comm, std::vector<Intervals>& compute) {
  double sum = 0;
  for (std::size_t r = 0; r < comm.size(); ++r) {
    merge(comm[r]);
    merge(compute[r]);
    sum += uncovered(comm[r], compute[r]);
  }
  return comm.empty() ? 0 : sum / static_cast<double>(comm.size());
}

// Critical path: back from the operation that ends last; the waits (and the lead-in before the
// first operation) go to idle_on_path, so Σ critical + idle_on_path = makespan.
void critical_path(const StepProgram& p, const std::vector<double>& start, const std::vector<double>& end,
                   const std::vector<int>& pred, StepTiming& t) {
  int cur = -1;
  for (std::size_t i = 0; i < end.size(); ++i)
    if (cur < 0 || end[i] > end[static_cast<std::size_t>(cur)]) cur = static_cast<int>(i);
  if (cur >= 0) t.makespan = end[static_cast<std::size_t>(cur)];
  while (cur >= 0) {
    const auto c = static_cast<std::size_t>(cur);
    t.critical[static_cast<std::size_t>(p.ops[c].cls)] += end[c] - start[c];
    const int prev = pred[c];
    t.idle_on_path += start[c] - (prev >= 0 ? end[static_cast<std::size_t>(prev)] : 0.0);
    cur = prev;
  }
}

// Expert time of the slowest rank and its excess over the stage's mean, Σ over MoE layers.
// `by_layer`: (layer, stage) → expert seconds per rank; every rank of a unit counts (idle = 0).
void expert_stats(const std::map<int, std::vector<double>>& by_layer, int ranks, int pp, StepTiming& t) {
  for (const auto& [key, v] : by_layer) {
    double mx = 0, sum = 0;
    for (double x : v) {
      mx = std::max(mx, x);
      sum += x;
    }
    t.expert_time += mx;
    t.expert_imbalance += std::max(0.0, mx - sum / (static_cast<double>(ranks) / pp));
  }
}

}  // namespace

void add_compute_work(const StepProgram& p, const std::vector<const GpuSpec*>& rank_gpu, StepTiming& t) {
  const int ranks = std::max(p.num_ranks(), 1);
  int pair[2];
  for (const StepOp& op : p.ops) {
    if (op.type != OpType::Compute) continue;
    for (const int r : op_ranks(p, op, pair)) {
      const ComputeWork w = compute_work(*rank_gpu[static_cast<std::size_t>(r)], op);
      t.tensor_work += w.tensor / ranks;
      t.hbm_work += w.hbm / ranks;
    }
  }
}

double compute_busy(const std::array<double, kNumOpClasses>& busy) {
  double s = 0;
  for (int i = 0; i < kNumOpClasses; ++i)
    if (!is_comm_class(static_cast<OpClass>(i))) s += busy[static_cast<std::size_t>(i)];
  return s;
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
  // Each rank's busy intervals per stream, in per-thread scratch: the executors summarise
  // thousands of schedules per plan, and the lists keep their capacity from one to the next.
  thread_local std::vector<Intervals> comm, compute;
  for (auto* lanes : {&comm, &compute}) {
    lanes->resize(static_cast<std::size_t>(ranks));
    for (auto& l : *lanes) l.clear();
  }
  std::vector<double>* experts = nullptr;  // the last Experts operation's layer (they come layer by layer)
  int experts_key = 0;
  int pair[2];
  for (std::size_t i = 0; i < n; ++i) {
    const StepOp& op = p.ops[i];
    const std::span<const int> involved = op_ranks(p, op, pair);
    const double dur = end[i] - start[i];
    const auto st = static_cast<std::size_t>(op.stage);
    stage_first[st] = std::min(stage_first[st], start[i]);
    stage_last[st] = std::max(stage_last[st], end[i]);
    const double share = dur * static_cast<double>(involved.size()) / std::max(ranks, 1);
    t.busy[static_cast<std::size_t>(op.cls)] += share;
    auto& lanes = op.type == OpType::Compute ? compute : comm;
    for (int r : involved) lanes[static_cast<std::size_t>(r)].emplace_back(start[i], end[i]);
    if (op.type != OpType::Compute) {
      t.comm_busy += share;
      t.coll_by_kind[op.type == OpType::Send ? 3 : static_cast<std::size_t>(op.coll)] += share;
    }
    if (op.cls == OpClass::Experts) {
      const int key = op.layer * 100000 + op.stage;
      if (experts == nullptr || key != experts_key) {
        experts = &expert_by_layer[key];
        experts_key = key;
        if (experts->empty()) experts->assign(static_cast<std::size_t>(ranks), 0);
      }
      for (int r : involved) (*experts)[static_cast<std::size_t>(r)] += dur;
    }
    if (timeline)
      for (int r : involved) timeline->push_back({r, op.stream(), op.cls, op.layer, start[i], dur, op_name(op)});
  }
  critical_path(p, start, end, pred, t);
  t.comm_exposed = exposed_comm(comm, compute);
  for (int s = 0; s < pp; ++s)
    t.stage_time.push_back(stage_last[static_cast<std::size_t>(s)] > 0
                               ? stage_last[static_cast<std::size_t>(s)] - stage_first[static_cast<std::size_t>(s)]
                               : 0);
  expert_stats(expert_by_layer, ranks, pp, t);
  return t;
}

}  // namespace shardsim
