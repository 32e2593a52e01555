// tests/common/worker_pool_test.cpp — the worker-process pool (common/worker_pool.hpp) and the wire encoding
// of what will travel through it (sim/simgrid/wire.hpp).
// Pools fork: each test constructs its pool before starting any thread of its own, and joins its
// threads before the pool is destroyed. No timing assertions here (benchmarks live apart).
#include <doctest/doctest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>
#include <thread>

#include "sim/step/analytic_executor.hpp"
#include "sim/step/lowering.hpp"
#include "sim/plan/plan.hpp"
#include "sim/simgrid/wire.hpp"
#include "common/worker_pool.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

// Open descriptors of this process, not counting the one used to list them.
std::vector<int> open_fds() {
  std::vector<int> fds;
  DIR* d = ::opendir("/proc/self/fd");
  REQUIRE(d != nullptr);
  const int own = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    if (fd != own) fds.push_back(fd);
  }
  ::closedir(d);
  return fds;
}

// True when no process (not even a zombie) has this pid.
bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

// The state letter of /proc/<pid>/stat ('Z' for a zombie), or 0 when there is no such process.
char process_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : 0;
}

// The handler used by most cases. Its call counter lives in the worker process (each worker has
// its own copy, starting at zero).
WorkerHandler test_handler() {
  return [calls = 0](std::string_view req) mutable -> std::string {
    ++calls;
    if (req == "count") return std::to_string(calls);
    if (req == "pid") return std::to_string(::getpid());
    if (req == "die:kill") ::raise(SIGKILL);
    if (req == "die:exit") ::_exit(3);
    if (req == "throw") throw std::runtime_error("bad plan 7");
    if (req == "throw:int") throw 42;
    if (req == "sleep") ::sleep(30);
    if (req == "fds") return std::to_string(open_fds().size());
    if (req.starts_with("echo:")) return std::string(req.substr(5));
    if (req.starts_with("who:")) return std::to_string(::getpid()) + "|" + std::string(req.substr(4));
    return "unknown request";
  };
}

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!same_bits(a[i], b[i])) return false;
  return true;
}

template <std::size_t N>
bool same_bits(const std::array<double, N>& a, const std::array<double, N>& b) {
  for (std::size_t i = 0; i < N; ++i)
    if (!same_bits(a[i], b[i])) return false;
  return true;
}

// Field-by-field, bit-for-bit equality of two programs.
void check_same(const StepProgram& a, const StepProgram& b) {
  CHECK(a.rank_gpu == b.rank_gpu);
  CHECK(a.groups == b.groups);
  REQUIRE(a.a2a.size() == b.a2a.size());
  for (std::size_t i = 0; i < a.a2a.size(); ++i) {
    CHECK(a.a2a[i].members() == b.a2a[i].members());
    CHECK(a.a2a[i].entries().size() == b.a2a[i].entries().size());
    CHECK(same_bits(a.a2a[i].dense(), b.a2a[i].dense()));
  }
  CHECK(a.deps == b.deps);
  CHECK(same_bits(a.compute_share, b.compute_share));
  CHECK(a.allreduce == b.allreduce);
  REQUIRE(a.ops.size() == b.ops.size());
  int mismatches = 0;
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const StepOp &x = a.ops[i], &y = b.ops[i];
    const bool same = x.type == y.type && x.cls == y.cls && x.layer == y.layer && x.stage == y.stage &&
                      x.rank == y.rank && same_bits(x.flops, y.flops) && same_bits(x.hbm_bytes, y.hbm_bytes) &&
                      x.math == y.math && x.group == y.group && x.coll == y.coll && x.algo == y.algo &&
                      same_bits(x.bytes, y.bytes) && x.matrix == y.matrix && x.peer == y.peer && same_bits(x.not_before, y.not_before) &&
                      x.dep_begin == y.dep_begin && x.dep_end == y.dep_end;
    if (!same) ++mismatches;
  }
  CHECK(mismatches == 0);
}

void check_same(const StepTiming& a, const StepTiming& b) {
  CHECK(same_bits(a.makespan, b.makespan));
  CHECK(same_bits(a.stage_time, b.stage_time));
  CHECK(same_bits(a.critical, b.critical));
  CHECK(same_bits(a.busy, b.busy));
  CHECK(same_bits(a.comm_busy, b.comm_busy));
  CHECK(same_bits(a.comm_exposed, b.comm_exposed));
  CHECK(same_bits(a.expert_imbalance, b.expert_imbalance));
  CHECK(same_bits(a.expert_time, b.expert_time));
  CHECK(same_bits(a.coll_by_kind, b.coll_by_kind));
  CHECK(same_bits(a.idle_on_path, b.idle_on_path));
}

