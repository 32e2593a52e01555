// sim/serving/arrivals.cpp — open- and closed-loop arrivals for one replica.
#include "sim/serving/arrivals.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "sim/serving/serving.hpp"

namespace shardsim {

Arrivals Arrivals::open(std::vector<int> reqs, std::vector<RequestResult>& results) {
  Arrivals a(results);
  a.order_ = std::move(reqs);
  return a;
}

Arrivals Arrivals::closed(std::vector<int> queue, int clients, double think_time, std::vector<RequestResult>& results) {
  Arrivals a(results);
  a.closed_ = true;
  a.think_ = think_time;
  a.client_of_.assign(results.size(), -1);
  const int n = std::min(clients, static_cast<int>(queue.size()));
  for (int c = 0; c < n; ++c) a.pending_.push({0.0, c});
  a.order_ = std::move(queue);
  return a;
}

Arrivals Arrivals::routed(std::vector<RequestResult>& results) {
  Arrivals a(results);
  a.routed_ = true;
  a.horizon_ = 0;
  return a;
}

void Arrivals::feed(int req) {
  if (!routed_) throw std::logic_error("Arrivals::feed: not a routed arrival source");
  order_.push_back(req);
}

int Arrivals::in_flight(double t) {
  while (!finishing_.empty() && finishing_.top() <= t) {
    finishing_.pop();
    ++finished_;
  }
  return static_cast<int>(order_.size()) - finished_;
}

double Arrivals::next_time() const {
  if (closed_) return pending_.empty() ? kNever : pending_.top().first;
  return next_ < order_.size() ? (*results_)[static_cast<std::size_t>(order_[next_])].arrival : horizon_;
}

int Arrivals::pop() {
  if (!closed_) {
    if (next_ >= order_.size()) throw std::logic_error("Arrivals::pop: nothing has arrived (a replica ran past the router's horizon)");
    return order_[next_++];
  }
  auto [t, c] = pending_.top();
  pending_.pop();
  const int req = order_[next_++];
  client_of_[static_cast<std::size_t>(req)] = c;
  (*results_)[static_cast<std::size_t>(req)].arrival = t;
  return req;
}

void Arrivals::done(int req, double t) {
  if (routed_) finishing_.push(t);
  if (!closed_) return;
  const int c = client_of_[static_cast<std::size_t>(req)];
  // (each waiting client takes one of the unsent requests: none left for this one, it stops)
  if (c < 0 || next_ + pending_.size() >= order_.size()) return;
  pending_.push({t + think_, c});
}

}  // namespace shardsim
