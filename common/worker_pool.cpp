// common/worker_pool.cpp — see worker_pool.hpp and docs/worker-pool.md.
//
// Three kinds of process run code from this file:
//   parent  — WorkerPool's methods; many threads after construction.
//   zygote  — zygote_main(): single-threaded; forks workers, passes the parent its socket end
//             (SCM_RIGHTS over a SOCK_SEQPACKET control socket), reaps workers when asked.
//   worker  — worker_main(): single-threaded; the request → handler → reply loop.
// Zygote and workers leave only through _exit(), never by returning into the parent's code.
#include "common/worker_pool.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace shardsim {

namespace {

using Clock = std::chrono::steady_clock;
using Deadline = std::optional<Clock::time_point>;

// --- I/O with EINTR handling and an optional deadline ------------------------------------

enum class Io { Ok, Eof, Error, Timeout };

// Waits until `fd` is ready for `events` (or has an error/hangup the next call will report).
// Without a deadline it returns at once: the blocking call that follows does the waiting.
Io wait_ready(int fd, short events, const Deadline& deadline) {
  if (!deadline) return Io::Ok;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 0, INT_MAX)));
    if (r > 0) return Io::Ok;
    if (r == 0) {
      if (Clock::now() >= *deadline) return Io::Timeout;
      continue;
    }
    if (errno != EINTR) return Io::Error;
  }
}

// Reads exactly n bytes; *got says how many arrived before an Eof / Error / Timeout.
Io recv_all(int fd, void* buf, std::size_t n, const Deadline& deadline, std::size_t* got = nullptr) {
  auto* p = static_cast<char*>(buf);
  std::size_t done = 0;
  Io result = Io::Ok;
  while (done < n) {
    if ((result = wait_ready(fd, POLLIN, deadline)) != Io::Ok) break;
    const ssize_t r = ::recv(fd, p + done, n - done, 0);
    if (r > 0) {
      done += static_cast<std::size_t>(r);
    } else if (r == 0) {
      result = Io::Eof;
      break;
    } else if (errno != EINTR) {
      result = errno == ECONNRESET ? Io::Eof : Io::Error;
      break;
    }
  }
  if (got) *got = done;
  return result;
}

// Writes every byte of iov[0, count); never raises SIGPIPE (a dead peer is Io::Eof).
Io send_all(int fd, iovec* iov, int count, const Deadline& deadline) {
  while (count > 0) {
    if (iov->iov_len == 0) {
      ++iov;
      --count;
      continue;
    }
    if (const Io w = wait_ready(fd, POLLOUT, deadline); w != Io::Ok) return w;
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<std::size_t>(count);
    ssize_t r = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno == EPIPE || errno == ECONNRESET ? Io::Eof : Io::Error;
    }
    for (; count > 0 && r > 0; ++iov, --count) {
      const auto step = std::min(static_cast<std::size_t>(r), iov->iov_len);
      iov->iov_base = static_cast<char*>(iov->iov_base) + step;
      iov->iov_len -= step;
      r -= static_cast<ssize_t>(step);
      if (iov->iov_len > 0) break;
    }
  }
  return Io::Ok;
}

void close_fd(int fd) {
  // close() must not be retried on EINTR on Linux: the descriptor is gone either way.
  if (fd >= 0) ::close(fd);
}

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string describe_wait_status(int status) {
  if (status < 0) return "exit status unknown (the zygote is gone)";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::sigdescr_np(sig);
    std::string s = "killed by signal " + std::to_string(sig);
    if (name) s += std::string(" (") + name + ")";
    if (WCOREDUMP(status)) s += ", core dumped";
    return s;
  }
  return "stopped with wait status " + std::to_string(status);
}

// --- frames between parent and worker -------------------------------------------------------

constexpr std::size_t kMaxFrame = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint8_t kReplyOk = 0, kReplyError = 1;
constexpr std::size_t kReplyHeaderBytes = 5;  // length then status, unpadded on the wire

// --- control messages between parent and zygote --------------------------------------------

enum class ZygoteOp : std::uint32_t { Spawn = 1, Reap = 2, Shutdown = 3 };
struct ZygoteRequest {
  ZygoteOp op;
  std::int32_t pid;         // Reap: which worker
  std::uint32_t kill_first; // Reap: SIGKILL it before waiting
};
struct ZygoteAnswer {
  std::int32_t pid;    // Spawn: the worker's pid, or -1
  std::int32_t value;  // Spawn: 0 or an errno; Reap: the wait status, or -1 when unknown
};