// A step of a real MoE model: 8 attention-DP groups feeding EP=8 experts, prefill and decode mixed.
struct MoeStep {
  ModelSpec model = load_model("qwen3-30b-a3b");
  Cluster cluster = load_cluster("dgx-h100:1");
  std::unique_ptr<RoutingSource> routing = make_routing(
      "synthetic:seed=5", {model.num_moe_layers(), model.experts, model.top_k, model.n_group, model.topk_group});
  StepProgram program;
  MoeStep(const std::string& plan_text = "tp=1,ep=8,attn_dp=8", int groups = 8) {
    Lowering low(plan_from_string(plan_text, 8, {}), model, cluster, routing.get());
    ReplicaBatch batch;
    batch.groups.resize(static_cast<std::size_t>(groups));
    for (int g = 0; g < groups; ++g)
      for (int q = 0; q < 6; ++q) {
        const auto id = static_cast<std::uint32_t>(g * 6 + q);
        if (q == 0)
          batch.groups[static_cast<std::size_t>(g)].push_back(SeqWork{id, 0, 64 + 8 * g, 0, true, 0});  // prefill
        else
          batch.groups[static_cast<std::size_t>(g)].push_back(SeqWork{id, 200, 1, 200 + q, true, 0});  // decode
      }
    program = low.lower(batch);
  }
};

// A small program exercising every enum value and awkward doubles.
StepProgram odd_program() {
  StepProgram p;
  p.rank_gpu = {3, 1, 4, 1};
  p.add_group({0, 1, 2, 3});
  p.add_group({});
  p.a2a.push_back(A2aMatrix::from_dense({-0.0, std::numeric_limits<double>::infinity(),
                                          std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::denorm_min()}));
  p.a2a.push_back(A2aMatrix{});
  StepOp c;
  c.type = OpType::Compute;
  c.cls = OpClass::PipelineP2p;
  c.rank = 2;
  c.flops = 1e300;
  c.hbm_bytes = 5e-324;
  c.math = Dtype::FP4;
  const int a = p.add(c, {});
  StepOp coll;
  coll.type = OpType::Collective;
  coll.cls = OpClass::EpCombine;
  coll.layer = 60;
  coll.stage = 3;
  coll.group = 0;
  coll.coll = CollKind::AllToAll;
  coll.algo = CollAlgo::Pairwise;
  coll.matrix = 0;
  coll.bytes = -0.0;
  const int b = p.add(coll, {a, -1});
  StepOp send;
  send.type = OpType::Send;
  send.rank = 0;
  send.peer = 3;
  send.bytes = 12345.678;
  send.not_before = 0.125;
  p.compute_share = 0.8484848484848485;  // DeepEP's 20 of 132 SMs held beside the compute
  p.allreduce = AllReduceKernels::Sglang;  // the last value
  p.add(send, {a, b});
  return p;
}

}  // namespace

// --- the pool ----------------------------------------------------------------------------

TEST_CASE("pool: echo round-trip, including empty and large requests") {
  WorkerPool pool(2, test_handler());
  CHECK(pool.size() == 2);
  CHECK(pool.restarts() == 0);
  CallResult r = pool.call("echo:hello");
  REQUIRE(r.ok());
  CHECK(r.reply == "hello");
  CHECK(r.error.empty());
  CHECK(pool.call("echo:").reply.empty());

  std::string big = "echo:";
  for (int i = 0; i < 3'000'000; ++i) big.push_back(static_cast<char>('a' + i % 26));  // > socket buffers
  r = pool.call(big);
  REQUIRE(r.ok());
  CHECK(r.reply == big.substr(5));

  std::string binary("echo:\0\1\2\xff", 9);
  CHECK(pool.call(binary).reply == binary.substr(5));
}

