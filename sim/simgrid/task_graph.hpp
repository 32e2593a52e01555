// sim/simgrid/task_graph.hpp — a step program expanded into a DAG of gates, delays, execs and flows.
//
// Owns: TaskGraph, the expansion the SimGrid executor runs (simgrid_executor.cpp drives it).
// Every operation gets a begin gate and an end gate (zero-time tasks); its begin gate waits for the
// end gates of its dependencies and of the previous operation on each stream it uses — the
// analytic list scheduler's rule — and its own tasks sit between the two gates: an Exec for a
// compute operation, a flow for a send, and for a collective its latency as one delay, then the
// flows of the pattern of the algorithm collective_time() picks (collective_pattern.hpp: ring
// steps, binomial tree stages, NVLS stages; across NVLink domains rings inside each domain and one
// per rail across them), sized so that alone they take the price's bandwidth part, and all-to-all
// pairs as NCCL's PXN or DeepEP route them (docs/simgrid.md gives each expansion). The graph also counts the bytes each directed link will carry.
// Thread-safety: one graph per executor (not synchronised).
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/step/analytic_executor.hpp"
#include "sim/step/collective_cost.hpp"
#include "sim/step/step_program.hpp"

namespace shardsim {

class Cluster;
class SimgridPlatform;

enum class TaskKind : std::uint8_t {
  Gate,   // zero time: joins and forks (an operation's begin and end, algorithm step barriers)
  Delay,  // `delay` seconds, no resource
  Exec,   // `amount` flops on GPU `src`'s host
  Flow,   // `amount` bytes from GPU `src` to GPU `dst`
};

struct Task {
  double delay = 0;    // seconds between becoming ready and starting the activity
  double amount = 0;   // Exec: flops; Flow: bytes (integral)
  int op = -1;         // owning operation
  int src = -1, dst = -1;
  TaskKind kind = TaskKind::Gate;
  int pending = 0;     // predecessors not yet finished (the executor counts it down)
  int first_edge = -1; // successors: a linked list in edge_to / edge_next
  int trigger = -1;    // the predecessor whose end made this task ready (set by the executor)
};

class TaskGraph {
 public:
  // `platform`, `analytic` (compute durations) and `cluster` must outlive the graph.
  TaskGraph(const Cluster& cluster, SimgridPlatform& platform, const CollectiveModel& model,
            const AnalyticExecutor& analytic);

  // Replaces the graph by `p`'s expansion (p must be valid: SimgridExecutor checks it first).
  void build(const StepProgram& p);

  std::vector<Task> tasks;
  std::vector<int> edge_to, edge_next;     // successor lists (Task::first_edge)
  std::vector<int> op_begin, op_end_gate;  // gate task per operation
  std::vector<double> op_analytic;         // contention-free duration per operation
  std::vector<double> dlink_bytes;         // per directed link: bytes the flows will carry
  std::vector<int> dlink_touched;          // directed links with bytes

 private:
  int add_task(TaskKind kind, int op, double delay = 0, double amount = 0, int src = -1, int dst = -1);
  void add_edge(int a, int b);
  void add_between(int from, int t, int to);  // from → t → to, or from → to when t < 0
  int flow(int op, int src, int dst, double bytes, double delay = -1);

  void ring(int op, const std::vector<int>& m, int steps, double chunk, int from, int to);
  void split_a2a_legs(const std::vector<int>& m, const A2aMatrix& mat, bool pxn, bool receive_side);
  void all_to_all(int op, const std::vector<int>& m, const A2aMatrix& mat, double analytic_dur, int from, int to);

  CollectiveTime collective(const StepOp& op, const std::vector<int>& gpus);
  int after_delay(int op, double seconds, int from);
  double expand(int i, int from, int to);
  double expand_all_to_all(int i, const std::vector<int>& gpus, int from, int to);
  double expand_collective(int i, const std::vector<int>& gpus, int from, int to);

  const Cluster& cluster_;
  SimgridPlatform& platform_;
  CollectiveModel coll_;
  const AnalyticExecutor& analytic_;
  const StepProgram* prog_ = nullptr;
  std::map<std::tuple<int, int, double, int>, CollectiveTime> coll_cache_;  // (group, kind, bytes, algo), this program's
  // Expansion scratch.
  std::vector<int> gpu_pos_, ring_prev_, ring_cur_;
  std::vector<double> nv_, net_;
};

}  // namespace shardsim
