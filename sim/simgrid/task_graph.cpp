// sim/simgrid/task_graph.cpp — the expansion of step programs into gates, delays, execs and flows.
#include "sim/simgrid/task_graph.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "sim/simgrid/simgrid_platform.hpp"
#include "sim/step/collective_pattern.hpp"
#include "sim/step/schedule_summary.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

TaskGraph::TaskGraph(const Cluster& cluster, SimgridPlatform& platform, const CollectiveModel& model,
                     const AnalyticExecutor& analytic)
    : cluster_(cluster), platform_(platform), coll_(model), analytic_(analytic) {}

void TaskGraph::build(const StepProgram& p) {
  prog_ = &p;
  const std::size_t n = p.ops.size();
  tasks.clear();
  edge_to.clear();
  edge_next.clear();
  coll_cache_.clear();
  for (int d : dlink_touched) dlink_bytes[static_cast<std::size_t>(d)] = 0;
  dlink_touched.clear();
  dlink_bytes.resize(2 * static_cast<std::size_t>(cluster_.num_links()), 0);
  op_begin.assign(n, -1);
  op_end_gate.assign(n, -1);
  op_analytic.assign(n, 0);
  tasks.reserve(4 * n);

  std::vector<std::array<int, 2>> last(static_cast<std::size_t>(p.num_ranks()), {-1, -1});  // per rank and stream
  std::vector<std::size_t> seen(n, static_cast<std::size_t>(-1));
  std::vector<int> ranks;
  for (std::size_t i = 0; i < n; ++i) {
    const StepOp& op = p.ops[i];
    const int ii = static_cast<int>(i);
    const int b = add_task(TaskKind::Gate, ii);
    const int e = add_task(TaskKind::Gate, ii);
    op_begin[i] = b;
    op_end_gate[i] = e;
    auto wait_for = [&](int j) {
      if (j < 0 || seen[static_cast<std::size_t>(j)] == i) return;
      seen[static_cast<std::size_t>(j)] = i;
      add_edge(op_end_gate[static_cast<std::size_t>(j)], b);
    };
    for (const int* d = p.deps_begin(ii); d != p.deps_end(ii); ++d) wait_for(*d);
    if (op.not_before > 0) add_edge(add_task(TaskKind::Delay, -1, op.not_before), b);  // released at t0 + not_before (no predecessor)
    involved_ranks(p, op, ranks);
    const auto s = static_cast<std::size_t>(op.stream());
    for (int r : ranks) {
      wait_for(last[static_cast<std::size_t>(r)][s]);
      last[static_cast<std::size_t>(r)][s] = ii;
    }
    op_analytic[i] = expand(ii, b, e);
  }
}

int TaskGraph::add_task(TaskKind kind, int op, double delay, double amount, int src, int dst) {
  Task t;
  t.kind = kind;
  t.op = op;
  t.delay = delay;
  t.amount = amount;
  t.src = src;
  t.dst = dst;
  tasks.push_back(t);
  return static_cast<int>(tasks.size()) - 1;
}

void TaskGraph::add_edge(int a, int b) {
  edge_to.push_back(b);
  edge_next.push_back(tasks[static_cast<std::size_t>(a)].first_edge);
  tasks[static_cast<std::size_t>(a)].first_edge = static_cast<int>(edge_to.size()) - 1;
  ++tasks[static_cast<std::size_t>(b)].pending;
}

void TaskGraph::add_between(int from, int t, int to) {
  if (t < 0) {
    add_edge(from, to);
    return;
  }
  add_edge(from, t);
  add_edge(t, to);
}

// A flow of `bytes` (rounded to whole bytes) after `delay` seconds; delay < 0 means the route's
// latency + the per-step overhead. Returns -1 (no task) for an empty or local transfer.
int TaskGraph::flow(int op, int src, int dst, double bytes, double delay) {
  if (src == dst || !(bytes > 0)) return -1;
  const SimgridRoute& r = platform_.route(src, dst);
  const double b = std::max(1.0, std::round(bytes));
  for (int d : r.dlinks) {
    double& x = dlink_bytes[static_cast<std::size_t>(d)];
    if (x == 0) dlink_touched.push_back(d);
    x += b;
  }
  return add_task(TaskKind::Flow, op, delay < 0 ? r.latency + coll_.step_overhead : delay, b, src, dst);
}