TEST_CASE("pool: concurrent callers each get their own reply") {
  WorkerPool pool(2, test_handler());
  const std::vector<pid_t> workers = pool.worker_pids();
  constexpr int kThreads = 8, kCalls = 150;
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::set<pid_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const std::string tag = std::to_string(t) + ":" + std::to_string(i) + ":" + std::string(static_cast<std::size_t>(i), 'x');
        const CallResult r = pool.call("who:" + tag);
        const auto bar = r.reply.find('|');
        if (!r.ok() || bar == std::string::npos || r.reply.substr(bar + 1) != tag) {
          ++wrong[static_cast<std::size_t>(t)];
          continue;
        }
        seen[static_cast<std::size_t>(t)].insert(static_cast<pid_t>(std::stoi(r.reply.substr(0, bar))));
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK(wrong[static_cast<std::size_t>(t)] == 0);
  // Every reply came from one of the pool's two workers, and none had to be replaced.
  for (const auto& s : seen)
    for (pid_t pid : s) CHECK(std::find(workers.begin(), workers.end(), pid) != workers.end());
  CHECK(pool.restarts() == 0);
  CHECK(pool.worker_pids() == workers);
}

TEST_CASE("pool: a worker killed by a signal fails its call — the next call runs on a fresh worker") {
  WorkerPool pool(1, test_handler());
  const pid_t first = pool.worker_pids().at(0);
  CHECK(pool.call("count").reply == "1");

  CallResult r = pool.call("die:kill");
  CHECK(r.status == CallStatus::WorkerDied);
  CHECK(r.error.find("worker died: killed by signal 9") == 0);
  CHECK(r.reply.empty());
  CHECK(pool.restarts() == 1);
  CHECK(process_gone(first));  // reaped: no zombie left behind

  const pid_t second = pool.worker_pids().at(0);
  CHECK(second != first);
  r = pool.call("count");
  REQUIRE(r.ok());
  CHECK(r.reply == "1");  // a fresh process: its counter starts again
  CHECK(pool.restarts() == 1);
}

TEST_CASE("pool: a worker that exits fails its call with its exit status and is replaced") {
  WorkerPool pool(2, test_handler());
  CallResult r = pool.call("die:exit");
  CHECK(r.status == CallStatus::WorkerDied);
  CHECK(r.error == "worker died: exited with status 3");
  CHECK(pool.restarts() == 1);
  CHECK(pool.call("echo:again").reply == "again");
  for (pid_t pid : pool.worker_pids()) CHECK(pid > 0);
}

TEST_CASE("pool: a handler that crashes on every request is backed off, not re-forked forever") {
  WorkerPool pool(2, test_handler());
  int died = 0, refused = 0;
  for (int i = 0; i < 40; ++i) {
    CallResult r = pool.call("die:exit");
    died += r.status == CallStatus::WorkerDied ? 1 : 0;
    refused += r.status == CallStatus::Refused ? 1 : 0;
  }
  // After 16 deaths in a row no worker is started; the workers still alive die on their next call.
  CHECK(died >= 16);
  CHECK(died <= 16 + 2);
  CHECK(refused == 40 - died);
  CHECK(pool.restarts() < 16);
  CallResult r = pool.call("echo:x");  // … and says why
  CHECK(r.status == CallStatus::Refused);
  CHECK(r.error.find("in a row") != std::string::npos);
}

TEST_CASE("pool: a success between deaths resets the back-off") {
  WorkerPool pool(1, test_handler());
  for (int i = 0; i < 40; ++i) {
    CHECK(pool.call("die:exit").status == CallStatus::WorkerDied);
    CHECK(pool.call("echo:ok").reply == "ok");
  }
}

TEST_CASE("pool: a parent that ignores SIGCHLD still learns how its workers died") {
  const auto previous = ::signal(SIGCHLD, SIG_IGN);
  {
    WorkerPool pool(1, test_handler());
    CHECK(pool.call("die:exit").error == "worker died: exited with status 3");
    CHECK(pool.call("echo:ok").reply == "ok");
  }
  ::signal(SIGCHLD, previous);
}

TEST_CASE("pool: a worker found dead while idle is replaced without failing the call") {
  WorkerPool pool(1, test_handler());
  const pid_t pid = pool.worker_pids().at(0);
  REQUIRE(::kill(pid, SIGKILL) == 0);
  // The zygote reaps only when asked, so the worker stays a zombie: wait until it is one.
  for (int i = 0; i < 5000 && process_state(pid) != 'Z'; ++i) ::usleep(1000);
  REQUIRE(process_state(pid) == 'Z');
  CallResult r = pool.call("count");
  REQUIRE(r.ok());
  CHECK(r.reply == "1");
  CHECK(pool.restarts() == 1);
  CHECK(process_gone(pid));
}

