// tools/cli/mpi_evaluation.cpp — the ranks' messages, rank 0's dispatcher, the workers' loop.
#include "tools/cli/mpi_evaluation.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>


#include "common/json_reader.hpp"
#include "sim/plan/plan.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

namespace shardsim::cli {

namespace {

enum Tag : int { kHello = 1, kJob, kResult, kStop, kHeartbeat };

constexpr auto kHeartbeatEvery = std::chrono::milliseconds(250);  // a worker's sign of life, busy or not

constexpr auto kIdle = std::chrono::microseconds(100);  // poll interval when nothing arrived

std::string hex(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}

double unhex(const json& j) { return std::strtod(j.get<std::string>().c_str(), nullptr); }

std::string encode(long id, const Evaluation& e) {
  const Score& s = e.score;
  return json{{"id", id},
              {"feasible", s.feasible},
              {"objective", hex(s.objective)},
              {"violation", hex(s.violation)},
              {"failed", s.failed},
              {"reason", s.reason},
              {"sampled", e.faults.sampled},
              {"sample_failures", e.faults.failed},
              {"sample_error", e.faults.error}}
      .dump();
}

Evaluation decode(const json& j) {
  Evaluation e;
  e.score.feasible = j.at("feasible").get<bool>();
  e.score.objective = unhex(j.at("objective"));
  e.score.violation = unhex(j.at("violation"));
  e.score.failed = j.at("failed").get<bool>();
  e.score.reason = j.at("reason").get<std::string>();
  e.faults.sampled = j.at("sampled").get<long>();
  e.faults.failed = j.at("sample_failures").get<long>();
  e.faults.error = j.at("sample_error").get<std::string>();
  return e;
}

void send(const std::string& text, int dest, Tag tag) {
  MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, dest, tag, MPI_COMM_WORLD);
}

// The message `st` announced.
std::string receive(const MPI_Status& st) {
  int n = 0;
  MPI_Get_count(&st, MPI_CHAR, &n);
  std::string text(static_cast<std::size_t>(n), '\0');
  MPI_Recv(text.data(), n, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return text;
}

// A worker's evaluation of one job; an evaluator that throws gives a failed score, as the search's cache does.
Evaluation score_job(const Evaluator& local, const ModelSpec& model, const Cluster& cluster, const json& job) {
  try {
    const Plan plan = plan_from_json(job.at("plan"), "mpi job", cluster.num_gpus(), plan_defaults(model));
    return local.evaluate_detailed(plan);
  } catch (const std::exception& ex) {
    Evaluation e;
    e.score.failed = true;
    e.score.reason = ex.what();
    return e;
  }
}

}  // namespace

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

MpiSession::MpiSession() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw std::runtime_error("MPI does not provide MPI_THREAD_SERIALIZED");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  MPI_Finalize();
}

void MpiSession::exit_without_finalize(int status) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(status);
}

bool serve_mpi_evaluations(const Evaluator& local, const ModelSpec& model, const Cluster& cluster, int slots,
                           double rank0_timeout_s) {
  slots = std::max(1, slots);
  bool finalize = true;
  auto beat = std::chrono::steady_clock::now();
  auto heard = beat;  // from rank 0: any message, its heartbeat included
  send(json{{"slots", slots}}.dump(), 0, kHello);
  // Plain threads, not TBB tasks: under mpirun's core binding TBB may get no worker threads at all.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> jobs, finished;
  bool stop = false;
  std::vector<std::thread> pool;
  for (int k = 0; k < slots; ++k)
    pool.emplace_back([&] {
      for (;;) {
        std::string text;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return stop || !jobs.empty(); });
          if (jobs.empty()) return;
          text = std::move(jobs.front());
          jobs.pop_front();
        }
        const json job = json::parse(text);
        std::string reply = encode(job.at("id").get<long>(), score_job(local, model, cluster, job));
        std::lock_guard<std::mutex> lock(mu);
        finished.push_back(std::move(reply));
      }
    });
  for (bool done = false; !done;) {  // every MPI call on this thread
    std::deque<std::string> out;
    {
      std::lock_guard<std::mutex> lock(mu);
      out.swap(finished);
    }
    for (const auto& r : out) send(r, 0, kResult);
    if (std::chrono::steady_clock::now() - beat >= kHeartbeatEvery) {
      send("", 0, kHeartbeat);
      beat = std::chrono::steady_clock::now();
    }
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    if (!flag) {
      // Rank 0 silent for the timeout: it died or hung. Waiting on would hold the allocation until
      // its wall-clock limit (the job hung); this rank says so and ends.
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - heard).count() >= rank0_timeout_s) {
        int me = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &me);
        std::cerr << "shardsim search (MPI rank " << me << "): rank 0 stopped answering for " << rank0_timeout_s
                  << " s (it died or hung); this rank stops\n";
        MpiSession::exit_without_finalize(1);
      }
      if (out.empty()) std::this_thread::sleep_for(kIdle);
      continue;
    }
    std::string text = receive(st);
    heard = std::chrono::steady_clock::now();
    if (st.MPI_TAG == kHeartbeat) continue;
    std::lock_guard<std::mutex> lock(mu);
    if (st.MPI_TAG == kStop) {
      done = stop = true;
      finalize = json::parse(text).value("finalize", true);
    } else {
      jobs.push_back(std::move(text));
    }
    cv.notify_all();
  }
  for (auto& t : pool) t.join();
  return finalize;
}

