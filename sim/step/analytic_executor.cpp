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
    case OpType::Compute:  // on its rank's GPU type (a mixed cluster's pools differ)
      return compute_time(cluster_.gpu_of(p.rank_gpu[static_cast<std::size_t>(op.rank)]), op, compute_, p.compute_share);
    case OpType::Send:
      return p2p_time(cluster_, p.rank_gpu[static_cast<std::size_t>(op.rank)], p.rank_gpu[static_cast<std::size_t>(op.peer)],
                      op.bytes, collective_);
    case OpType::Collective: {
      std::vector<int> gpus;
      for (int r : p.groups[static_cast<std::size_t>(op.group)]) gpus.push_back(p.rank_gpu[static_cast<std::size_t>(r)]);
      if (op.coll == CollKind::AllToAll && op.matrix >= 0)
        return all_to_all_time(cluster_, gpus, p.a2a[static_cast<std::size_t>(op.matrix)], collective_);
      return collective_time(cluster_, op.coll, gpus, op.bytes, op.algo, collective_, p.allreduce).seconds;
    }
  }
  return 0;
}

double AnalyticExecutor::compute_seconds(int gpu, const StepOp& op, double share) const {
  return compute_time(cluster_.gpu_of(gpu), op, compute_, share);
}

namespace {

// Durations of one program's operations, unweighted (AnalyticExecutor::op_time), with what
// repeats inside a program priced once: a group's GPUs, a collective of the same (group, kind,
// bytes), and a compute kernel equal to the previous one (a tensor-parallel group issues the same
// kernel on each of its ranks, one after the other, unless the lowering grouped them).
class Durations {
 public:
  Durations(const AnalyticExecutor& ex, const Cluster& cluster, const CollectiveModel& collective, const StepProgram& p)
      : ex_(ex), cluster_(cluster), collective_(collective), p_(p), group_gpus_(p.groups.size()) {}

  // REQUIRES: `occupied` = op_ranks(p, op).
  double seconds(const StepOp& op, std::span<const int> occupied) {
    switch (op.type) {
      case OpType::Collective: return collective(op, occupied);
      case OpType::Compute:
        if (!(last_compute_ && last_compute_->kernel == op.kernel && last_compute_->rows == op.rows &&
              last_compute_->flops == op.flops && last_compute_->hbm_bytes == op.hbm_bytes && last_compute_->math == op.math))
          last_compute_time_ = ex_.op_time(p_, op);
        last_compute_ = &op;
        return last_compute_time_;
      case OpType::Send: return ex_.op_time(p_, op);
    }
    return 0;
  }

 private:
  double collective(const StepOp& op, std::span<const int> occupied) {
    auto& gpus = group_gpus_[static_cast<std::size_t>(op.group)];
    if (gpus.empty())
      for (const int r : occupied) gpus.push_back(p_.rank_gpu[static_cast<std::size_t>(r)]);
    if (op.matrix >= 0 && op.coll == CollKind::AllToAll)
      return all_to_all_time(cluster_, gpus, p_.a2a[static_cast<std::size_t>(op.matrix)], collective_);
    auto key = std::make_tuple(op.group, static_cast<int>(op.coll), op.bytes);
    auto it = coll_cache_.find(key);
    if (it == coll_cache_.end())
      it = coll_cache_.emplace(key, collective_time(cluster_, op.coll, gpus, op.bytes, op.algo, collective_, p_.allreduce).seconds).first;
    return it->second;
  }

  const AnalyticExecutor& ex_;
  const Cluster& cluster_;
  const CollectiveModel& collective_;
  const StepProgram& p_;
  std::map<std::tuple<int, int, double>, double> coll_cache_;  // (group, kind, bytes) → seconds
  std::vector<std::vector<int>> group_gpus_;                   // per group, built on first use
  const StepOp* last_compute_ = nullptr;                       // and its time
  double last_compute_time_ = 0;
};

}  // namespace

// List scheduling in program order: an operation starts when its dependencies have ended and its
// stream is free on every rank it occupies; pred[i] is what it waited for last (the critical path).
StepTiming AnalyticExecutor::run(const StepProgram& p, std::vector<TimelineEvent>* timeline) const {
  const std::size_t n = p.ops.size();
  std::vector<double> start(n, 0), end(n, 0);
  std::vector<int> pred(n, -1);
  // Last op on each rank's stream: [rank][stream].
  std::vector<std::array<int, 2>> last(static_cast<std::size_t>(p.num_ranks()), {-1, -1});
  Durations durations(*this, cluster_, collective_, p);
  int pair[2];
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
    const auto s = static_cast<std::size_t>(op.stream());
    for (const int r : occupied) {
      const int prev = last[static_cast<std::size_t>(r)][s];
      if (prev >= 0 && end[static_cast<std::size_t>(prev)] > ready) {
        ready = end[static_cast<std::size_t>(prev)];
        why = prev;
      }
    }
    start[i] = ready;
    end[i] = ready + durations.seconds(op, occupied) * op.weight;
    pred[i] = why;
    for (const int r : occupied) last[static_cast<std::size_t>(r)][s] = static_cast<int>(i);
  }
  StepTiming t = summarize_schedule(p, start, end, pred, timeline);
  thread_local std::vector<const GpuSpec*> rank_gpu;
  rank_gpu.clear();
  for (const int g : p.rank_gpu) rank_gpu.push_back(&cluster_.gpu_of(g));
  add_compute_work(p, rank_gpu, t);
  return t;
}

}  // namespace shardsim