// Ring through `m` (GPU ids, in order): `steps` steps of `chunk` bytes, no flow waiting before it
// starts (the collective's latency is one delay before its flows). Flow (i, k) goes from m[i]
// to m[i+1] after flow (i, k−1) (its own previous send) and flow (i−1, k−1) (the chunk it forwards).
// Alone, each step takes chunk / the ring's slowest hop bandwidth.
void TaskGraph::ring(int op, const std::vector<int>& m, int steps, double chunk, int from, int to) {
  const std::size_t p = m.size();
  if (p < 2 || steps <= 0 || !(chunk > 0)) {
    add_edge(from, to);
    return;
  }
  ring_prev_.assign(p, -1);
  ring_cur_.assign(p, -1);
  for (int k = 0; k < steps; ++k) {
    for (std::size_t i = 0; i < p; ++i) {
      const int f = flow(op, m[i], m[(i + 1) % p], chunk, 0);
      ring_cur_[i] = f;
      if (k == 0) {
        add_edge(from, f);
      } else {
        add_edge(ring_prev_[i], f);
        add_edge(ring_prev_[(i + p - 1) % p], f);
      }
    }
    std::swap(ring_prev_, ring_cur_);
  }
  for (std::size_t i = 0; i < p; ++i) add_edge(ring_prev_[i], to);
}

// The all-to-all matrix's pairs split into legs, summed per (sender, receiver) position in m:
// nv_ over NVLink, net_ over the network. NVLink pairs go direct. A network pair a → b (node i →
// node j, rails r → r') goes the way all_to_all_routing() picks (collective_cost.hpp): as NCCL PXN
// sends it, over NVLink to node i's GPU on rail r' (when it is in the group), then over rail r' to
// b; or as DeepEP forwards it (receive side), over rail r to node j's GPU on rail r, then over
// NVLink to b. Legs through one proxy merge into one flow per (sender, proxy) and (proxy, receiver).
void TaskGraph::split_a2a_legs(const std::vector<int>& m, const A2aMatrix& mat, bool pxn, bool receive_side) {
  const std::size_t p = m.size();
  const int gpn = cluster_.gpus_per_node();
  if (gpu_pos_.empty()) gpu_pos_.assign(static_cast<std::size_t>(cluster_.num_gpus()), -1);
  for (std::size_t i = 0; i < p; ++i) gpu_pos_[static_cast<std::size_t>(m[i])] = static_cast<int>(i);
  nv_.assign(p * p, 0);
  net_.assign(p * p, 0);
  auto position = [&](int node, int rail) { return gpu_pos_[static_cast<std::size_t>(node * gpn + rail)]; };
  for (const A2aMatrix::Entry& pair : mat.entries()) {  // in (sender, receiver) order
    const std::size_t i = pair.from, j = pair.to;
    const double b = pair.bytes;
    if (i == j || !(b > 0)) continue;
    const int ga = m[i], gb = m[j];
    if (cluster_.same_nvlink_domain(ga, gb)) {
      nv_[i * p + j] += b;
      continue;
    }
    if (receive_side) {
      const int x = position(cluster_.node_of(gb), cluster_.rail_of(ga));
      if (x < 0) {
        net_[i * p + j] += b;
      } else {
        net_[i * p + static_cast<std::size_t>(x)] += b;
        if (static_cast<std::size_t>(x) != j) nv_[static_cast<std::size_t>(x) * p + j] += b;
      }
      continue;
    }
    const int x = pxn ? position(cluster_.node_of(ga), cluster_.rail_of(gb)) : -1;
    if (x < 0) {
      net_[i * p + j] += b;
    } else {
      net_[static_cast<std::size_t>(x) * p + j] += b;
      if (static_cast<std::size_t>(x) != i) nv_[i * p + static_cast<std::size_t>(x)] += b;
    }
  }
  for (std::size_t i = 0; i < p; ++i) gpu_pos_[static_cast<std::size_t>(m[i])] = -1;
}

// All-to-all from a p×p byte matrix: one flow per leg (split_a2a_legs), both legs of a proxied
// pair starting at once (chunks are pipelined through the proxy). NVLink flows are scaled by
// (route bandwidth / (NVLink bw × a2a efficiency)) so that, alone, they run at the achieved
// all-to-all NVLink rate the analytic formula uses.
void TaskGraph::all_to_all(int op, const std::vector<int>& m, const A2aMatrix& mat, double analytic_dur, int from,
                           int to) {
  const std::size_t p = m.size();
  const bool pxn = cluster_.gpus_per_node() > 1 && cluster_.fabric().kind != "links";
  split_a2a_legs(m, mat, pxn, pxn && all_to_all_routing(cluster_, m, mat, coll_) == A2aRouting::ReceiveSide);
  const double a2a_nv_bw = cluster_.gpu_of(m.at(0)).nvlink_bw * coll_.a2a_nvlink_efficiency;
  bool any = false;
  for (std::size_t i = 0; i < p; ++i)
    for (std::size_t j = 0; j < p; ++j)
      for (int leg = 0; leg < 2; ++leg) {
        double b = (leg == 0 ? nv_ : net_)[i * p + j];
        if (!(b > 0)) continue;
        if (leg == 0) b *= platform_.route(m[i], m[j]).bandwidth / a2a_nv_bw;
        const int f = flow(op, m[i], m[j], b);
        if (f < 0) continue;
        add_between(from, f, to);
        any = true;
      }
  if (!any) add_between(from, add_task(TaskKind::Delay, op, analytic_dur), to);  // nothing to move: the formula's latency alone
}

