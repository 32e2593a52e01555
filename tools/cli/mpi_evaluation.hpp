// tools/cli/mpi_evaluation.hpp — a search's evaluations spread over MPI ranks (issue 16):
// `mpirun -np K shardsim search …`. Rank 0 runs the optimizers, the driver and the outputs; every
// rank (rank 0 too) scores plans with its own evaluator and SimGrid worker pool.
//
// Owns: launched_by_mpirun(), MpiSession, serve_mpi_evaluations() (ranks ≥ 1) and MpiEvaluator
// (rank 0). Only this file's .cpp includes MPI.
// Protocol (MPI_COMM_WORLD, all messages bytes): a worker rank first sends HELLO with how many
// evaluations it runs at once (its --threads); rank 0 sends JOB {id, plan JSON}; the worker
// replies RESULT {id, score, faults} (doubles as hex floats: exact); at the end rank 0 sends STOP
// to every worker. Rank 0 sends a plan to a rank with a free slot and scores it itself when none
// is free. Scores depend only on the plan, so a study gives the same results, journal and report
// as a single-process run with the same seeds (tested with mpirun -np 2).
// On rank 0 every MPI call is made by one dispatcher thread (MPI_THREAD_SERIALIZED suffices); on
// worker ranks by the main thread, with evaluations on TBB threads.
// A rank that dies (or hangs) costs its evaluations in flight, not the study: worker ranks send a
// heartbeat every 250 ms (and rank 0 sends one to each of them, so that they end when rank 0 dies:
// silent for --rank-timeout, a worker rank stops with status 1 instead of holding the job forever); one not heard from for --rank-timeout seconds is lost, its in-flight
// evaluations are scored failed, and rank 0 goes on without it. The clock starts when rank 0 has
// loaded its inputs (MpiEvaluator's construction), so a rank that dies before its HELLO is lost the
// same way. For mpirun not to end the whole job when a rank dies, launch with `--enable-recovery
// --mca orte_abort_on_non_zero_status 0` (Open MPI 4); after a loss nobody calls MPI_Finalize (its
// fence would wait for the lost rank).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "optimizers/space/evaluator.hpp"

namespace shardsim {
class Cluster;
struct ModelSpec;
}  // namespace shardsim

namespace shardsim::cli {

// True when this process was started by mpirun (its environment says so); MPI is not touched.
bool launched_by_mpirun();

// MPI_Init_thread … MPI_Finalize. Construct after the SimGrid worker pool (which forks) and before
// any thread. Throws std::runtime_error when MPI cannot give MPI_THREAD_SERIALIZED.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Ends the process without MPI_Finalize, whose fence would wait forever for a lost rank.
  [[noreturn]] static void exit_without_finalize(int status);

 private:
  int rank_ = 0, size_ = 1;
};

// Ranks ≥ 1: says hello with `slots`, then scores rank 0's plans with `local` (up to `slots` at
// once) and sends a heartbeat every 250 ms, until STOP; plans are read back for `model` on
// `cluster`. Returns false when rank 0 lost a rank (then nobody may call MPI_Finalize).
// A rank ≥ 1 that hears nothing from rank 0 (not even its heartbeat) for `rank0_timeout_s` seconds
// says so on stderr and ends with status 1, without MPI_Finalize.
bool serve_mpi_evaluations(const Evaluator& local, const ModelSpec& model, const Cluster& cluster, int slots,
                           double rank0_timeout_s);

// Rank 0: the driver's evaluator. Thread-safe (Constant): evaluate_detailed() may be called from
// every driver thread; each call blocks until its score is back.
class MpiEvaluator : public Evaluator {
 public:
  // A rank not heard from (hello, results or heartbeats) for `rank_timeout_s` is lost: its
  // evaluations in flight fail (scored failed, naming the rank) and it gets no more. The clock runs
  // from construction, so a rank that dies before its HELLO is lost too (and a HELLO that comes
  // later takes it back: it had nothing in flight).
  MpiEvaluator(const Evaluator& local, int ranks, double rank_timeout_s);
  ~MpiEvaluator() override;  // STOP to every worker, then the dispatcher ends
  Score evaluate(const Plan& plan) const override { return evaluate_detailed(plan).score; }
  Evaluation evaluate_detailed(const Plan& plan) const override;
  ThreadSafety thread_safety() const override { return ThreadSafety::Constant; }
  std::string objective_unit() const override { return local_.objective_unit(); }
  // Evaluations a worker rank may run at once, summed (known once every rank said HELLO or was lost).
  int remote_slots() const;
  // Evaluations scored on each rank so far (index 0 = this rank).
  std::vector<long> scored_per_rank() const;
  // The ranks lost so far.
  std::vector<int> lost_ranks() const;

 private:
  struct Job {
    long id = 0;
    int rank = 0;
    std::string plan;
    std::promise<Evaluation> done;
    Evaluation result;
  };
  void dispatch();
  void lose_silent_ranks(std::vector<std::shared_ptr<Job>>& failed);
  bool all_greeted_or_lost() const;     // with mu_ held
  void greet(int rank, int slots);      // with mu_ held

  const Evaluator& local_;
  int ranks_;
  double rank_timeout_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable std::deque<std::shared_ptr<Job>> outbox_;
  mutable std::map<long, std::shared_ptr<Job>> inflight_;
  mutable std::vector<int> free_slots_;        // per rank (0 unused)
  mutable std::vector<long> scored_;           // per rank
  std::vector<char> lost_;                     // per rank
  std::vector<std::chrono::steady_clock::time_point> last_heard_;  // per rank
  mutable long next_id_ = 1;
  std::vector<char> greeted_;                  // per rank: its HELLO arrived
  std::promise<void> ready_;                   // every worker rank greeted or lost
  std::shared_future<void> ready_future_;
  std::atomic<bool> stop_{false};
  std::thread dispatcher_;
};

}  // namespace shardsim::cli