TEST_CASE("pool: a throwing handler gives an error result and its worker lives on") {
  WorkerPool pool(1, test_handler());
  const pid_t pid = pool.worker_pids().at(0);
  CallResult r = pool.call("throw");
  CHECK(r.status == CallStatus::HandlerError);
  CHECK(r.error == "bad plan 7");
  CHECK(r.reply.empty());
  r = pool.call("throw:int");
  CHECK(r.status == CallStatus::HandlerError);
  CHECK(r.error == "unknown exception");
  r = pool.call("count");
  CHECK(r.reply == "3");  // the same process, which saw both failed calls
  CHECK(pool.restarts() == 0);
  CHECK(pool.worker_pids().at(0) == pid);
}

TEST_CASE("pool: per-worker state persists across calls") {
  WorkerPool pool(1, test_handler());
  for (int i = 1; i <= 20; ++i) CHECK(pool.call("count").reply == std::to_string(i));
  // The state lives in the worker, not in the parent's copy of the handler.
  CHECK(pool.call("pid").reply == std::to_string(pool.worker_pids().at(0)));
}

TEST_CASE("pool: a call past its timeout kills the worker — the pool goes on") {
  WorkerPoolOptions options;
  options.call_timeout = std::chrono::milliseconds(150);
  WorkerPool pool(1, test_handler(), options);
  const pid_t pid = pool.worker_pids().at(0);
  CallResult r = pool.call("sleep");
  CHECK(r.status == CallStatus::TimedOut);
  CHECK(r.error.find("no reply within 150 ms") != std::string::npos);
  CHECK(process_gone(pid));
  CHECK(pool.restarts() == 1);
  CHECK(pool.call("echo:awake").reply == "awake");
}

TEST_CASE("pool: workers hold only stdio and their own socket") {
  // A descriptor the parent holds at construction must not leak into workers (a second pool's
  // workers would otherwise keep the first pool's sockets open).
  int extra[2];
  REQUIRE(::pipe(extra) == 0);
  WorkerPool pool(1, test_handler());
  CHECK(pool.call("fds").reply == "4");  // 0, 1, 2 and the socket
  ::close(extra[0]);
  ::close(extra[1]);
}

TEST_CASE("pool: destruction leaves no zombies and no descriptors behind") {
  const std::vector<int> fds_before = open_fds();
  std::vector<pid_t> pids;
  {
    WorkerPool first(2, test_handler());
    WorkerPool second(3, test_handler());  // forked while the first pool's sockets are open
    CHECK(first.call("die:kill").status == CallStatus::WorkerDied);  // one replacement too
    CHECK(second.call("echo:x").ok());
    for (const WorkerPool* p : {&first, &second}) {
      for (pid_t pid : p->worker_pids()) pids.push_back(pid);
      pids.push_back(p->zygote_pid());
    }
  }
  REQUIRE(pids.size() == 7);
  for (pid_t pid : pids) {
    CHECK(pid > 0);
    CHECK(process_gone(pid));
  }
  CHECK(open_fds() == fds_before);
}

TEST_CASE("pool: a dead zygote leaves the live workers serving and refuses instead of blocking") {
  // As a child subreaper, this process inherits the orphaned workers and the pool reaps them
  // (without it they would go to init, which in some containers never reaps).
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  std::vector<pid_t> all;
  {
    WorkerPool pool(3, test_handler());
    all = pool.worker_pids();
    const pid_t zygote = pool.zygote_pid();
    REQUIRE(::kill(zygote, SIGKILL) == 0);
    for (int i = 0; i < 5000 && process_state(zygote) != 'Z'; ++i) ::usleep(1000);  // workers orphaned
    CallResult r = pool.call("die:exit");
    CHECK(r.status == CallStatus::WorkerDied);
    CHECK(r.error.find("worker died: exited with status 3; no replacement: the zygote") == 0);
    CHECK(pool.restarts() == 0);
    const std::vector<pid_t> pids = pool.worker_pids();
    CHECK(std::count(pids.begin(), pids.end(), -1) == 1);
    // Live workers take the calls; the vacant slot is used only when they are all busy.
    for (int i = 0; i < 5; ++i) CHECK(pool.call("echo:still").reply == "still");
    r = pool.call("die:kill");
    CHECK(r.error.find("worker died: killed by signal 9") == 0);
    CHECK(pool.call("echo:one left").ok());
    CHECK(pool.call("die:kill").status == CallStatus::WorkerDied);
    r = pool.call("echo:anyone");
    CHECK(r.status == CallStatus::Refused);
    CHECK(r.error.find("no worker available: the zygote") == 0);
  }
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 0) == 0);
  for (pid_t pid : all) CHECK(process_gone(pid));
}

