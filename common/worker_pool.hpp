// common/worker_pool.hpp — long-lived worker processes that run one handler, fed over sockets.
//
// Owns: WorkerPool, the home of scorers whose thread-safety is "none" (docs/architecture.md, Conventions) — above all
// the SimGrid executor, which allows one Engine per process and dies with its process on an
// uncaught actor exception (docs/simgrid.md). Design and measurements: docs/worker-pool.md.
//
// Processes. The constructor forks one *zygote*, a small single-threaded process that does nothing
// but fork workers on request and reap them; every worker — the first N and every replacement — is
// a child of the zygote, so no fork ever happens from the (later multi-threaded) parent, and every
// worker starts from the same memory image: the parent's at construction time. The zygote closes
// every inherited descriptor except 0–2 and its control socket, so workers hold only stdio and
// their own socket (and never keep another pool's or the parent's files open).
// Worker loop: read a request frame, call the handler, write a reply frame, repeat; a handler may
// create per-process state on first use (an Engine) and keep it across calls. An exception from the
// handler becomes an error reply; the worker lives on. On EOF (pool destroyed, parent gone) the
// worker flushes stdio and _exit(0)s: no atexit handlers or static destructors run in workers.
// Framing (one AF_UNIX stream socketpair per worker, native byte order):
//   request = u32 length, bytes;   reply = u32 length, u8 status (0 ok, 1 handler error), bytes.
// Failures. A worker that dies during a call (EOF, reset, or the optional call timeout, after which
// the pool kills it) fails that call with its fate ("worker died: killed by signal 9 (Killed)",
// "worker died: exited with status 3"), is reaped by the zygote and replaced by a fresh worker
// before the call returns; restarts() counts replacements. A worker found dead while idle is replaced
// before a call uses it (that call does not fail). If a replacement cannot be started (the zygote is
// gone, fork fails), its slot stays vacant; calls prefer live workers, and a call that must take a
// vacant slot retries the spawn and fails with status Refused if that fails too — calls never
// block forever on a dead pool.
// Back-off: after kMaxConsecutiveDeaths calls in a row have lost their worker (crash or timeout)
// without one reply in between, the pool stops starting workers — a handler that crashes on every
// request is not re-forked forever — and later calls fail at once with status Refused.
// If the zygote itself dies, its workers are orphaned: live ones keep serving, vacant slots stay
// vacant, and the orphans are reaped by init — or by this process, which then learns their fate,
// if the application has made itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER; the pool
// does not change that process-wide setting itself).
// Signals: SIGPIPE is avoided with MSG_NOSIGNAL, not by changing the process's signal dispositions.
// The zygote puts itself in its own process group (a terminal's Ctrl-C goes to the parent alone,
// which decides), and kills its workers when the parent vanishes.
//
// Thread-safety: call() may be called from any number of threads at once; each call holds one
// worker for its duration (blocking until one is idle) and sees only its own reply. size(),
// restarts(), worker_pids() and zygote_pid() may be called at any time.
// REQUIRES (constructor): no other thread exists yet in the process — construct the pool before
//   starting TBB, std::threads or anything else that spawns them (fork copies only the calling
//   thread; a lock held by another thread would stay locked forever in the zygote).
// REQUIRES (destructor): no call() in flight.
// REQUIRES (handler): leave by returning or throwing, never by exit() (it would run the parent
//   image's atexit handlers inside the worker); a crash or _exit is survivable (the call fails).
// The parent's descriptors are all close-on-exec, so an exec elsewhere does not inherit them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace shardsim {

// Runs inside a worker process: request bytes in, reply bytes out; may throw.
using WorkerHandler = std::function<std::string(std::string_view request)>;

// std::thread::hardware_concurrency(), at least 1: the default of --workers.
int default_workers();

