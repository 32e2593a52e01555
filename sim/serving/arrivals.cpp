// sim/serving/arrivals.cpp — open- and closed-loop arrivals for one replica.
#include "sim/serving/arrivals.hpp"

#include <functional>
#include <stdexcept>

#include "sim/serving/serving.hpp"

namespace shardsim {

Arrivals Arrivals::open(std::vector<int> reqs, std::vector<RequestResult>& results) {
  Arrivals a(results);
  a.order_ = std::move(reqs);
  return a;
}

Arrivals Arrivals::closed(std::vector<std::vector<int>> clients, double think_time, std::vector<RequestResult>& results) {
  Arrivals a(results);
  a.closed_ = true;
  a.think_ = think_time;
  a.client_of_.assign(results.size(), -1);
  for (std::size_t c = 0; c < clients.size(); ++c) {
    for (int r : clients[c]) a.client_of_[static_cast<std::size_t>(r)] = static_cast<int>(c);
    if (!clients[c].empty()) a.pending_.push({0.0, static_cast<int>(c)});
  }
  a.sent_.assign(clients.size(), 0);
  a.clients_ = std::move(clients);
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
  std::size_t& k = sent_[static_cast<std::size_t>(c)];
  int req = clients_[static_cast<std::size_t>(c)][k++];
  (*results_)[static_cast<std::size_t>(req)].arrival = t;
  return req;
}

void Arrivals::done(int req, double t) {
  if (routed_) finishing_.push(t);
  if (!closed_) return;
  int c = client_of_[static_cast<std::size_t>(req)];
  if (c < 0 || sent_[static_cast<std::size_t>(c)] >= clients_[static_cast<std::size_t>(c)].size()) return;
  pending_.push({t + think_, c});
}

}  // namespace shardsim