[[noreturn]] void quit(int code) {
  std::fflush(nullptr);
  ::_exit(code);
}

// --- the worker process ------------------------------------------------------------------

[[noreturn]] void worker_main(int fd, const WorkerHandler& handler) {
  std::string request, reply;
  for (;;) {
    std::uint32_t length = 0;
    std::size_t got = 0;
    const Io io = recv_all(fd, &length, sizeof length, std::nullopt, &got);
    if (io == Io::Eof && got == 0) quit(0);  // the pool closed our socket: shut down
    if (io != Io::Ok) quit(1);
    request.resize(length);
    if (recv_all(fd, request.data(), length, std::nullopt) != Io::Ok) quit(1);

    std::uint8_t status = kReplyOk;
    try {
      reply = handler(std::string_view(request));
    } catch (const std::exception& e) {
      status = kReplyError;
      reply = e.what();
    } catch (...) {
      status = kReplyError;
      reply = "unknown exception";
    }
    if (reply.size() > kMaxFrame) {
      status = kReplyError;
      reply = "reply of " + std::to_string(reply.size()) + " bytes is too large";
    }
    std::fflush(nullptr);  // the handler's output appears now, not at some later exit

    char header[kReplyHeaderBytes];
    const auto reply_length = static_cast<std::uint32_t>(reply.size());
    std::memcpy(header, &reply_length, 4);
    header[4] = static_cast<char>(status);
    iovec iov[2] = {{header, sizeof header}, {reply.data(), reply.size()}};
    if (send_all(fd, iov, 2, std::nullopt) != Io::Ok) quit(0);  // the pool is gone
  }
}

// --- the zygote process ------------------------------------------------------------------

// Makes fds 0–2 exist (so every later descriptor is ≥ 3) and closes every other descriptor but
// `keep`, which it moves to ≥ 3 first. Returns keep's new number.
int isolate_descriptors(int keep) {
  if (keep < 3) {
    const int moved = ::fcntl(keep, F_DUPFD_CLOEXEC, 3);
    if (moved < 0) quit(1);
    ::close(keep);
    keep = moved;
  }
  for (int fd = 0; fd < 3; ++fd)
    if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", O_RDWR);  // takes the lowest free number: fd
  auto close_range_slow = [](unsigned lo, unsigned hi) {
    const long max = ::sysconf(_SC_OPEN_MAX);
    for (long fd = lo; fd <= std::min<long>(hi, max > 0 ? max - 1 : 65535); ++fd) ::close(static_cast<int>(fd));
  };
  const auto k = static_cast<unsigned>(keep);
  if (k > 3 && ::close_range(3, k - 1, 0) != 0) close_range_slow(3, k - 1);
  if (::close_range(k + 1, ~0U, 0) != 0) close_range_slow(k + 1, ~0U);
  return keep;
}

// Waits for the child `pid` until `deadline`, then kills it; returns its wait status, or -1 when
// `pid` is not a child of this process (it kills only a pid that waitpid showed alive and ours).
int wait_for_child(pid_t pid, Clock::time_point deadline) {
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return -1;
    if (Clock::now() >= deadline) break;
    const timespec nap{0, 200'000};  // 0.2 ms: a worker that hung up is normally a zombie by now
    ::nanosleep(&nap, nullptr);
  }
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return status;
}

