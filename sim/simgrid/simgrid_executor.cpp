// sim/simgrid/simgrid_executor.cpp — step programs as a DAG of SimGrid activities, driven from maestro.
//
// Owns: the expansion of each operation into tasks (flows, execs, delays, gates), the event loop
// glue (activity completions and kernel timers start the tasks whose predecessors are done), and
// the StepTiming / ContentionReport bookkeeping.
// How it runs: the whole program is expanded before the simulation starts. Every operation gets a
// begin gate and an end gate (zero-time tasks); its begin gate waits for the end gates of its
// dependencies and of the previous operation on each stream it uses — the analytic list
// scheduler's rule — and its own tasks sit between the two gates. No actor is involved: tasks are
// started from maestro (before Engine::run, in timer callbacks and in Activity::on_completion), so
// one Engine::run() executes the whole step. A task that becomes ready waits `delay` (route latency
// + per-step overhead, or a modelled duration) on a kernel timer, then starts its activity.
// Thread-safety: none (see the header).
#include "sim/simgrid/simgrid_executor.hpp"

#include "sim/step/schedule_summary.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <map>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>

#include "sim/step/analytic_executor.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

namespace sg4 = simgrid::s4u;

static_assert(static_cast<int>(LinkClass::DragonflyGlobal) + 1 == kNumLinkClasses,
              "kNumLinkClasses must cover every LinkClass");

namespace {

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
  int pending = 0;     // predecessors not yet finished
  int first_edge = -1; // successors: a linked list in edge_to / edge_next
  int trigger = -1;    // the predecessor whose end made this task ready
};

void check_program(const StepProgram& p, int num_gpus) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("SimgridExecutor: " + what); };
  const int ranks = p.num_ranks();
  std::vector<char> used(static_cast<std::size_t>(num_gpus), 0);
  for (int r = 0; r < ranks; ++r) {
    const int g = p.rank_gpu[static_cast<std::size_t>(r)];
    if (g < 0 || g >= num_gpus)
      fail("rank " + std::to_string(r) + " is on GPU " + std::to_string(g) + ", outside 0.." +
           std::to_string(num_gpus - 1));
    if (used[static_cast<std::size_t>(g)]++) fail("GPU " + std::to_string(g) + " holds two ranks");
  }
  for (std::size_t gi = 0; gi < p.groups.size(); ++gi)
    for (int r : p.groups[gi])
      if (r < 0 || r >= ranks) fail("group " + std::to_string(gi) + " names rank " + std::to_string(r));
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const StepOp& op = p.ops[i];
    const std::string at = "operation " + std::to_string(i) + ": ";
    if (op.dep_begin > op.dep_end || op.dep_end > p.deps.size()) fail(at + "dependency range out of bounds");
    for (const int* d = p.deps_begin(static_cast<int>(i)); d != p.deps_end(static_cast<int>(i)); ++d)
      if (*d < 0 || *d >= static_cast<int>(i)) fail(at + "dependency " + std::to_string(*d) + " is not an earlier operation");
    if (op.stage < 0) fail(at + "negative stage");
    switch (op.type) {
      case OpType::Compute:
        if (op.rank < 0 || op.rank >= ranks) fail(at + "rank " + std::to_string(op.rank) + " out of range");
        break;
      case OpType::Send:
        if (op.rank < 0 || op.rank >= ranks || op.peer < 0 || op.peer >= ranks)
          fail(at + "send between ranks " + std::to_string(op.rank) + " and " + std::to_string(op.peer));
        break;
      case OpType::Collective: {
        if (op.group < 0 || op.group >= static_cast<int>(p.groups.size()))
          fail(at + "group " + std::to_string(op.group) + " out of range");
        const std::size_t n = p.groups[static_cast<std::size_t>(op.group)].size();
        if (op.coll == CollKind::AllToAll && op.matrix >= 0 &&
            (op.matrix >= static_cast<int>(p.a2a.size()) || p.a2a[static_cast<std::size_t>(op.matrix)].members() != n))
          fail(at + "all-to-all matrix " + std::to_string(op.matrix) + " missing or not " + std::to_string(n) + "×" +
               std::to_string(n));
        break;
      }
    }
  }
}