MpiEvaluator::MpiEvaluator(const Evaluator& local, int ranks, double rank_timeout_s)
    : local_(local), ranks_(ranks), rank_timeout_(rank_timeout_s), free_slots_(static_cast<std::size_t>(ranks), 0),
      scored_(static_cast<std::size_t>(ranks), 0), lost_(static_cast<std::size_t>(ranks), 0),
      last_heard_(static_cast<std::size_t>(ranks), std::chrono::steady_clock::now()),
      greeted_(static_cast<std::size_t>(ranks), 0), ready_future_(ready_.get_future().share()) {
  dispatcher_ = std::thread([this] { dispatch(); });
}

MpiEvaluator::~MpiEvaluator() {
  stop_ = true;
  cv_.notify_all();
  dispatcher_.join();
}

int MpiEvaluator::remote_slots() const {
  ready_future_.wait();
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (int r = 1; r < ranks_; ++r) n += free_slots_[static_cast<std::size_t>(r)];
  return n;
}

std::vector<int> MpiEvaluator::lost_ranks() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> out;
  for (int r = 1; r < ranks_; ++r)
    if (lost_[static_cast<std::size_t>(r)]) out.push_back(r);
  return out;
}

std::vector<long> MpiEvaluator::scored_per_rank() const {
  std::lock_guard<std::mutex> lock(mu_);
  return scored_;
}

Evaluation MpiEvaluator::evaluate_detailed(const Plan& plan) const {
  ready_future_.wait();
  std::future<Evaluation> result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int best = 0;  // the rank with the most free slots
    for (int r = 1; r < ranks_; ++r)
      if (free_slots_[static_cast<std::size_t>(r)] > (best ? free_slots_[static_cast<std::size_t>(best)] : 0)) best = r;
    if (best > 0) {
      --free_slots_[static_cast<std::size_t>(best)];
      auto job = std::make_shared<Job>();
      job->id = next_id_++;
      job->rank = best;
      job->plan = json_text(json{{"id", job->id}, {"plan", plan_to_json(plan)}});
      result = job->done.get_future();
      inflight_[job->id] = job;
      outbox_.push_back(job);
    }
  }
  if (result.valid()) {
    cv_.notify_all();
    return result.get();
  }
  Evaluation e = local_.evaluate_detailed(plan);  // every worker busy: score it here
  std::lock_guard<std::mutex> lock(mu_);
  ++scored_[0];
  return e;
}