TEST_CASE("pool: a dead zygote's live workers are reaped at destruction") {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  std::vector<pid_t> all;
  {
    WorkerPool pool(2, test_handler());
    all = pool.worker_pids();
    REQUIRE(::kill(pool.zygote_pid(), SIGKILL) == 0);
    for (int i = 0; i < 5000 && process_state(pool.zygote_pid()) != 'Z'; ++i) ::usleep(1000);
    CHECK(pool.call("echo:x").ok());
  }
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 0) == 0);
  for (pid_t pid : all) CHECK(process_gone(pid));
}

TEST_CASE("pool: workers=0 runs the handler in the calling thread") {
  WorkerPool pool(0, test_handler());
  CHECK(pool.size() == 0);
  CHECK(pool.zygote_pid() == -1);
  CHECK(pool.call("pid").reply == std::to_string(::getpid()));
  CallResult r = pool.call("throw");
  CHECK(r.status == CallStatus::HandlerError);
  CHECK(r.error == "bad plan 7");
  CHECK(pool.call("count").reply == "3");
}

TEST_CASE("pool: bad arguments are refused with the value") {
  CHECK_THROWS_WITH_AS(WorkerPool(-2, test_handler()), "worker pool: workers must be >= 0, got -2",
                       std::invalid_argument);
  CHECK_THROWS_AS(WorkerPool(1, WorkerHandler{}), std::invalid_argument);
  CHECK(default_workers() >= 1);
  CHECK(std::string(to_string(CallStatus::TimedOut)) == "timed out");
}

TEST_CASE("pool: a worker runs the analytic executor on a shipped program, bit for bit") {
  MoeStep step;  // built before the pool: workers start from this memory image
  AnalyticExecutor local(step.cluster);
  WorkerPool pool(2, [&step](std::string_view request) {
    AnalyticExecutor executor(step.cluster);
    return encode(executor.run(decode_program(request)));
  });
  const CallResult r = pool.call(encode(step.program));
  REQUIRE(r.ok());
  check_same(decode_timing(r.reply), local.run(step.program));
  // A malformed program is the handler's error, not a dead worker.
  CallResult bad = pool.call("SP");
  CHECK(bad.status == CallStatus::HandlerError);
  CHECK(bad.error.find("wire: truncated input") == 0);
  bad = pool.call("garbage");
  CHECK(bad.status == CallStatus::HandlerError);
  CHECK(bad.error == "wire: expected a 'SPRG' message, got tag 'garb'");
  CHECK(pool.restarts() == 0);
}

// --- the wire encoding -------------------------------------------------------------------

TEST_CASE("pool: wire round-trip of a lowered MoE step program") {
  MoeStep step;
  const StepProgram& p = step.program;
  REQUIRE(p.ops.size() > 100);
  REQUIRE(!p.a2a.empty());
  REQUIRE(!p.groups.empty());
  const std::string bytes = encode(p);
  check_same(decode_program(bytes), p);
  CHECK(encode(decode_program(bytes)) == bytes);

  MoeStep tp("tp=2,ep=4,attn_dp=4", 4);  // tensor-parallel reductions and expert-TP as well
  REQUIRE(!tp.program.groups.empty());
  check_same(decode_program(encode(tp.program)), tp.program);
}

TEST_CASE("pool: wire round-trip keeps every enum value and awkward double exactly") {
  const StepProgram p = odd_program();
  check_same(decode_program(encode(p)), p);
  CHECK(std::signbit(decode_program(encode(p)).a2a[0].at(0, 0)));
  CHECK(std::isnan(decode_program(encode(p)).a2a[0].at(1, 0)));
  check_same(decode_program(encode(StepProgram{})), StepProgram{});
}