CollectiveTime TaskGraph::collective(const StepOp& op, const std::vector<int>& gpus) {
  auto key = std::make_tuple(op.group, static_cast<int>(op.coll), op.bytes, static_cast<int>(op.algo));
  auto it = coll_cache_.find(key);
  if (it == coll_cache_.end())  // (one program's all-reduce kernels: the cache lives for one build)
    it = coll_cache_.emplace(key, collective_time(cluster_, op.coll, gpus, op.bytes, op.algo, coll_, prog_->allreduce)).first;
  return it->second;
}

// A delay task of `seconds` after `from` (the all-to-all's call latency); returns the task the
// flows start from.
int TaskGraph::after_delay(int op, double seconds, int from) {
  if (!(seconds > 0)) return from;
  const int d = add_task(TaskKind::Delay, op, seconds);
  add_edge(from, d);
  return d;
}

// Expands operation i between its gates; returns its contention-free duration.
double TaskGraph::expand(int i, int from, int to) {
  const StepProgram& p = *prog_;
  const StepOp& op = p.ops[static_cast<std::size_t>(i)];
  auto gpu = [&](int rank) { return p.rank_gpu[static_cast<std::size_t>(rank)]; };
  switch (op.type) {
    case OpType::Compute: {
      const double dur = analytic_.op_time(p, op);
      add_between(from, dur > 0 ? add_task(TaskKind::Exec, i, 0, dur * kSimgridHostSpeed, gpu(op.rank)) : -1, to);
      return dur;
    }
    case OpType::Send:
      add_between(from, flow(i, gpu(op.rank), gpu(op.peer), op.bytes), to);
      return p2p_time(cluster_, gpu(op.rank), gpu(op.peer), op.bytes, coll_);
    case OpType::Collective:
      break;
  }
  std::vector<int> gpus;
  for (int r : p.groups[static_cast<std::size_t>(op.group)]) gpus.push_back(gpu(r));
  return op.coll == CollKind::AllToAll ? expand_all_to_all(i, gpus, from, to) : expand_collective(i, gpus, from, to);
}

double TaskGraph::expand_all_to_all(int i, const std::vector<int>& gpus, int from, int to) {
  const StepProgram& p = *prog_;
  const StepOp& op = p.ops[static_cast<std::size_t>(i)];
  const std::size_t n = gpus.size();
  if (n <= 1 || (op.matrix < 0 && !(op.bytes > 0))) {
    add_edge(from, to);
    return 0;
  }
  if (op.matrix >= 0) {
    const A2aMatrix& mat = p.a2a[static_cast<std::size_t>(op.matrix)];
    const double dur = all_to_all_time(cluster_, gpus, mat, coll_);
    const double call = all_to_all_call_latency(mat, coll_);
    all_to_all(i, gpus, mat, dur - call, after_delay(i, call, from), to);
    return dur;
  }
  const A2aMatrix uniform = A2aMatrix::uniform(n, op.bytes / static_cast<double>(n));
  const double dur = collective(op, gpus).seconds;
  const double call = all_to_all_call_latency(uniform, coll_);
  all_to_all(i, gpus, uniform, dur - call, after_delay(i, call, from), to);
  return dur;
}

// An all-reduce, reduce-scatter or all-gather by the algorithm and protocol collective_time()
// picks for it: its latency as one delay, then the flows of its pattern (collective_pattern.hpp),
// all scaled by one factor so that, alone, they take the price's bandwidth part. The pattern
// places the bytes on the links the algorithm uses, so that contention stretches them; without
// it the tiers agree by construction.
double TaskGraph::expand_collective(int i, const std::vector<int>& gpus, int from, int to) {
  const StepOp& op = prog_->ops[static_cast<std::size_t>(i)];
  const CollectiveTime ct = collective(op, gpus);
  const CollectivePattern pat = collective_pattern(cluster_, op.coll, gpus, op.bytes, ct, coll_);
  const double own = pat.own_time(cluster_, coll_);
  if (!(ct.seconds > 0) || !(own > 0)) {
    add_edge(from, to);
    return ct.seconds;
  }
  from = after_delay(i, ct.latency, from);
  const double scale = ct.bandwidth / own;
  for (const CollectivePattern::Ring& r : pat.rings) ring(i, r.gpus, r.steps, r.chunk * scale, from, to);
  int gate = from;
  for (std::size_t s = 0; s < pat.stages.size(); ++s) {
    const int next = s + 1 == pat.stages.size() ? to : add_task(TaskKind::Gate, i);
    bool any = false;
    for (const CollectivePattern::Flow& f : pat.stages[s]) {
      const int t = flow(i, f.src, f.dst, f.bytes * scale, 0);
      if (t < 0) continue;
      add_between(gate, t, next);
      any = true;
    }
    if (!any) add_edge(gate, next);
    gate = next;
  }
  return ct.seconds;
}

}  // namespace shardsim