namespace {

// Drops the posted sends (job, request) that have completed: their buffers may go.
template <class Posted>
void complete_sends(Posted& posted) {
  std::erase_if(posted, [](auto& p) {
    int done = 0;
    MPI_Test(&p.second, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
}

// Drops the posted sends to a lost rank: they may never complete, so their jobs (which own the
// buffers) are kept for the life of the process and the requests are never touched again.
template <class Posted>
void forget_sends_to_lost(Posted& posted, const std::vector<char>& lost) {
  using Job = typename Posted::value_type::first_type;
  static auto* kept = new std::vector<Job>;  // deliberately never freed
  std::erase_if(posted, [&](const auto& p) {
    if (!lost[static_cast<std::size_t>(p.first->rank)]) return false;
    kept->push_back(p.first);
    return true;
  });
}

}  // namespace

// A rank not heard from for rank_timeout_: lost. Its in-flight evaluations fail, it gets no more
// (called with mu_ held; the promises are kept in `failed` and set outside the lock).
void MpiEvaluator::lose_silent_ranks(std::vector<std::shared_ptr<Job>>& failed) {
  const auto now = std::chrono::steady_clock::now();
  for (int r = 1; r < ranks_; ++r) {
    const auto k = static_cast<std::size_t>(r);
    if (lost_[k] || std::chrono::duration<double>(now - last_heard_[k]).count() < rank_timeout_) continue;
    lost_[k] = 1;
    free_slots_[k] = 0;
    for (auto it = inflight_.begin(); it != inflight_.end();)
      if (it->second->rank == r) failed.push_back(it->second), it = inflight_.erase(it);
      else ++it;
  }
}

bool MpiEvaluator::all_greeted_or_lost() const {
  for (int r = 1; r < ranks_; ++r)
    if (!greeted_[static_cast<std::size_t>(r)] && !lost_[static_cast<std::size_t>(r)]) return false;
  return true;
}

// A HELLO: the rank's slots. One lost before it (it started late, and had nothing in flight) is back.
void MpiEvaluator::greet(int rank, int slots) {
  const auto k = static_cast<std::size_t>(rank);
  if (greeted_[k]) return;
  greeted_[k] = 1;
  lost_[k] = 0;
  free_slots_[k] = std::max(1, slots);
}

// One loop makes every MPI call of rank 0: HELLOs (waited for with the same timeout as any
// silence, so a rank that dies before its HELLO does not hang the study), jobs out, results in.
void MpiEvaluator::dispatch() {
  bool ready = false;
  // Jobs are posted without blocking: a blocking send to a rank that died can wait forever (a plan
  // larger than the eager limit needs the receiver), and then no rank is ever found lost.
  std::vector<std::pair<std::shared_ptr<Job>, MPI_Request>> posted;
  auto beat = std::chrono::steady_clock::time_point{};
  for (;;) {
    // Rank 0's sign of life to every worker rank, so that they stop when it dies instead of waiting
    // forever. Posted without blocking and not waited for (an empty message, sent eagerly).
    if (std::chrono::steady_clock::now() - beat >= kHeartbeatEvery) {
      beat = std::chrono::steady_clock::now();
      for (int r = 1; r < ranks_; ++r) {
        if (lost_[static_cast<std::size_t>(r)]) continue;
        MPI_Request req;
        MPI_Isend(nullptr, 0, MPI_CHAR, r, kHeartbeat, MPI_COMM_WORLD, &req);
        MPI_Request_free(&req);
      }
    }
    std::deque<std::shared_ptr<Job>> out;
    std::vector<std::shared_ptr<Job>> failed;
    bool idle = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      lose_silent_ranks(failed);
      forget_sends_to_lost(posted, lost_);
      if (!ready && all_greeted_or_lost()) {
        ready = true;
        ready_.set_value();
      }
      out.swap(outbox_);
      idle = inflight_.empty() && out.empty();
      if (idle && stop_ && failed.empty()) break;
      if (idle) cv_.wait_for(lock, std::chrono::milliseconds(10));
    }
    for (const auto& j : failed) {
      Evaluation e;
      e.score.failed = true;
      e.score.reason = "MPI rank " + std::to_string(j->rank) + " stopped answering (it died or hung): its evaluations in flight failed";
      j->done.set_value(e);
    }
    for (const auto& j : out) {
      posted.emplace_back(j, MPI_REQUEST_NULL);
      MPI_Isend(j->plan.data(), static_cast<int>(j->plan.size()), MPI_CHAR, j->rank, kJob, MPI_COMM_WORLD,
                &posted.back().second);
    }
    complete_sends(posted);
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    if (!flag) {
      if (out.empty() && !idle) std::this_thread::sleep_for(kIdle);
      continue;
    }
    const std::string text = receive(st);
    std::shared_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto from = static_cast<std::size_t>(st.MPI_SOURCE);
      last_heard_[from] = std::chrono::steady_clock::now();
      if (st.MPI_TAG == kHello) greet(st.MPI_SOURCE, json::parse(text).at("slots").get<int>());
      if (st.MPI_TAG != kResult || lost_[from]) continue;  // a hello, a heartbeat, or too late
      const json reply = json::parse(text);
      auto it = inflight_.find(reply.at("id").get<long>());
      if (it == inflight_.end()) continue;
      job = it->second;
      inflight_.erase(it);
      ++free_slots_[from];
      ++scored_[from];
      job->result = decode(reply);
    }
    job->done.set_value(job->result);
  }
  if (!ready) ready_.set_value();  // stopped before every rank was heard from
  for (auto& p : posted) MPI_Wait(&p.second, MPI_STATUS_IGNORE);  // answered, so delivered
  const bool finalize = lost_ranks().empty();
  for (int r = 1; r < ranks_; ++r)
    if (!lost_[static_cast<std::size_t>(r)]) send(json{{"finalize", finalize}}.dump(), r, kStop);
}

}  // namespace shardsim::cli
