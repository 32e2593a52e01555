// tests/sim/serving/speculative_test.cpp — speculative decoding with a one-layer draft head (MTP):
// tokens per step follow the acceptance, rejected drafts cost without paying back, the head's
// weights and KV are counted, and the settings read, print and refuse as documented.
#include <doctest/doctest.h>

#include <string>

#include "common/input_error.hpp"
#include "sim/plan/memory_model.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/serving.hpp"
#include "sim/step/analytic_executor.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

struct SpecServed {
  ServingResult r;
  Metrics m;
};

// Mixtral-8x7B, TP8 on one DGX-H100, 40 requests of 64 output tokens at 2 req/s (small batches,
// where drafting pays), tokens routed by the synthetic source (the draft head routes its one layer).
SpecServed spec_run(const std::string& engine, const std::string& plan = "tp=8") {
  ModelSpec m = load_model("mixtral-8x7b");
  Cluster c = load_cluster("dgx-h100:1");
  Plan p = plan_from_string(plan + engine, 8, plan_defaults(m));
  AnalyticExecutor ex(c);
  ServingOptions o;
  const RequestTrace t = at_rate(load_request_trace("synthetic:n=40,prompt=fixed:512,output=fixed:64,seed=2"), 2, Arrival::Poisson, 1);
  const auto routing = make_routing("synthetic:seed=1", m.routing_shape());
  SpecServed s{serve(p, m, c, t, routing.get(), ex, o), {}};
  s.m = summarize(s.r, o, 8);
  return s;
}

double per_step(const SpecServed& s) { return static_cast<double>(s.r.breakdown.spec_tokens) / static_cast<double>(s.r.breakdown.spec_steps); }

}  // namespace

TEST_CASE("speculative decoding: tokens per step follow the acceptance, and only accepted drafts shorten TPOT") {
  const SpecServed off = spec_run("");
  const SpecServed none = spec_run(",spec_tokens=1,spec_accept=0");
  const SpecServed one = spec_run(",spec_tokens=1,spec_accept=0.8");
  const SpecServed two = spec_run(",spec_tokens=2,spec_accept=0.8");
  const SpecServed all = spec_run(",spec_tokens=3,spec_accept=1");
  for (const SpecServed* s : {&off, &none, &one, &two, &all}) {
    CHECK(s->m.completed == 40);
    long emitted = 0;
    for (const auto& [t, n] : s->r.emissions) emitted += n;
    CHECK(emitted == 40 * 64);  // never past a request's output
  }
  CHECK(off.r.breakdown.spec_steps == 0);
  // Each decode step emits 1 + the drafts accepted before the first rejection (the request's last
  // step may be cut): 1, 1.8, 1 + 0.8 + 0.64, 4.
  CHECK(per_step(none) == 1.0);
  CHECK(per_step(one) == doctest::Approx(1.8).epsilon(0.03));
  CHECK(per_step(two) == doctest::Approx(2.44).epsilon(0.04));
  CHECK(per_step(all) > 3.7);
  CHECK(per_step(all) <= 4.0);
  // Drafts that are all rejected cost a verify step's extra token and a draft-head pass: slower.
  CHECK(none.m.tpot_ms.p50 > off.m.tpot_ms.p50);
  // Accepted ones pay back at small batches.
  CHECK(one.m.tpot_ms.p50 < 0.75 * off.m.tpot_ms.p50);
  CHECK(two.m.tpot_ms.p50 < one.m.tpot_ms.p50);
  // The same run twice: the acceptance draws repeat.
  CHECK(spec_run(",spec_tokens=1,spec_accept=0.8").r.breakdown.spec_tokens == one.r.breakdown.spec_tokens);
  // Expert parallelism: the verify step and the head's pass route their tokens over EP ranks.
  const SpecServed ep_off = spec_run("", "tp=1,attn_dp=8,ep=8");
  const SpecServed ep_on = spec_run(",spec_tokens=1,spec_accept=0.8", "tp=1,attn_dp=8,ep=8");
  CHECK(ep_on.m.completed == 40);
  CHECK(per_step(ep_on) == doctest::Approx(1.8).epsilon(0.03));
  CHECK(ep_on.m.tpot_ms.p50 < ep_off.m.tpot_ms.p50);
}

TEST_CASE("speculative decoding: the draft head's weights and KV are counted, and the settings read, print and refuse") {
  ModelSpec m = load_model("deepseek-v3");
  Cluster c = load_cluster("dgx-h100:8");
  const Plan off = plan_from_string("tp=1,attn_dp=64,ep=64,weights=fp8", 64, plan_defaults(m));
  const Plan on = plan_from_string("tp=1,attn_dp=64,ep=64,weights=fp8,spec_tokens=2,spec_accept=0.9:0.6", 64, plan_defaults(m));
  const MemoryReport a = plan_memory(off, m, c), b = plan_memory(on, m, c);
  // One more MoE layer (and its 2h → h projection): about 1/58 more of the layers' weights.
  CHECK(b.worst().weights > a.worst().weights);
  CHECK(b.worst().weights - a.worst().weights < 0.03 * a.worst().weights);
  CHECK(b.worst().kv_per_token == doctest::Approx(a.worst().kv_per_token * 62.0 / 61.0));
  const std::string text = plan_to_string(on);
  CHECK(text.find("spec_tokens=2") != std::string::npos);
  CHECK(text.find("spec_accept=0.9:0.6") != std::string::npos);
  CHECK(plan_from_string(text, 64, plan_defaults(m)).engine.spec_accept == std::vector<double>{0.9, 0.6});
  CHECK_THROWS_AS(plan_from_string("tp=8,spec_accept=1.5", 8, plan_defaults(m)), InputError);
  CHECK_THROWS_AS(plan_from_string("tp=8,spec_tokens=17", 8, plan_defaults(m)), InputError);
  // Without pipeline parallelism only.
  const Plan pp = plan_from_string("tp=8,pp=8,ep=8,weights=fp8,spec_tokens=1", 64, plan_defaults(m));
  const auto verdict = check_plan(pp, m, c);
  CHECK_FALSE(verdict.feasible());
  bool named = false;
  for (const auto& v : verdict.violations) named = named || v.field == "/engine/spec_tokens";
  CHECK(named);
}