bool send_answer(int ctl, ZygoteAnswer answer, int pass_fd) {
  iovec iov{&answer, sizeof answer};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (pass_fd >= 0) {
    std::memset(control, 0, sizeof control);
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  for (;;) {
    if (::sendmsg(ctl, &m, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof answer)) return true;
    if (errno != EINTR) return false;
  }
}

[[noreturn]] void zygote_main(int ctl, const WorkerHandler& handler, std::chrono::milliseconds grace) {
  ::setpgid(0, 0);  // out of the terminal's process group: Ctrl-C reaches the parent only
  // If the parent ignores SIGCHLD, children would vanish unwaited and their fate with them.
  ::signal(SIGCHLD, SIG_DFL);
  ctl = isolate_descriptors(ctl);
  std::vector<pid_t> children;

  auto forget = [&](pid_t pid) { children.erase(std::remove(children.begin(), children.end(), pid), children.end()); };
  auto reap_all = [&](Clock::time_point deadline) {
    for (pid_t pid : children) wait_for_child(pid, deadline);
    children.clear();
  };

  for (;;) {
    ZygoteRequest req{};
    const ssize_t n = ::recv(ctl, &req, sizeof req, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof req)) {
      // The parent is gone without saying goodbye: nobody wants the workers' results.
      reap_all(Clock::now());
      quit(0);
    }
    switch (req.op) {
      case ZygoteOp::Spawn: {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
          if (!send_answer(ctl, {-1, errno}, -1)) quit(1);
          break;
        }
        const pid_t pid = ::fork();
        if (pid == 0) {
          ::close(ctl);
          ::close(sv[0]);
          worker_main(sv[1], handler);
        }
        const int err = errno;
        ::close(sv[1]);
        if (pid > 0) children.push_back(pid);
        const bool sent = pid > 0 ? send_answer(ctl, {pid, 0}, sv[0]) : send_answer(ctl, {-1, err}, -1);
        ::close(sv[0]);
        if (!sent) {
          reap_all(Clock::now());
          quit(1);
        }
        break;
      }
      case ZygoteOp::Reap: {
        int status = -1;
        if (std::find(children.begin(), children.end(), req.pid) != children.end()) {
          if (req.kill_first) ::kill(req.pid, SIGKILL);
          status = wait_for_child(req.pid, Clock::now() + grace);
          forget(req.pid);
        }
        if (!send_answer(ctl, {req.pid, status}, -1)) {
          reap_all(Clock::now());
          quit(1);
        }
        break;
      }
      case ZygoteOp::Shutdown:
        // The parent has closed the workers' sockets: idle workers exit on EOF within the grace.
        reap_all(Clock::now() + grace);
        send_answer(ctl, {0, 0}, -1);
        quit(0);
      default:
        reap_all(Clock::now());
        quit(1);
    }
  }
}

}  // namespace

// --- public ---------------------------------------------------------------------------------

int default_workers() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

const char* to_string(CallStatus s) {
  switch (s) {
    case CallStatus::Ok: return "ok";
    case CallStatus::HandlerError: return "handler error";
    case CallStatus::WorkerDied: return "worker died";
    case CallStatus::TimedOut: return "timed out";
    case CallStatus::Refused: return "refused";
  }
  return "?";
}

WorkerPool::WorkerPool(int workers, WorkerHandler handler, WorkerPoolOptions options)
    : handler_(std::move(handler)), options_(options) {
  if (workers < 0) throw std::invalid_argument("worker pool: workers must be >= 0, got " + std::to_string(workers));
  if (!handler_) throw std::invalid_argument("worker pool: empty handler");
  if (workers == 0) return;
  start_zygote();
  try {
    slots_.resize(static_cast<std::size_t>(workers));
    for (Slot& s : slots_) {
      Spawned w = spawn();
      if (w.fd < 0)
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                "worker pool: cannot start a worker: " + w.error);
      s.fd = w.fd;
      s.pid = w.pid;
    }
    for (std::size_t i = slots_.size(); i-- > 0;) idle_.push_back(i);  // slot 0 is taken first
  } catch (...) {
    shutdown();
    throw;
  }
}

WorkerPool::~WorkerPool() { shutdown(); }