TEST_CASE("pool: wire round-trip of step timings and timelines") {
  MoeStep step;
  std::vector<TimelineEvent> timeline;
  const StepTiming t = AnalyticExecutor(step.cluster).run(step.program, &timeline);
  REQUIRE(t.makespan > 0);
  check_same(decode_timing(encode(t)), t);

  StepTiming odd;
  odd.makespan = -0.0;
  odd.stage_time = {1.0, std::numeric_limits<double>::quiet_NaN(), 1e-310};
  odd.critical[kNumOpClasses - 1] = 7.5;
  odd.coll_by_kind[3] = std::numeric_limits<double>::infinity();
  odd.idle_on_path = 0.1;
  check_same(decode_timing(encode(odd)), odd);

  REQUIRE(!timeline.empty());
  timeline.back().name = std::string("odd\0name", 8);
  const std::vector<TimelineEvent> back = decode_timeline(encode(timeline));
  REQUIRE(back.size() == timeline.size());
  int mismatches = 0;
  for (std::size_t i = 0; i < back.size(); ++i) {
    const TimelineEvent &a = back[i], &b = timeline[i];
    if (a.rank != b.rank || a.stream != b.stream || a.cls != b.cls || a.layer != b.layer ||
        !same_bits(a.start, b.start) || !same_bits(a.duration, b.duration) || a.name != b.name)
      ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("pool: wire decoding refuses truncated, padded, mistagged and inconsistent input") {
  const std::string bytes = encode(odd_program());
  for (std::size_t n = 0; n < bytes.size(); ++n) CHECK_THROWS_AS(decode_program(bytes.substr(0, n)), WireError);
  CHECK_THROWS_WITH_AS(decode_program(bytes + "x"), doctest::Contains("unexpected bytes"), WireError);
  CHECK_THROWS_WITH_AS(decode_timing(bytes), doctest::Contains("expected a 'STIM' message"), WireError);
  const std::string timing = encode(StepTiming{});
  for (std::size_t n = 0; n < timing.size(); ++n) CHECK_THROWS_AS(decode_timing(timing.substr(0, n)), WireError);

  // A huge count is refused before anything is allocated.
  WireWriter w;
  w.header("SPRG", 6);
  w.u32(0xffffffffu);
  CHECK_THROWS_WITH_AS(decode_program(w.take()), doctest::Contains("count 4294967295"), WireError);

  // An all-to-all entry outside its matrix, or out of order, is refused.
  auto one_matrix = [](std::vector<std::array<std::uint32_t, 2>> pairs) {
    WireWriter m;
    m.header("SPRG", 6);
    m.count(0);  // rank_gpu
    m.count(0);  // groups
    m.u32(1);    // one matrix of 2 members
    m.count(2);
    m.count(pairs.size());
    for (auto [from, to] : pairs) {
      m.u32(from);
      m.u32(to);
      m.f64(1.0);
    }
    m.count(0);  // ops
    m.count(0);  // deps
    m.f64(1.0);  // compute share
    m.u8(0);     // all-reduce kernels (NCCL's)
    return m.take();
  };
  CHECK_NOTHROW(decode_program(one_matrix({{0, 1}, {1, 0}})));
  CHECK_THROWS_WITH_AS(decode_program(one_matrix({{0, 2}})), doctest::Contains("outside its 2 members"), WireError);
  CHECK_THROWS_WITH_AS(decode_program(one_matrix({{1, 0}, {0, 1}})), doctest::Contains("out of order"), WireError);

  // Values and indices outside the program.
  StepProgram p = odd_program();
  p.ops[0].cls = OpClass::kCount;
  CHECK_THROWS_WITH_AS(decode_program(encode(p)), doctest::Contains("op class value"), WireError);
  p = odd_program();
  p.ops[2].dep_end = 99;
  CHECK_THROWS_WITH_AS(decode_program(encode(p)), doctest::Contains("dependency range"), WireError);
  p = odd_program();
  p.ops[1].group = 2;
  CHECK_THROWS_WITH_AS(decode_program(encode(p)), doctest::Contains("collective group index 2"), WireError);
  p = odd_program();
  p.ops[1].matrix = -3;
  CHECK_THROWS_WITH_AS(decode_program(encode(p)), doctest::Contains("all-to-all matrix index -3"), WireError);
  p = odd_program();
  p.ops[0].not_before = -1;
  CHECK_THROWS_WITH_AS(decode_program(encode(p)), doctest::Contains("release time"), WireError);
  p = odd_program();
  p.compute_share = 0;
  CHECK_THROWS_WITH_AS(decode_program(encode(p)), doctest::Contains("compute share"), WireError);
  p = odd_program();
  p.allreduce = static_cast<AllReduceKernels>(4);
  CHECK_THROWS_WITH_AS(decode_program(encode(p)), doctest::Contains("all-reduce kernels value 4"), WireError);
}
