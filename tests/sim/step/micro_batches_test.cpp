// tests/sim/step/micro_batches_test.cpp — two-batch overlap: splitting a step, interleaving the halves'
// programs, and the all-to-all it hides (sim/step/micro_batches.hpp).
#include <doctest/doctest.h>

#include <numeric>

#include "sim/plan/plan.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/serving.hpp"
#include "sim/step/analytic_executor.hpp"
#include "sim/step/lowering.hpp"
#include "sim/step/micro_batches.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

ReplicaBatch batch_of(std::vector<std::vector<SeqWork>> groups) {
  ReplicaBatch b;
  b.groups = std::move(groups);
  return b;
}

}  // namespace

TEST_CASE("micro-batches: halves keep every token — a prompt chunk across the cut is split head/tail") {
  // Group 0: three decodes and a 9-token chunk (12 tokens: the first half takes 6 = 3 decodes + 3
  // of the chunk). Group 1: one decode (it goes to the first half).
  ReplicaBatch b = batch_of({{{0, 10, 1, 10, true}, {1, 20, 1, 20, true}, {2, 5, 1, 5, true}, {3, 0, 9, 0, true}},
                             {{4, 7, 1, 7, true}}});
  ReplicaBatch x, y;
  REQUIRE(split_micro_batches(b, x, y));
  CHECK(x.tokens() + y.tokens() == b.tokens());
  REQUIRE(x.groups[0].size() == 4);
  REQUIRE(y.groups[0].size() == 1);
  const SeqWork& head = x.groups[0][3];
  const SeqWork& tail = y.groups[0][0];
  CHECK(head.request == 3);
  CHECK(head.new_tokens == 3);
  CHECK_FALSE(head.emits);  // only the chunk's last token emits
  CHECK(tail.first_pos == 3);
  CHECK(tail.context == 3);  // the tail attends to the head
  CHECK(tail.new_tokens == 6);
  CHECK(tail.emits);
  CHECK(x.groups[1].size() == 1);
  CHECK(y.groups[1].empty());
  // One decode alone cannot be split.
  ReplicaBatch one = batch_of({{{0, 10, 1, 10, true}}});
  CHECK_FALSE(split_micro_batches(one, x, y));
}

TEST_CASE("micro-batches: the interleaved program keeps both halves' operations, order and dependencies") {
  const ModelSpec m = load_model("mixtral-8x7b");
  const Cluster c = load_cluster("dgx-h100:2");
  Plan p = plan_from_string("tp=2,attn_dp=8,ep=8,etp=2", 16, plan_defaults(m));
  auto routing = make_routing("synthetic:seed=2", m.routing_shape());
  Lowering low(p, m, c, routing.get());
  std::vector<std::vector<SeqWork>> groups(8);
  for (int g = 0; g < 8; ++g)
    for (int s = 0; s < 4; ++s) groups[static_cast<std::size_t>(g)].push_back({static_cast<std::uint32_t>(g * 4 + s), 0, 300, 0, true});
  ReplicaBatch b = batch_of(groups), x, y;
  REQUIRE(split_micro_batches(b, x, y));
  StepProgram a = low.lower(x), bb = low.lower(y), merged;
  interleave_micro_batches(a, bb, merged);
  CHECK(merged.ops.size() == a.ops.size() + bb.ops.size());
  CHECK(merged.a2a.size() == a.a2a.size() + bb.a2a.size());
  for (int i = 0; i < static_cast<int>(merged.ops.size()); ++i)
    for (const int* d = merged.deps_begin(i); d != merged.deps_end(i); ++d) CHECK(*d < i);  // topological
  // The first dispatch of the second half comes before the first half's first expert GEMM:
  // the halves are staggered, not run one after the other.
  int first_b_dispatch = -1, first_a_experts = -1;
  for (int i = 0; i < static_cast<int>(merged.ops.size()); ++i) {
    const StepOp& op = merged.ops[static_cast<std::size_t>(i)];
    if (op.cls == OpClass::EpDispatch && op.matrix >= static_cast<int>(a.a2a.size()) && first_b_dispatch < 0) first_b_dispatch = i;
    if (op.cls == OpClass::Experts && first_a_experts < 0) first_a_experts = i;
  }
  CHECK(first_b_dispatch >= 0);
  CHECK(first_b_dispatch < first_a_experts);
}

TEST_CASE("two-batch overlap: hides all-to-all behind compute in prefill-heavy steps") {
  const ModelSpec m = load_model("mixtral-8x7b");
  const Cluster c = load_cluster("dgx-h100:2");
  auto routing = make_routing("synthetic:seed=2", m.routing_shape());
  const RequestTrace t = load_request_trace("synthetic:n=120,prompt=lognormal:3000:0.3,output=fixed:4,seed=5");
  AnalyticExecutor ex(c);
  ServingOptions o;
  o.offline = true;
  auto run = [&](const char* tbo) {
    Plan p = plan_from_string(std::string("tp=2,attn_dp=8,ep=8,etp=2,two_batch_overlap=") + tbo, 16, plan_defaults(m));
    return serve(p, m, c, t, routing.get(), ex, o);
  };
  ServingResult off = run("off"), on = run("on");
  const double hidden_off = off.breakdown.comm_busy - off.breakdown.comm_exposed;
  const double hidden_on = on.breakdown.comm_busy - on.breakdown.comm_exposed;
  CHECK(hidden_on > hidden_off + 0.1 * on.breakdown.comm_busy);
  CHECK(summarize(on, o, 16).throughput_tok_s > 1.1 * summarize(off, o, 16).throughput_tok_s);
  CHECK(on.breakdown.prefill_tokens == off.breakdown.prefill_tokens);
  // Without EP there is no all-to-all to hide: the option changes nothing.
  Plan p1 = plan_from_string("tp=8,etp=8,dp=2,two_batch_overlap=on", 16, plan_defaults(m));
  Plan p0 = plan_from_string("tp=8,etp=8,dp=2", 16, plan_defaults(m));
  CHECK(serve(p1, m, c, t, routing.get(), ex, o).makespan == serve(p0, m, c, t, routing.get(), ex, o).makespan);
}
