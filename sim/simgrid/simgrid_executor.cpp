// sim/simgrid/simgrid_executor.cpp — step programs run as SimGrid activities, driven from maestro.
//
// Owns: the event loop glue (activity completions and kernel timers start the tasks whose
// predecessors are done) and the StepTiming / ContentionReport bookkeeping; the program's
// expansion into tasks is TaskGraph's (task_graph.hpp).
// How it runs: the whole program is expanded before the simulation starts. No actor is involved:
// tasks are started from maestro (before Engine::run, in timer callbacks and in
// Activity::on_completion), so one Engine::run() executes the whole step. A task that becomes
// ready waits `delay` (route latency + per-step overhead, or a modelled duration) on a kernel
// timer, then starts its activity; gates and delays end as they start.
// Thread-safety: none (see the header).
#include "sim/simgrid/simgrid_executor.hpp"

#include "sim/step/schedule_summary.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <sstream>
#include <stdexcept>

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>

#include "sim/simgrid/task_graph.hpp"
#include "sim/step/analytic_executor.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

namespace sg4 = simgrid::s4u;

static_assert(static_cast<int>(LinkClass::DragonflyGlobal) + 1 == kNumLinkClasses,
              "kNumLinkClasses must cover every LinkClass");

namespace {

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
      : cluster(c), platform(SimgridWorld::instance().platform(c)), analytic(c, cm, col), graph(c, platform, col, analytic) {}

  const Cluster& cluster;
  SimgridPlatform& platform;
  AnalyticExecutor analytic;   // compute durations and the contention-free reference
  TaskGraph graph;             // the program being run, expanded
  ContentionReport report;

  // --- one run ---
  std::vector<double> start, end;           // per operation, seconds from t0
  std::vector<int> pred;                    // per operation: the one whose end released it
  std::vector<int> work;                    // finished tasks whose successors are not yet released
  bool draining = false;
  std::vector<sg4::ActivityPtr> live;       // keeps activities alive until the run is over
  double t0 = 0;
  std::size_t ops_done = 0;
  std::exception_ptr error;

  // --- running ---
  void make_ready(int t) {
    const Task& k = graph.tasks[static_cast<std::size_t>(t)];
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
    Task& k = graph.tasks[static_cast<std::size_t>(t)];
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
    const Task& k = graph.tasks[static_cast<std::size_t>(t)];
    const double now = sg4::Engine::get_clock() - t0;
    if (k.kind == TaskKind::Gate && k.op >= 0) {
      const auto op = static_cast<std::size_t>(k.op);
      if (graph.op_begin[op] == t) {
        start[op] = now;
        pred[op] = k.trigger >= 0 ? graph.tasks[static_cast<std::size_t>(k.trigger)].op : -1;
      } else if (graph.op_end_gate[op] == t) {
        end[op] = now;
        ++ops_done;
      }
    }
    for (int e = k.first_edge; e >= 0; e = graph.edge_next[static_cast<std::size_t>(e)]) {
      Task& s = graph.tasks[static_cast<std::size_t>(graph.edge_to[static_cast<std::size_t>(e)])];
      s.trigger = t;
      if (--s.pending == 0) make_ready(graph.edge_to[static_cast<std::size_t>(e)]);
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
    if (graph.tasks.empty() || k < graph.tasks.data() || k >= graph.tasks.data() + graph.tasks.size()) return;  // not ours
    guarded([this, k] {
      work.push_back(static_cast<int>(k - graph.tasks.data()));
      drain();
    });
  }

  void reset(std::size_t ops) {
    work.clear();
    live.clear();
    start.assign(ops, 0);
    end.assign(ops, 0);
    pred.assign(ops, -1);
    ops_done = 0;
    error = nullptr;
  }

  StepTiming run(const StepProgram& p, std::vector<TimelineEvent>* timeline);
  void fill_report(const StepProgram& p, const StepTiming& t);
};

StepTiming SimgridExecutor::State::run(const StepProgram& p, std::vector<TimelineEvent>* timeline) {
  const auto wall0 = std::chrono::steady_clock::now();
  SimgridWorld& world = SimgridWorld::instance();
  if (world.running()) throw std::logic_error("SimgridExecutor::run: a SimGrid run is already in progress");
  check_program(p, cluster.num_gpus());
  report = ContentionReport{};
  reset(p.ops.size());
  graph.build(p);
  t0 = sg4::Engine::get_clock();
  for (std::size_t t = 0; t < graph.tasks.size(); ++t)
    if (graph.tasks[t].pending == 0) guarded([this, t] { make_ready(static_cast<int>(t)); });
  guarded([this] { drain(); });
  world.run(*this);
  live.clear();
  if (error) std::rethrow_exception(error);
  if (ops_done != p.ops.size())
    throw std::logic_error("SimgridExecutor: " + std::to_string(p.ops.size() - ops_done) +
                           " operations never finished (internal error)");

  // The same summary as the analytic executor's, from this schedule.
  StepTiming t = summarize_schedule(p, start, end, pred, timeline);
  std::vector<const GpuSpec*> rank_gpu;
  for (const int g : p.rank_gpu) rank_gpu.push_back(&cluster.gpu_of(g));
  add_compute_work(p, rank_gpu, t);
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
    r.analytic_seconds[slot] += graph.op_analytic[i];
    ++r.ops[slot];
  }
  r.makespan = t.makespan;
  r.analytic_makespan = analytic.run(p).makespan;
  double worst = -1;
  r.links.clear();
  for (int d : graph.dlink_touched) {
    const int id = d / 2;
    const auto cls = static_cast<std::size_t>(cluster.link(id).cls);
    const double bytes = graph.dlink_bytes[static_cast<std::size_t>(d)];
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
    if (op.analytic_only())
      throw std::logic_error("SimgridExecutor: a folded step program (operation weight " + std::to_string(op.weight) +
                             ", or one kernel for a TP group); serve through the simgrid tier (sim/simgrid/fidelity.hpp) or "
                             "ServingOptions::set_exact()");
  return st_->run(program, timeline);
}

const AnalyticExecutor& SimgridExecutor::compute_pricer() const { return st_->analytic; }

const ContentionReport& SimgridExecutor::last_contention() const { return st_->report; }

const std::vector<double>& SimgridExecutor::last_op_ends() const { return st_->end; }

SimgridPlatform& SimgridExecutor::platform() const { return st_->platform; }

}  // namespace shardsim