const char* kind_label(int slot) {
  static const char* names[5] = {"all-reduce", "reduce-scatter", "all-gather", "all-to-all", "send"};
  return names[slot];
}

}  // namespace

double ContentionReport::slowdown(int kind) const {
  const auto k = static_cast<std::size_t>(kind);
  return analytic_seconds[k] > 0 ? simgrid_seconds[k] / analytic_seconds[k] : 1.0;
}

std::string describe(const ContentionReport& r) {
  std::ostringstream out;
  out.precision(3);
  bool any = false;
  for (int k = 0; k < 5; ++k) {
    if (r.ops[static_cast<std::size_t>(k)] == 0) continue;
    out << (any ? "; " : "") << kind_label(k) << " " << r.slowdown(k) << "x ("
        << r.simgrid_seconds[static_cast<std::size_t>(k)] * 1e3 << " ms vs "
        << r.analytic_seconds[static_cast<std::size_t>(k)] * 1e3 << " ms contention-free)";
    any = true;
  }
  if (!any) out << "no communication";
  if (r.most_loaded_class >= 0) {
    const LinkClassLoad& l = r.by_class[static_cast<std::size_t>(r.most_loaded_class)];
    out << "; busiest link class: " << to_string(static_cast<LinkClass>(r.most_loaded_class)) << " (link "
        << l.busiest_link << " busy " << l.utilization * 100 << "% of the step)";
  }
  out << "; makespan " << r.makespan * 1e3 << " ms vs " << r.analytic_makespan * 1e3 << " ms analytic";
  return out.str();
}

struct SimgridExecutor::State final : SimgridCompletionListener {
  State(const Cluster& c, ComputeModel cm, CollectiveModel col)
      : cluster(c), platform(SimgridWorld::instance().platform(c)), coll(col), analytic(c, cm, col) {}

  const Cluster& cluster;
  SimgridPlatform& platform;
  CollectiveModel coll;
  AnalyticExecutor analytic;   // compute durations and the contention-free reference
  ContentionReport report;

  // --- one run ---
  const StepProgram* prog = nullptr;
  std::vector<Task> tasks;
  std::vector<int> edge_to, edge_next;
  std::vector<int> op_begin, op_end_gate;   // gate task per operation
  std::vector<double> start, end, op_analytic;
  std::vector<int> pred;
  std::vector<int> work;                    // finished tasks whose successors are not yet released
  bool draining = false;
  std::vector<sg4::ActivityPtr> live;       // keeps activities alive until the run is over
  double t0 = 0;
  std::size_t ops_done = 0;
  std::exception_ptr error;
  std::vector<double> dlink_bytes;          // per directed link, this run
  std::vector<int> dlink_touched;
  std::map<std::tuple<int, int, double, int>, CollectiveTime> coll_cache;  // (group, kind, bytes, algo)
  // Expansion scratch.
  std::vector<int> gpu_pos, ring_prev, ring_cur;
  std::vector<double> nv, net;