struct WorkerPoolOptions {
  // A call whose reply takes longer than this kills its worker (status TimedOut); 0 = wait forever.
  std::chrono::milliseconds call_timeout{0};
  // How long a worker that should exit (its socket closed at destruction, or it hung up) gets to
  // do so before the zygote kills it.
  std::chrono::milliseconds exit_grace{2000};
};

enum class CallStatus : std::uint8_t {
  Ok,            // reply holds the handler's reply
  HandlerError,  // the handler threw; error holds its what(); the worker lives on
  WorkerDied,    // the worker died during the call; it has been replaced (if possible)
  TimedOut,      // no reply within call_timeout; the worker was killed and replaced
  Refused,       // nothing was run: the request is too large, or no worker could be started
};
const char* to_string(CallStatus s);

struct CallResult {
  CallStatus status = CallStatus::Refused;
  std::string reply;  // when ok()
  std::string error;  // when !ok(): one line saying why
  bool ok() const { return status == CallStatus::Ok; }
};

class WorkerPool {
 public:
  // Starts `workers` worker processes running `handler`. workers == 0 runs the handler in the
  // calling thread instead (one call at a time, no processes — for debugging and tests; a crash in
  // the handler then takes the whole process down). Throws std::system_error when the zygote or a
  // first worker cannot be started, std::invalid_argument when workers < 0.
  // REQUIRES: no other thread exists yet (see the file comment).
  WorkerPool(int workers, WorkerHandler handler, WorkerPoolOptions options = {});
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs the handler on `request` in an idle worker (waiting for one) and returns its reply.
  // Thread-safe. Never throws for worker failures (they are statuses); may throw std::bad_alloc.
  CallResult call(std::string_view request);

  // Number of worker processes (0 in in-process mode). Constant after construction.
  int size() const { return static_cast<int>(slots_.size()); }
  // Workers replaced after dying (not counting the first `size()`).
  std::uint64_t restarts() const;
  // Current worker pids, one per slot (-1 for a vacant slot). For tests and diagnostics.
  std::vector<pid_t> worker_pids() const;
  // The zygote's pid (-1 in in-process mode).
  pid_t zygote_pid() const { return zygote_pid_; }

 private:
  struct Slot {
    int fd = -1;     // parent's end of the worker's socket; -1 when vacant
    pid_t pid = -1;  // the worker's pid (a child of the zygote); -1 when vacant
  };
  struct Spawned {
    int fd = -1;
    pid_t pid = -1;
    std::string error;  // when fd < 0
  };

  void start_zygote();
  void shutdown() noexcept;                      // the destructor's work (also on a failed start)
  Spawned spawn();                               // asks the zygote for a worker
  int reap(pid_t pid, bool kill_first);          // asks the zygote; a wait status, or -1 if unknown
  std::string retire(Slot& slot, bool kill_first);  // closes, reaps, vacates; returns the fate
  bool replace(Slot& slot, std::string* error);  // fills a vacant slot; counts a restart
  std::size_t acquire();
  void release(std::size_t slot);
  CallResult call_in_process(std::string_view request);

  // Constant after construction.
  WorkerHandler handler_;
  WorkerPoolOptions options_;
  pid_t zygote_pid_ = -1;

  // The zygote's control socket; one request/answer at a time under zygote_mu_.
  std::mutex zygote_mu_;
  int zygote_fd_ = -1;
  bool zygote_alive_ = true;  // false once the control socket failed: no more spawns or reaps

  // Slots: the vector never changes size; a slot's fields are written by the one thread that
  // holds it (taken out of idle_) and under mu_, so worker_pids() can read them under mu_.
  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  std::vector<Slot> slots_;
  std::vector<std::size_t> idle_;  // slots not held by a call: live ones LIFO on top, vacant at the bottom
  std::uint64_t restarts_ = 0;
  int consecutive_deaths_ = 0;  // calls that lost their worker since the last reply (guarded by mu_)
  static constexpr int kMaxConsecutiveDeaths = 16;

  std::mutex in_process_mu_;  // in-process mode: one handler call at a time
};

}  // namespace shardsim
