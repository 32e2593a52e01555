// tests/sim/serving/router_test.cpp — the router in front of the replicas: its policies on their
// own (least loaded, SGLang's cache-aware rule) and in the serving loop, where the replicas run in
// lockstep so that the router reads their loads.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/input_error.hpp"
#include "sim/plan/plan.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/router.hpp"
#include "sim/serving/serving.hpp"
#include "sim/step/analytic_executor.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"

using namespace shardsim;

namespace {

RequestTrace trace_of(std::vector<std::vector<std::uint64_t>> blocks, int block_tokens, int prompt) {
  RequestTrace t;
  t.prefix_block_tokens = block_tokens;
  for (auto& b : blocks) t.requests.push_back(Request{0, prompt, 1, std::move(b)});
  return t;
}

}  // namespace

TEST_CASE("router: least loaded takes the replica with the fewest requests in flight, ties in turn") {
  const RequestTrace t = trace_of({{}, {}, {}, {}, {}}, 0, 100);
  Router r(Dispatch::LeastLoaded, 3, t);
  CHECK(r.route(0, {5, 2, 7}) == 1);
  CHECK(r.route(1, {0, 0, 0}) == 2);  // a tie: the next in turn after 1
  CHECK(r.route(2, {0, 0, 0}) == 0);
  CHECK(r.route(3, {4, 4, 1}) == 2);
  Router rr(Dispatch::RoundRobin, 3, t);
  CHECK(rr.route(0, {9, 0, 0}) == 0);  // round robin ignores the loads
  CHECK(rr.route(1, {9, 0, 0}) == 1);
  CHECK_FALSE(Router::reads_load(Dispatch::RoundRobin));
  CHECK(Router::reads_load(Dispatch::LeastLoaded));
}

TEST_CASE("router: cache-aware — the replica holding more than 30% of the prompt, the least loaded when imbalanced, else the smallest tree") {
  // 4 blocks of 16 tokens each cover a 64-token prompt.
  const RequestTrace t =
      trace_of({{1, 2, 3, 4}, {1, 2, 3, 9}, {1, 10, 11, 12}, {5, 6, 7, 8}, {1, 2, 3, 4}, {1, 2, 3, 4}}, 16, 64);
  Router r(Dispatch::PrefixAffinity, 2, t);
  CHECK(r.route(0, {0, 0}) == 0);  // empty trees: the first in turn
  CHECK(r.route(1, {1, 0}) == 0);  // 3 of 4 blocks held by replica 0: 75% > 30%
  CHECK(r.route(2, {2, 0}) == 1);  // 1 of 4 (25%) is not enough: the smallest tree (replica 1's is empty)
  CHECK(r.route(3, {2, 1}) == 1);  // no match: replica 1's tree (64 tokens) is smaller than 0's (64 + 16)
  // Imbalanced (70 − 2 > 64 and 70 > 1.5 × 2): the least loaded, whatever the cache holds.
  CHECK(r.route(4, {70, 2}) == 1);
  // Balanced again: back to the cache (both replicas now hold all four blocks; the first longest run wins).
  CHECK(r.route(5, {3, 3}) == 0);
}

namespace {

struct RoutedRun {
  ServingResult r;
  Metrics m;
};

RoutedRun serve_at(const std::string& plan_text, const RequestTrace& t, double rate) {
  ModelSpec m = load_model("mixtral-8x7b");
  Cluster c = load_cluster("dgx-h100:1");
  Plan p = plan_from_string(plan_text, 8, plan_defaults(m));
  AnalyticExecutor ex(c);
  ServingOptions o;
  RoutedRun s{serve(p, m, c, at_rate(t, rate, Arrival::Poisson, 3), nullptr, ex, o), {}};
  s.m = summarize(s.r, o, 8);
  return s;
}

}  // namespace

TEST_CASE("router: least-loaded dispatch evens out replicas that round robin overloads") {
  // Every other request is long: round robin hands all of them to replicas 0 and 2 of 4, whose
  // queues grow while 1 and 3 idle; least loaded sends work where requests have come back.
  RequestTrace t;
  for (int i = 0; i < 600; ++i) t.requests.push_back(Request{0, i % 2 ? 64 : 3000, i % 2 ? 16 : 400, {}});
  const RoutedRun rr = serve_at("tp=2,dp=4", t, 24);
  const RoutedRun ll = serve_at("tp=2,dp=4,dispatch=least-loaded", t, 24);
  CHECK(rr.m.completed == 600);
  CHECK(ll.m.completed == 600);
  // Each request served once, by one replica.
  std::vector<int> per(4, 0);
  for (const auto& q : ll.r.requests) {
    REQUIRE(q.replica >= 0);
    REQUIRE(q.replica < 4);
    ++per[static_cast<std::size_t>(q.replica)];
  }
  CHECK(per[0] + per[1] + per[2] + per[3] == 600);
  int long_on_odd = 0;  // round robin never sends a long request to replica 1 or 3
  for (std::size_t i = 0; i < t.requests.size(); i += 2) long_on_odd += ll.r.requests[i].replica % 2;
  CHECK(long_on_odd > 0);
  CHECK(ll.m.ttft_ms.p99 < rr.m.ttft_ms.p99);
  CHECK(ll.m.e2e_ms.p90 < rr.m.e2e_ms.p90);
  // The key reads and prints back; a misspelt policy is refused by name.
  ModelSpec m = load_model("mixtral-8x7b");
  CHECK(plan_to_string(plan_from_string("tp=2,dp=4,dispatch=least-loaded", 8, plan_defaults(m))).find("dispatch=least-loaded") !=
        std::string::npos);
  CHECK_THROWS_WITH_AS(plan_from_string("tp=2,dp=4,dispatch=shortest", 8, plan_defaults(m)),
                       doctest::Contains("least-loaded"), InputError);
}

TEST_CASE("router: the lockstep loop serves what the replica-by-replica loop serves when the policy deals in turn") {
  // With one request in flight at a time, least loaded has only ties and deals in turn — the
  // lockstep run then matches round robin's, request for request.
  RequestTrace t;
  for (int i = 0; i < 40; ++i) t.requests.push_back(Request{0, 200, 20, {}});
  const RoutedRun rr = serve_at("tp=2,dp=4", t, 0.2);
  const RoutedRun ll = serve_at("tp=2,dp=4,dispatch=least-loaded", t, 0.2);
  REQUIRE(rr.m.completed == 40);
  REQUIRE(ll.m.completed == 40);
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    CHECK(ll.r.requests[i].replica == rr.r.requests[i].replica);
    CHECK(ll.r.requests[i].finish == doctest::Approx(rr.r.requests[i].finish));
  }
}
