// sim/serving/arrivals.hpp — when a replica's requests arrive: open loop or closed loop.
//
// Owns: Arrivals, the one source of arrivals the serving loop reads. Open loop: the requests'
// arrival times are fixed before the run (the trace's, a rate's, or all 0 offline) and come out
// in order. Closed loop (ServingOptions::concurrency): N clients share one list of requests, and
// a client whose request finished (or was refused) sends, after a think time, the next one not yet
// sent — as the benchmark clients do (AIPerf's credits, `vllm bench serve --max-concurrency`'s and
// `sglang.bench_serving`'s semaphores: a freed slot takes the next request in order) — so exactly
// as many requests are in flight as there are clients until the list runs out; the arrival time
// is stamped into the request's result when it is sent. Routed (a router that reads
// the replicas' loads, sim/serving/router.hpp): an open loop whose requests are handed over one by
// one as the router decides; until it has decided the next one, the replica must not run past it
// (next_time() is at most the horizon, the arrival the router decides next).
// Units: seconds. Thread-safety: one replica's loop owns one Arrivals.
#pragma once

#include <cstddef>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

namespace shardsim {

struct RequestResult;

class Arrivals {
 public:
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // Open loop: `reqs` (indices into `results`) in arrival order, their arrival times already set.
  static Arrivals open(std::vector<int> reqs, std::vector<RequestResult>& results);
  // Closed loop: `clients` clients send `queue` (indices into `results`) in order, each the next
  // unsent one when its last finished; the first `clients` of them at time 0.
  static Arrivals closed(std::vector<int> queue, int clients, double think_time, std::vector<RequestResult>& results);
  // Routed: empty until fed; the horizon starts at 0.
  static Arrivals routed(std::vector<RequestResult>& results);

  // Routed: hands request `req` over (arrivals in non-decreasing order, none before the horizon).
  void feed(int req);
  // Routed: the router decides nothing before `t` any more (kNever: it has decided everything).
  void set_horizon(double t) { horizon_ = t; }
  // Routed: requests fed and not finished (done) at or before `t` — what the router counts as
  // in flight on this replica. Call with non-decreasing t.
  int in_flight(double t);

  // When the next request arrives; kNever when none is pending (none left, or every client waits).
  double next_time() const;
  // The next request (its arrival is next_time(), stamped into its result); call only when
  // next_time() is finite.
  int pop();
  // Request `req` finished or was refused at `t`: closed loop, its client sends its next request
  // at t + think time. Open loop: nothing.
  void done(int req, double t);

 private:
  explicit Arrivals(std::vector<RequestResult>& results) : results_(&results) {}

  std::vector<RequestResult>* results_;
  bool closed_ = false;
  // open loop
  std::vector<int> order_;
  std::size_t next_ = 0;
  // routed
  bool routed_ = false;
  double horizon_ = kNever;
  std::priority_queue<double, std::vector<double>, std::greater<double>> finishing_;  // done times not yet passed
  int finished_ = 0;                                                                  // done times passed
  // closed loop (the shared list is order_, its next unsent request next_)
  std::vector<int> client_of_;               // by request index (results): the client that sent it, −1 = none
  double think_ = 0;
  using Pending = std::pair<double, int>;    // (time, client): min-heap, ties by client
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> pending_;
};

}  // namespace shardsim