  // --- building the task graph ---
  int add_task(TaskKind kind, int op, double delay = 0, double amount = 0, int src = -1, int dst = -1) {
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
  void add_edge(int a, int b) {
    edge_to.push_back(b);
    edge_next.push_back(tasks[static_cast<std::size_t>(a)].first_edge);
    tasks[static_cast<std::size_t>(a)].first_edge = static_cast<int>(edge_to.size()) - 1;
    ++tasks[static_cast<std::size_t>(b)].pending;
  }
  // A flow of `bytes` (rounded to whole bytes) after `delay` seconds; delay < 0 means the route's
  // latency + the per-step overhead. Returns -1 (no task) for an empty or local transfer.
  int flow(int op, int src, int dst, double bytes, double delay = -1) {
    if (src == dst || !(bytes > 0)) return -1;
    const SimgridRoute& r = platform.route(src, dst);
    const double b = std::max(1.0, std::round(bytes));
    for (int d : r.dlinks) {
      double& x = dlink_bytes[static_cast<std::size_t>(d)];
      if (x == 0) dlink_touched.push_back(d);
      x += b;
    }
    return add_task(TaskKind::Flow, op, delay < 0 ? r.latency + coll.step_overhead : delay, b, src, dst);
  }
  // Analytic per-step cost of a hop (collective_cost.cpp's hop()): α and effective bandwidth.
  std::pair<double, double> hop(int a, int b) const {
    const Route r = cluster.route(a, b);
    const auto& eff = cluster.collective_efficiency();
    return {r.latency + coll.step_overhead, r.bottleneck_bw * (r.nvlink_only ? eff.nvlink : eff.network)};
  }

  // Ring through `m` (GPU ids, in order): `steps` steps of `chunk` bytes. Flow (i, k) goes from m[i]
  // to m[i+1] after flow (i, k−1) (its own previous send) and flow (i−1, k−1) (the chunk it forwards).
  // Alone, each step takes the ring's slowest hop α + chunk / B: the analytic ring formula.
  void ring(int op, const std::vector<int>& m, int steps, double chunk, int from, int to) {
    const std::size_t p = m.size();
    if (p < 2 || steps <= 0 || !(chunk > 0)) {
      add_edge(from, to);
      return;
    }
    ring_prev.assign(p, -1);
    ring_cur.assign(p, -1);
    for (int k = 0; k < steps; ++k) {
      for (std::size_t i = 0; i < p; ++i) {
        const int f = flow(op, m[i], m[(i + 1) % p], chunk);
        ring_cur[i] = f;
        if (k == 0) add_edge(from, f);
        else {
          add_edge(ring_prev[i], f);
          add_edge(ring_prev[(i + p - 1) % p], f);
        }
      }
      std::swap(ring_prev, ring_cur);
    }
    for (std::size_t i = 0; i < p; ++i) add_edge(ring_prev[i], to);
  }

  // One barrier-separated step of flows (pairs of indices into m, sizes from `bytes_of`).
  template <class Bytes>
  int step(int op, const std::vector<int>& m, const std::vector<std::pair<int, int>>& pairs, double delay,
           Bytes bytes_of, int gate, int next) {
    bool any = false;
    for (auto [a, b] : pairs) {
      const int f = flow(op, m[static_cast<std::size_t>(a)], m[static_cast<std::size_t>(b)], bytes_of(a, b), delay);
      if (f < 0) continue;
      add_edge(gate, f);
      add_edge(f, next);
      any = true;
    }
    if (!any) add_edge(gate, next);
    return next;
  }

  // Pipelined double-binary-tree all-reduce as the analytic formula counts it, 2⌈log2 p⌉α + 2S/B:
  // a binomial reduction (⌈log2 p⌉ barrier-separated steps, position i sends to i − 2^l) then the
  // mirrored broadcast, each flow carrying S/⌈log2 p⌉. Every flow waits the tree's worst α and is
  // sized so that, alone on its route, it takes as long as on the tree's worst hop.
  void tree(int op, const std::vector<int>& m, double bytes, int from, int to) {
    const int p = static_cast<int>(m.size());
    double alpha = 0, bw = 1e300;
    for (int i = 1; i < p; ++i) {
      auto [a, b] = hop(m[0], m[static_cast<std::size_t>(i)]);
      alpha = std::max(alpha, a);
      bw = std::min(bw, b);
    }
    const int depth = static_cast<int>(std::ceil(std::log2(static_cast<double>(p))));
    auto sized = [&](int a, int b) {
      return bytes / depth *
             platform.route(m[static_cast<std::size_t>(a)], m[static_cast<std::size_t>(b)]).bandwidth / bw;
    };
    std::vector<std::vector<std::pair<int, int>>> levels(static_cast<std::size_t>(depth));
    for (int l = 0; l < depth; ++l)
      for (int i = 1 << l; i < p; i += 2 << l) levels[static_cast<std::size_t>(l)].push_back({i, i - (1 << l)});
    int gate = from;
    const int steps = 2 * depth;
    for (int s = 0; s < steps; ++s) {
      const bool up = s < depth;
      const auto& pairs = levels[static_cast<std::size_t>(up ? s : steps - 1 - s)];
      std::vector<std::pair<int, int>> dir = pairs;
      if (!up)
        for (auto& pr : dir) std::swap(pr.first, pr.second);
      const int next = s == steps - 1 ? to : add_task(TaskKind::Gate, op);
      gate = step(op, m, dir, alpha, sized, gate, next);
    }
  }

  // NVLS all-reduce in one NVLink domain: 2α + set-up + 2(p−1)/p · S / busbw_nvls, as a delay and two barrier-separated
  // steps in which each GPU sends one flow to the next; a flow carries (p−1)/p · S scaled by
  // (its route's bandwidth / NVLS bus bandwidth), so alone it takes the formula's time while it
  // loads the GPU's real NVLink ports.
  void nvls(int op, const std::vector<int>& m, double bytes, int from, int to) {
    const std::size_t p = m.size();
    const double alpha = hop(m[0], m[1]).first;
    const double busbw = coll.nvls_busbw_fraction * cluster.gpu().nvlink_bw;
    const double per_rank = static_cast<double>(p - 1) / static_cast<double>(p) * bytes;
    std::vector<std::pair<int, int>> pairs;
    for (std::size_t i = 0; i < p; ++i) pairs.push_back({static_cast<int>(i), static_cast<int>((i + 1) % p)});
    auto sized = [&](int a, int b) {
      return per_rank * platform.route(m[static_cast<std::size_t>(a)], m[static_cast<std::size_t>(b)]).bandwidth / busbw;
    };
    const int mid = add_task(TaskKind::Gate, op);
    if (coll.nvls_latency > 0) {
      const int d = add_task(TaskKind::Delay, op, coll.nvls_latency);
      add_edge(from, d);
      from = d;
    }
    step(op, m, pairs, alpha, sized, from, mid);
    step(op, m, pairs, alpha, sized, mid, to);
  }

  // GPUs grouped by NVLink domain, in order of first appearance (collective_cost.cpp's by_domain).
  std::vector<std::vector<int>> by_domain(const std::vector<int>& gpus) const {
    std::map<int, std::size_t> index;
    std::vector<std::vector<int>> out;
    for (int g : gpus) {
      auto [it, fresh] = index.emplace(cluster.node_of(g), out.size());
      if (fresh) out.emplace_back();
      out[it->second].push_back(g);
    }
    return out;
  }
  double ring_alpha(const std::vector<int>& m) const {
    double a = 0;
    for (std::size_t i = 0; i < m.size(); ++i) a = std::max(a, hop(m[i], m[(i + 1) % m.size()]).first);
    return a;
  }

  // Hierarchical: rings inside each NVLink domain (RS, and AG for an all-reduce) and, per rail
  // position j, a ring across domains of S/g. NCCL pipelines chunks through the phases, which the
  // analytic formula counts as Σ latencies + max(bandwidth terms); here both phases run at once,
  // the inter-domain rings after a delay of the intra phase's latency (the pipeline's fill) and
  // the intra rings followed by the inter phase's latency (its drain), which gives exactly that.
  void hierarchical(int op, CollKind kind, const std::vector<std::vector<int>>& domains, double bytes, int from, int to) {
    const double n = static_cast<double>(domains.size());
    std::size_t g = domains.front().size();
    for (const auto& d : domains) g = std::min(g, d.size());
    const int phases = kind == CollKind::AllReduce ? 2 : 1;
    const int steps = kind == CollKind::AllReduce ? 2 * (static_cast<int>(n) - 1) : static_cast<int>(n) - 1;
    double intra_alpha = 0;
    const int intra_done = add_task(TaskKind::Gate, op);
    for (const auto& d : domains) {
      const int p = static_cast<int>(d.size());
      if (p < 2) {
        add_edge(from, intra_done);
        continue;
      }
      intra_alpha = std::max(intra_alpha, phases * (p - 1) * ring_alpha(d));
      ring(op, d, phases * (p - 1), bytes / p, from, intra_done);
    }
    std::vector<int> rail0;
    for (const auto& d : domains) rail0.push_back(d.front());
    const int drain = add_task(TaskKind::Delay, op, steps * ring_alpha(rail0));
    add_edge(intra_done, drain);
    add_edge(drain, to);
    const int fill = add_task(TaskKind::Delay, op, intra_alpha);
    add_edge(from, fill);
    std::vector<int> rail;
    for (std::size_t j = 0; j < g; ++j) {
      rail.clear();
      for (const auto& d : domains) rail.push_back(d[j]);
      ring(op, rail, steps, bytes / static_cast<double>(g) / n, fill, to);
    }
  }

  // All-to-all from a p×p byte matrix. NVLink pairs go direct. A network pair a → b (node i → node
  // j, rails r → r') goes the way all_to_all_routing() picks (collective_cost.hpp): as NCCL PXN sends
  // it, over NVLink to node i's GPU on rail r' (when it is in the group), then over rail r' to b; or
  // as DeepEP forwards it, over rail r to node j's GPU on rail r, then over NVLink to b. Legs through
  // one proxy merge into one flow per (sender, proxy) and (proxy, receiver). Both legs start at once
  // (chunks are pipelined through the proxy). NVLink flows are scaled by (route bandwidth / (NVLink bw × a2a efficiency)) so that,
  // alone, they run at the achieved all-to-all NVLink rate the analytic formula uses.
  void all_to_all(int op, const std::vector<int>& m, const A2aMatrix& mat, double analytic_dur, int from,
                  int to) {
    const std::size_t p = m.size();
    const int gpn = cluster.gpus_per_node();
    const bool pxn = gpn > 1 && cluster.fabric().kind != "links";
    const bool receive_side = pxn && all_to_all_routing(cluster, m, mat, coll) == A2aRouting::ReceiveSide;
    if (gpu_pos.empty()) gpu_pos.assign(static_cast<std::size_t>(cluster.num_gpus()), -1);
    for (std::size_t i = 0; i < p; ++i) gpu_pos[static_cast<std::size_t>(m[i])] = static_cast<int>(i);
    nv.assign(p * p, 0);
    net.assign(p * p, 0);
    for (const A2aMatrix::Entry& pair : mat.entries()) {  // in (sender, receiver) order
        const std::size_t i = pair.from, j = pair.to;
        const double b = pair.bytes;
        if (i == j || !(b > 0)) continue;
        const int ga = m[i], gb = m[j];
        if (cluster.same_nvlink_domain(ga, gb)) {
          nv[i * p + j] += b;
          continue;
        }
        if (receive_side) {
          const int x = gpu_pos[static_cast<std::size_t>(cluster.node_of(gb) * gpn + cluster.rail_of(ga))];
          if (x < 0) {
            net[i * p + j] += b;
          } else {
            net[i * p + static_cast<std::size_t>(x)] += b;
            if (static_cast<std::size_t>(x) != j) nv[static_cast<std::size_t>(x) * p + j] += b;
          }
          continue;
        }
        const int x = pxn ? gpu_pos[static_cast<std::size_t>(cluster.node_of(ga) * gpn + cluster.rail_of(gb))] : -1;
        if (x < 0) {
          net[i * p + j] += b;
        } else {
          net[static_cast<std::size_t>(x) * p + j] += b;
          if (static_cast<std::size_t>(x) != i) nv[i * p + static_cast<std::size_t>(x)] += b;
        }
      }
    for (std::size_t i = 0; i < p; ++i) gpu_pos[static_cast<std::size_t>(m[i])] = -1;
    const double a2a_nv_bw = cluster.gpu().nvlink_bw * coll.a2a_nvlink_efficiency;
    bool any = false;
    for (std::size_t i = 0; i < p; ++i)
      for (std::size_t j = 0; j < p; ++j) {
        for (int leg = 0; leg < 2; ++leg) {
          double b = (leg == 0 ? nv : net)[i * p + j];
          if (!(b > 0)) continue;
          if (leg == 0) b *= platform.route(m[i], m[j]).bandwidth / a2a_nv_bw;
          const int f = flow(op, m[i], m[j], b);
          if (f < 0) continue;
          add_edge(from, f);
          add_edge(f, to);
          any = true;
        }
      }
    if (!any) {  // nothing to move: the formula's latency alone
      const int d = add_task(TaskKind::Delay, op, analytic_dur);
      add_edge(from, d);
      add_edge(d, to);
    }
  }

  CollectiveTime collective(const StepOp& op, const std::vector<int>& gpus) {
    auto key = std::make_tuple(op.group, static_cast<int>(op.coll), op.bytes, static_cast<int>(op.algo));
    auto it = coll_cache.find(key);
    if (it == coll_cache.end())
      it = coll_cache.emplace(key, collective_time(cluster, op.coll, gpus, op.bytes, op.algo, coll)).first;
    return it->second;
  }

  // A delay task of the collective's call latency after `from` (collective_cost.hpp); returns
  // the task the algorithm's flows start from.
  int after_call(int op, CollKind kind, int from) {
    const double c = call_latency(kind, coll);
    if (!(c > 0)) return from;
    const int d = add_task(TaskKind::Delay, op, c);
    add_edge(from, d);
    return d;
  }

  // Expands operation i between its gates; returns its contention-free duration.
  double expand(int i, int from, int to) {
    const StepProgram& p = *prog;
    const StepOp& op = p.ops[static_cast<std::size_t>(i)];
    auto gpu = [&](int rank) { return p.rank_gpu[static_cast<std::size_t>(rank)]; };
    switch (op.type) {
      case OpType::Compute: {
        const double dur = analytic.op_time(p, op);
        if (dur > 0) {
          const int t = add_task(TaskKind::Exec, i, 0, dur * kSimgridHostSpeed, gpu(op.rank));
          add_edge(from, t);
          add_edge(t, to);
        } else {
          add_edge(from, to);
        }
        return dur;
      }
      case OpType::Send: {
        const int t = flow(i, gpu(op.rank), gpu(op.peer), op.bytes);
        if (t >= 0) {
          add_edge(from, t);
          add_edge(t, to);
        } else {
          add_edge(from, to);
        }
        return p2p_time(cluster, gpu(op.rank), gpu(op.peer), op.bytes, coll);
      }
      case OpType::Collective: break;
    }
    std::vector<int> gpus;
    for (int r : p.groups[static_cast<std::size_t>(op.group)]) gpus.push_back(gpu(r));
    const std::size_t n = gpus.size();
    if (op.coll == CollKind::AllToAll) {
      if (n <= 1 || (op.matrix < 0 && !(op.bytes > 0))) {
        add_edge(from, to);
        return 0;
      }
      const A2aMatrix* mat = nullptr;
      A2aMatrix uniform;
      double dur = 0;
      if (op.matrix >= 0) {
        mat = &p.a2a[static_cast<std::size_t>(op.matrix)];
        dur = all_to_all_time(cluster, gpus, *mat, coll);
      } else {
        uniform = A2aMatrix::uniform(n, op.bytes / static_cast<double>(n));
        mat = &uniform;
        dur = collective(op, gpus).seconds;
      }
      all_to_all(i, gpus, *mat, dur - call_latency(op.coll, coll), after_call(i, op.coll, from), to);
      return dur;
    }
    const CollectiveTime ct = collective(op, gpus);
    if (n <= 1 || !(op.bytes > 0) || !(ct.seconds > 0)) {
      add_edge(from, to);
      return ct.seconds;
    }
    from = after_call(i, op.coll, from);
    auto domains = by_domain(gpus);
    const bool one_domain = domains.size() == 1;
    const int pi = static_cast<int>(n);
    const int ring_steps = op.coll == CollKind::AllReduce ? 2 * (pi - 1) : pi - 1;
    const double rb = op.bytes / small_group_fraction(pi, one_domain, coll);  // collective_cost.hpp
    auto do_ring = [&] { ring(i, gpus, ring_steps, rb / pi, from, to); };
    switch (ct.algo) {
      case CollAlgo::Tree:
        if (op.coll == CollKind::AllReduce) tree(i, gpus, rb, from, to);
        else do_ring();
        break;
      case CollAlgo::Nvls:
        if (op.coll == CollKind::AllReduce && one_domain && n > 1) nvls(i, gpus, op.bytes, from, to);
        else if (!one_domain) hierarchical(i, op.coll, domains, op.bytes, from, to);
        else do_ring();
        break;
      case CollAlgo::Hierarchical:
        if (one_domain) do_ring();
        else hierarchical(i, op.coll, domains, op.bytes, from, to);
        break;
      default: do_ring(); break;
    }
    return ct.seconds;
  }

  // --- running ---
  void make_ready(int t) {
    const Task& k = tasks[static_cast<std::size_t>(t)];
    if (k.delay > 0) {
      ++report.timers;
      simgrid::kernel::timer::Timer::set(sg4::Engine::get_clock() + k.delay, [this, t] {
        guarded([this, t] {
          launch(t);
          drain();
        });
      });
    } else {
      launch(t);
    }
  }
  void launch(int t) {
    Task& k = tasks[static_cast<std::size_t>(t)];
    if (k.kind == TaskKind::Exec) {
      sg4::ExecPtr e = sg4::Exec::init();
      e->set_flops_amount(k.amount);
      e->set_host(platform.host(k.src));
      e->set_data(&k);
      e->start();
      live.push_back(e);
      ++report.execs;
    } else if (k.kind == TaskKind::Flow) {
      sg4::CommPtr c = sg4::Comm::sendto_init(platform.host(k.src), platform.host(k.dst));
      c->set_payload_size(static_cast<std::uint64_t>(k.amount));
      c->set_data(&k);
      c->start();
      live.push_back(c);
      ++report.flows;
    } else {
      work.push_back(t);  // gates and delays end when they start
    }
  }
  void drain() {
    if (draining) return;
    draining = true;
    while (!work.empty()) {
      const int t = work.back();
      work.pop_back();
      finish(t);
    }
    draining = false;
  }
  void finish(int t) {
    const Task& k = tasks[static_cast<std::size_t>(t)];
    const double now = sg4::Engine::get_clock() - t0;
    if (k.kind == TaskKind::Gate && k.op >= 0) {
      const auto op = static_cast<std::size_t>(k.op);
      if (op_begin[op] == t) {
        start[op] = now;
        pred[op] = k.trigger >= 0 ? tasks[static_cast<std::size_t>(k.trigger)].op : -1;
      } else if (op_end_gate[op] == t) {
        end[op] = now;
        ++ops_done;
      }
    }
    for (int e = k.first_edge; e >= 0; e = edge_next[static_cast<std::size_t>(e)]) {
      Task& s = tasks[static_cast<std::size_t>(edge_to[static_cast<std::size_t>(e)])];
      s.trigger = t;
      if (--s.pending == 0) make_ready(edge_to[static_cast<std::size_t>(e)]);
    }
  }
  template <class F>
  void guarded(F f) {
    if (error) return;
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
  }
  void activity_done(void* data) override {
    auto* k = static_cast<Task*>(data);
    if (tasks.empty() || k < tasks.data() || k >= tasks.data() + tasks.size()) return;  // not ours
    guarded([this, k] {
      work.push_back(static_cast<int>(k - tasks.data()));
      drain();
    });
  }

  StepTiming run(const StepProgram& p, std::vector<TimelineEvent>* timeline);
  void build(const StepProgram& p);
  void fill_report(const StepProgram& p, const StepTiming& t);
};

void SimgridExecutor::State::build(const StepProgram& p) {
  prog = &p;
  const std::size_t n = p.ops.size();
  tasks.clear();
  edge_to.clear();
  edge_next.clear();
  work.clear();
  live.clear();
  coll_cache.clear();
  for (int d : dlink_touched) dlink_bytes[static_cast<std::size_t>(d)] = 0;
  dlink_touched.clear();
  dlink_bytes.resize(2 * static_cast<std::size_t>(cluster.num_links()), 0);
  op_begin.assign(n, -1);
  op_end_gate.assign(n, -1);
  start.assign(n, 0);
  end.assign(n, 0);
  pred.assign(n, -1);
  op_analytic.assign(n, 0);
  ops_done = 0;
  error = nullptr;
  tasks.reserve(4 * n);

  std::vector<std::array<int, 2>> last(static_cast<std::size_t>(p.num_ranks()), {-1, -1});
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

StepTiming SimgridExecutor::State::run(const StepProgram& p, std::vector<TimelineEvent>* timeline) {
  const auto wall0 = std::chrono::steady_clock::now();
  SimgridWorld& world = SimgridWorld::instance();
  if (world.running()) throw std::logic_error("SimgridExecutor::run: a SimGrid run is already in progress");
  check_program(p, cluster.num_gpus());
  report = ContentionReport{};
  build(p);
  t0 = sg4::Engine::get_clock();
  for (std::size_t t = 0; t < tasks.size(); ++t)
    if (tasks[t].pending == 0) guarded([this, t] { make_ready(static_cast<int>(t)); });
  guarded([this] { drain(); });
  world.run(*this);
  live.clear();
  if (error) std::rethrow_exception(error);
  if (ops_done != p.ops.size())
    throw std::logic_error("SimgridExecutor: " + std::to_string(p.ops.size() - ops_done) +
                           " operations never finished (internal error)");

  // The same summary as the analytic executor's, from this schedule.
  StepTiming t = summarize_schedule(p, start, end, pred, timeline);
  fill_report(p, t);
  report.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return t;
}

void SimgridExecutor::State::fill_report(const StepProgram& p, const StepTiming& t) {
  ContentionReport& r = report;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const StepOp& op = p.ops[i];
    if (op.type == OpType::Compute) continue;
    const auto slot = static_cast<std::size_t>(op.type == OpType::Send ? kContentionSendSlot : static_cast<int>(op.coll));
    r.simgrid_seconds[slot] += end[i] - start[i];
    r.analytic_seconds[slot] += op_analytic[i];
    ++r.ops[slot];
  }
  r.makespan = t.makespan;
  r.analytic_makespan = analytic.run(p).makespan;
  double worst = -1;
  r.links.clear();
  for (int d : dlink_touched) {
    const int id = d / 2;
    const auto cls = static_cast<std::size_t>(cluster.link(id).cls);
    const double bytes = dlink_bytes[static_cast<std::size_t>(d)];
    const double busy = bytes / platform.capacity(id);
    r.links.push_back({d, bytes, busy});
    LinkClassLoad& l = r.by_class[cls];
    l.bytes += bytes;
    ++l.links_used;
    if (busy > l.busiest_seconds) {
      l.busiest_seconds = busy;
      l.busiest_link = id;
    }
  }
  std::sort(r.links.begin(), r.links.end(), [](const auto& a, const auto& b) { return a.dlink < b.dlink; });
  for (int c = 0; c < kNumLinkClasses; ++c) {
    LinkClassLoad& l = r.by_class[static_cast<std::size_t>(c)];
    l.utilization = t.makespan > 0 ? l.busiest_seconds / t.makespan : 0;
    if (l.links_used > 0 && l.busiest_seconds > worst) {
      worst = l.busiest_seconds;
      r.most_loaded_class = c;
    }
  }
}

SimgridExecutor::SimgridExecutor(const Cluster& cluster, ComputeModel compute, CollectiveModel collective)
    : st_(std::make_unique<State>(cluster, compute, collective)) {}

SimgridExecutor::~SimgridExecutor() = default;

StepTiming SimgridExecutor::run(const StepProgram& program, std::vector<TimelineEvent>* timeline) const {
  // A folded program (the fast path's one layer standing for many) has no meaning as flows: its
  // operations would run once instead of `weight` times. The simgrid tier lowers its samples whole.
  for (const StepOp& op : program.ops)
    if (op.weight != 1)
      throw std::logic_error("SimgridExecutor: a folded step program (operation weight " + std::to_string(op.weight) +
                             "); serve through the simgrid tier (sim/simgrid/fidelity.hpp) or ServingOptions::set_exact()");
  return st_->run(program, timeline);
}

const ContentionReport& SimgridExecutor::last_contention() const { return st_->report; }

const std::vector<double>& SimgridExecutor::last_op_ends() const { return st_->end; }

SimgridPlatform& SimgridExecutor::platform() const { return st_->platform; }

}  // namespace shardsim