void WorkerPool::shutdown() noexcept {
  std::vector<pid_t> workers;
  for (Slot& s : slots_) {
    close_fd(s.fd);  // idle workers read EOF and exit
    if (s.pid > 0) workers.push_back(s.pid);
    s.fd = -1;
    s.pid = -1;
  }
  if (zygote_fd_ >= 0) {
    // The zygote reaps every worker (killing those still alive after the grace), then exits.
    const ZygoteRequest req{ZygoteOp::Shutdown, 0, 0};
    iovec iov{const_cast<ZygoteRequest*>(&req), sizeof req};
    ZygoteAnswer answer{};
    const bool done = zygote_alive_ && send_all(zygote_fd_, &iov, 1, std::nullopt) == Io::Ok &&
                      recv_all(zygote_fd_, &answer, sizeof answer, std::nullopt) == Io::Ok;
    if (!done) {
      // Orphaned workers are ours to reap only if this process is a child subreaper (see retire).
      const auto deadline = Clock::now() + options_.exit_grace;
      for (pid_t pid : workers) wait_for_child(pid, deadline);
    }
    close_fd(zygote_fd_);
    zygote_fd_ = -1;
  }
  if (zygote_pid_ > 0) {
    int status = 0;
    while (::waitpid(zygote_pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void WorkerPool::start_zygote() {
  std::fflush(nullptr);  // or the zygote's copy of unwritten stdio buffers would be written again
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::system_error(errno, std::generic_category(), "worker pool: socketpair");
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    throw std::system_error(err, std::generic_category(), "worker pool: fork of the zygote");
  }
  if (pid == 0) {
    ::close(sv[0]);
    zygote_main(sv[1], handler_, options_.exit_grace);
  }
  ::close(sv[1]);
  zygote_fd_ = sv[0];
  zygote_pid_ = pid;
}

WorkerPool::Spawned WorkerPool::spawn() {
  std::lock_guard lock(zygote_mu_);
  Spawned out;
  if (!zygote_alive_) {
    out.error = "the zygote (pid " + std::to_string(zygote_pid_) + ") is gone";
    return out;
  }
  ZygoteRequest req{ZygoteOp::Spawn, 0, 0};
  iovec iov{&req, sizeof req};
  if (send_all(zygote_fd_, &iov, 1, std::nullopt) != Io::Ok) {
    zygote_alive_ = false;
    out.error = "the zygote (pid " + std::to_string(zygote_pid_) + ") is gone";
    return out;
  }
  ZygoteAnswer answer{};
  iovec in{&answer, sizeof answer};
  msghdr m{};
  m.msg_iov = &in;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = ::recvmsg(zygote_fd_, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  int fd = -1;
  for (cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&m) : nullptr; c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  if (n != static_cast<ssize_t>(sizeof answer)) {
    close_fd(fd);
    zygote_alive_ = false;
    out.error = "the zygote (pid " + std::to_string(zygote_pid_) + ") is gone";
    return out;
  }
  if (answer.pid <= 0 || fd < 0) {
    close_fd(fd);
    out.error = "the zygote could not fork a worker: " + errno_text(answer.value);
    return out;
  }
  out.fd = fd;
  out.pid = answer.pid;
  return out;
}

int WorkerPool::reap(pid_t pid, bool kill_first) {
  std::lock_guard lock(zygote_mu_);
  if (!zygote_alive_) return -1;
  ZygoteRequest req{ZygoteOp::Reap, pid, kill_first ? 1u : 0u};
  iovec iov{&req, sizeof req};
  ZygoteAnswer answer{};
  if (send_all(zygote_fd_, &iov, 1, std::nullopt) != Io::Ok ||
      recv_all(zygote_fd_, &answer, sizeof answer, std::nullopt) != Io::Ok) {
    zygote_alive_ = false;
    return -1;
  }
  return answer.value;
}

std::string WorkerPool::retire(Slot& slot, bool kill_first) {
  close_fd(slot.fd);
  int status = reap(slot.pid, kill_first);
  if (status < 0) {
    // The zygote is gone and its workers were orphaned. If the application made this process a
    // child subreaper, they are our children now and we reap them; otherwise waitpid says ECHILD.
    // (wait_for_child kills only a child it has seen alive, never a recycled pid.)
    status = wait_for_child(slot.pid, Clock::now() + (kill_first ? Clock::duration{} : options_.exit_grace));
  }
  std::lock_guard lock(mu_);
  slot.fd = -1;
  slot.pid = -1;
  return describe_wait_status(status);
}

bool WorkerPool::replace(Slot& slot, std::string* error) {
  {
    std::lock_guard lock(mu_);
    if (consecutive_deaths_ >= kMaxConsecutiveDeaths) {  // backed off: a handler that always crashes
      if (error)
        *error = "workers died on " + std::to_string(consecutive_deaths_) +
                 " calls in a row without one success; not starting more";
      return false;
    }
  }
  Spawned w = spawn();
  if (w.fd < 0) {
    if (error) *error = w.error;
    return false;
  }
  std::lock_guard lock(mu_);
  slot.fd = w.fd;
  slot.pid = w.pid;
  ++restarts_;
  return true;
}

std::size_t WorkerPool::acquire() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return !idle_.empty(); });
  const std::size_t i = idle_.back();
  idle_.pop_back();
  return i;
}

void WorkerPool::release(std::size_t slot) {
  {
    std::lock_guard lock(mu_);
    // A vacant slot goes to the bottom of the stack: live workers are taken first, and a call
    // lands on a vacant slot (and retries the spawn) only when every live worker is busy.
    if (slots_[slot].fd < 0)
      idle_.insert(idle_.begin(), slot);
    else
      idle_.push_back(slot);
  }
  idle_cv_.notify_one();
}

std::uint64_t WorkerPool::restarts() const {
  std::lock_guard lock(mu_);
  return restarts_;
}

std::vector<pid_t> WorkerPool::worker_pids() const {
  std::lock_guard lock(mu_);
  std::vector<pid_t> pids;
  for (const Slot& s : slots_) pids.push_back(s.pid);
  return pids;
}

CallResult WorkerPool::call_in_process(std::string_view request) {
  std::lock_guard lock(in_process_mu_);
  CallResult r;
  try {
    r.reply = handler_(request);
    r.status = CallStatus::Ok;
  } catch (const std::exception& e) {
    r.status = CallStatus::HandlerError;
    r.error = e.what();
  } catch (...) {
    r.status = CallStatus::HandlerError;
    r.error = "unknown exception";
  }
  return r;
}

CallResult WorkerPool::call(std::string_view request) {
  if (slots_.empty()) return call_in_process(request);
  CallResult r;
  if (request.size() > kMaxFrame) {
    r.status = CallStatus::Refused;
    r.error = "request of " + std::to_string(request.size()) + " bytes is too large (limit 4 GiB)";
    return r;
  }

  const std::size_t index = acquire();
  Slot& slot = slots_[index];
  struct Release {
    WorkerPool* pool;
    std::size_t index;
    ~Release() { pool->release(index); }
  } release_on_exit{this, index};

  // A worker that died while idle (or says something unasked) is replaced before it is used.
  if (slot.fd >= 0) {
    pollfd p{slot.fd, POLLIN, 0};
    int n;
    while ((n = ::poll(&p, 1, 0)) < 0 && errno == EINTR) {
    }
    if (n != 0) retire(slot, true);
  }
  if (slot.fd < 0) {
    std::string why;
    if (!replace(slot, &why)) {
      r.status = CallStatus::Refused;
      r.error = "no worker available: " + why;
      return r;
    }
  }

  Deadline deadline;
  if (options_.call_timeout.count() > 0) deadline = Clock::now() + options_.call_timeout;

  const auto length = static_cast<std::uint32_t>(request.size());
  iovec iov[2] = {{const_cast<std::uint32_t*>(&length), sizeof length},
                  {const_cast<char*>(request.data()), request.size()}};
  Io io = send_all(slot.fd, iov, 2, deadline);
  char header[kReplyHeaderBytes] = {};
  if (io == Io::Ok) io = recv_all(slot.fd, header, sizeof header, deadline);
  std::uint32_t reply_length = 0;
  std::memcpy(&reply_length, header, 4);
  const auto status = static_cast<std::uint8_t>(header[4]);
  const bool malformed = io == Io::Ok && status != kReplyOk && status != kReplyError;
  if (malformed) io = Io::Error;
  if (io == Io::Ok) {
    r.reply.resize(reply_length);
    io = recv_all(slot.fd, r.reply.data(), reply_length, deadline);
  }
  const int err = errno;

  if (io == Io::Ok) {
    {
      std::lock_guard lock(mu_);
      consecutive_deaths_ = 0;
    }
    if (status == kReplyOk) {
      r.status = CallStatus::Ok;
    } else {
      r.status = CallStatus::HandlerError;
      r.error = std::move(r.reply);
      r.reply.clear();
    }
    return r;
  }

  // The worker is lost: learn its fate, then replace it so the next call finds a live one.
  {
    std::lock_guard lock(mu_);
    ++consecutive_deaths_;
  }
  const pid_t pid = slot.pid;
  if (io == Io::Timeout) {
    retire(slot, true);
    r.status = CallStatus::TimedOut;
    r.error = "worker " + std::to_string(pid) + " gave no reply within " + std::to_string(options_.call_timeout.count()) +
              " ms and was killed";
  } else if (io == Io::Eof) {
    r.status = CallStatus::WorkerDied;
    r.error = "worker died: " + retire(slot, false);
  } else {
    const std::string what = malformed ? "sent a malformed reply" : "broke its socket (" + errno_text(err) + ")";
    retire(slot, true);
    r.status = CallStatus::WorkerDied;
    r.error = "worker " + std::to_string(pid) + " " + what + " and was killed";
  }
  std::string why;
  if (!replace(slot, &why)) r.error += "; no replacement: " + why;
  return r;
}

}  // namespace shardsim
