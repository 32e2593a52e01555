// tests/sim/serving/step_costs_test.cpp — where the fast path's step timings come from: memoised by shape,
// taken from executed steps of the step's family with the attention swapped for its own (decode
// steps: the family's mean; mixed steps: the line along tokens between two), or executed.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <vector>

#include "sim/serving/step_costs.hpp"
#include "sim/step/lowering.hpp"
#include "sim/step/step_program.hpp"

using namespace shardsim;

namespace {

// A decode batch of `seqs` sequences in one attention group, each with `ctx` tokens of context.
ReplicaBatch decode_batch(int seqs, int ctx) {
  ReplicaBatch b;
  b.groups.resize(1);
  for (int i = 0; i < seqs; ++i) b.groups[0].push_back(SeqWork{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(ctx), 1, ctx, true, 0});
  return b;
}

// `seqs` decode sequences with `ctx` tokens of context plus one prompt chunk of `chunk` tokens.
ReplicaBatch mixed_batch(int seqs, int ctx, int chunk) {
  ReplicaBatch b = decode_batch(seqs, ctx);
  b.groups[0].push_back(SeqWork{1000, 0, chunk, 0, true, 0});
  return b;
}

// Up to four attention groups of one decode sequence each, with these contexts.
ReplicaBatch spread(const std::vector<int>& ctx) {
  ReplicaBatch b;
  b.groups.resize(4);
  for (std::size_t g = 0; g < ctx.size(); ++g)
    b.groups[g].push_back(SeqWork{static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(ctx[g]), 1, ctx[g], true, 0});
  return b;
}

constexpr auto kAttn = static_cast<std::size_t>(OpClass::Attention);
constexpr auto kExperts = static_cast<std::size_t>(OpClass::Experts);

// A mock attention: per group 1 µs per unit of attention work (Σ new tokens × (context + half of
// them)), the slowest group on the critical path, the groups' sum per GPU.
AttentionCost mock_attention(const ReplicaBatch& b) {
  AttentionCost a;
  for (const auto& g : b.groups) {
    double w = 0;
    for (const auto& x : g) w += x.new_tokens * (x.context + (x.new_tokens + 1) / 2.0);
    a.critical = std::max(a.critical, 1e-6 * w);
    a.busy += 1e-6 * w;
  }
  return a;
}

// A step of `batch` whose attention is the mock's and whose experts take `experts` (a routing sample).
StepTiming step_of(const ReplicaBatch& batch, double experts) {
  const AttentionCost a = mock_attention(batch);
  StepTiming t;
  t.critical[kAttn] = a.critical;
  t.busy[kAttn] = a.busy;
  t.critical[kExperts] = experts;
  t.makespan = a.critical + experts;
  t.stage_time = {t.makespan};
  return t;
}

// A step whose attention is linear in the context sum and whose expert time is a routing sample.
StepTiming step(double context_sum, double expert_sample) {
  StepTiming t;
  t.critical[kAttn] = 1e-3 + 2e-9 * context_sum;
  t.busy[kAttn] = t.critical[kAttn];
  t.critical[kExperts] = expert_sample;
  t.makespan = t.critical[kAttn] + expert_sample;
  t.stage_time = {t.makespan};
  return t;
}

// Times batches through `costs`, executing with `timed` and counting the executions.
struct Counted {
  StepCosts& costs;
  std::function<StepTiming(const ReplicaBatch&)> timed;
  int executed = 0;
  StepTiming operator()(const ReplicaBatch& b) {
    return costs.timing(b, [&] {
      ++executed;
      return timed(b);
    });
  }
};

}  // namespace

TEST_CASE("step costs: a decode step is its family's mean over five executed steps, with its own attention") {
  StepCache cache;
  StepCosts costs(12, true, true, 0, cache, mock_attention);
  const double samples[] = {4e-3, 6e-3, 5e-3, 3e-3, 7e-3};
  Counted run{costs, [&](const ReplicaBatch& b) { return step_of(b, 0); }};
  run.timed = [&](const ReplicaBatch& b) { return step_of(b, samples[run.executed % 5]); };
  for (int ctx : {1000, 1100, 1200, 1300, 1400}) run(decode_batch(8, ctx));
  CHECK(run.executed == 5);
  // Four times the context of any executed step: the attention is the step's own, the routing-
  // decided rest the mean of the five samples.
  const StepTiming t = run(decode_batch(8, 5600));
  CHECK(run.executed == 5);
  CHECK(costs.interpolated() == 1);
  CHECK(t.critical[kAttn] == doctest::Approx(mock_attention(decode_batch(8, 5600)).critical));
  CHECK(t.busy[kAttn] == doctest::Approx(mock_attention(decode_batch(8, 5600)).busy));
  CHECK(t.critical[kExperts] == doctest::Approx(5e-3));
  CHECK(t.makespan == doctest::Approx(mock_attention(decode_batch(8, 5600)).critical + 5e-3));
  // Another batch size is another family: executed until it has its own five samples.
  run(decode_batch(9, 2500));
  CHECK(run.executed == 6);
  // Without an estimator nothing is interpolated.
  StepCache other;
  StepCosts blind(12, true, true, 0, other);
  Counted run2{blind, [](const ReplicaBatch& b) { return step_of(b, 5e-3); }};
  for (int ctx : {1000, 1100, 1200, 1300, 1400, 1500, 1600}) run2(decode_batch(8, ctx));
  CHECK(run2.executed == 7);
  CHECK(blind.interpolated() == 0);
}

TEST_CASE("step costs: a batch size with too few samples of its own is the line through its neighbours' when their routing is steady") {
  // Expert time linear in the batch (1 ms per sequence), no scatter: the fitted line reproduces it.
  StepCache cache;
  StepCosts costs(12, true, true, 0, cache, mock_attention);
  auto seqs = [](const ReplicaBatch& b) { return static_cast<double>(b.groups[0].size()); };
  Counted run{costs, [&](const ReplicaBatch& b) { return step_of(b, 1e-3 * seqs(b)); }};
  for (int ctx : {1000, 1100}) {
    run(decode_batch(8, ctx));
    run(decode_batch(10, ctx));
  }
  REQUIRE(run.executed == 4);  // two samples each: neither family has five of its own
  const StepTiming t = run(decode_batch(9, 3000));
  CHECK(run.executed == 4);
  CHECK(costs.interpolated() == 1);
  CHECK(t.critical[kExperts] == doctest::Approx(9e-3));
  CHECK(t.critical[kAttn] == doctest::Approx(mock_attention(decode_batch(9, 3000)).critical));
  CHECK(t.makespan == doctest::Approx(mock_attention(decode_batch(9, 3000)).critical + 9e-3));
  run(decode_batch(10, 1500));  // an end of the pooled span: still inside it
  CHECK(run.executed == 4);
  // Not extrapolated (beyond 10%): 12 has neighbours (10) on one side only; then 11 is bracketed.
  run(decode_batch(12, 1000));
  run(decode_batch(12, 1100));
  CHECK(run.executed == 6);
  const StepTiming u = run(decode_batch(11, 2000));
  CHECK(run.executed == 6);
  CHECK(u.critical[kExperts] == doctest::Approx(11e-3));
  // Three buckets away is no neighbour: 15 has 13 … 17 to pool, none executed.
  run(decode_batch(15, 1000));
  CHECK(run.executed == 7);

  // Noisy routing (expert time ±20% from sample to sample): the scatter keeps the neighbours'
  // line from standing in, and 9 waits for five samples of its own like any family.
  StepCache noisy_cache;
  StepCosts noisy(12, true, true, 0, noisy_cache, mock_attention);
  auto luck = [](const ReplicaBatch& b) { return b.groups[0][0].context / 100 % 2 ? 1.2 : 0.8; };
  Counted run2{noisy, [&](const ReplicaBatch& b) { return step_of(b, 1e-3 * seqs(b) * luck(b)); }};
  for (int ctx : {1000, 1100, 1200}) {
    run2(decode_batch(8, ctx));
    run2(decode_batch(10, ctx));
  }
  REQUIRE(run2.executed == 6);
  for (int ctx : {1000, 1100, 1200, 1300, 1400}) run2(decode_batch(9, ctx));
  CHECK(run2.executed == 11);
  run2(decode_batch(9, 3000));
  CHECK(run2.executed == 11);
}

TEST_CASE("step costs: attention-DP decode steps of one size share a family however unevenly the groups hold the context") {
  // Four groups of one sequence: the family is the batch size and its largest group; the critical
  // attention (the longest group's) and the per-GPU one (all groups') come from the estimator.
  StepCache cache;
  StepCosts costs(12, true, true, 0, cache, mock_attention);
  const double samples[] = {3.8e-3, 4.2e-3, 3.8e-3, 4.2e-3, 4e-3, 4e-3};  // routing samples, the first five's mean 4 ms
  Counted run{costs, [&](const ReplicaBatch& b) { return step_of(b, samples[run.executed - 1]); }};
  for (const auto& ctx : std::vector<std::vector<int>>{{200, 200, 200, 1000}, {400, 400, 400, 1300}, {600, 600, 600, 1700},
                                                       {800, 800, 800, 2100}, {900, 900, 900, 2500}})
    run(spread(ctx));
  REQUIRE(run.executed == 5);
  const std::vector<int> uneven = {100, 200, 300, 3500};  // more uneven, and longer, than any executed
  const StepTiming t = run(spread(uneven));
  CHECK(run.executed == 5);
  CHECK(t.critical[kAttn] == doctest::Approx(mock_attention(spread(uneven)).critical));
  CHECK(t.busy[kAttn] == doctest::Approx(mock_attention(spread(uneven)).busy));
  CHECK(t.makespan == doctest::Approx(step_of(spread(uneven), 4e-3).makespan));
  // Three sequences are another family.
  run(spread({300, 300, 1500}));
  CHECK(run.executed == 6);
}

TEST_CASE("step costs: attention-DP decode steps of new families are fitted from all executed decode steps once the fit is precise") {
  // Four groups; expert time 1 ms per decode token plus 0.5 ms per token of the largest group
  // (its dispatch is on the critical path). Every (batch, largest group) pair is its own family.
  auto group_batch = [](const std::vector<int>& seqs) {
    ReplicaBatch b;
    b.groups.resize(4);
    std::uint32_t id = 0;
    for (std::size_t g = 0; g < seqs.size(); ++g)
      for (int i = 0; i < seqs[g]; ++i, ++id) b.groups[g].push_back(SeqWork{id, 500, 1, 500, true, 0});
    return b;
  };
  auto rest = [](const ReplicaBatch& b) {
    double n = 0, big = 0;
    for (const auto& g : b.groups) {
      n += static_cast<double>(g.size());
      big = std::max(big, static_cast<double>(g.size()));
    }
    return 1e-3 * n + 0.5e-3 * big;
  };
  StepCache cache;
  StepCosts costs(12, true, true, 0, cache, mock_attention);
  Counted run{costs, [&](const ReplicaBatch& b) { return step_of(b, rest(b)); }};
  const std::vector<std::vector<int>> executed = {{5, 5, 5, 5}, {6, 5, 5, 5}, {8, 4, 4, 4}, {6, 6, 6, 6}, {9, 5, 5, 5}, {7, 6, 6, 6}};
  for (const auto& x : executed) run(group_batch(x));
  REQUIRE(run.executed == 6);  // each a family of its own, none with a neighbour to pool
  const ReplicaBatch b = group_batch({7, 6, 5, 4});  // 22 tokens, largest group 7: a new family, bracketed
  // (20-25 tokens, 12-18 outside the largest group: all within 25% of its tokens)
  const StepTiming t = run(b);
  CHECK(run.executed == 6);
  CHECK(t.critical[kExperts] == doctest::Approx(rest(b)));
  CHECK(t.makespan == doctest::Approx(step_of(b, rest(b)).makespan));

  // The same steps with routing luck (±20% from step to step): the fit is not precise and does
  // not stand in (no steady-line clause for decode steps); the new family is executed.
  StepCache noisy_cache;
  StepCosts noisy(12, true, true, 0, noisy_cache, mock_attention);
  int k = 0;
  Counted run2{noisy, [&](const ReplicaBatch& x) { return step_of(x, rest(x) * (k++ % 2 ? 1.2 : 0.8)); }};
  for (const auto& x : executed) run2(group_batch(x));
  REQUIRE(run2.executed == 6);
  run2(group_batch({7, 6, 5, 4}));
  CHECK(run2.executed == 7);
}

TEST_CASE("step costs: memoised shapes are reused, interpolation can be switched off") {
  StepCache cache;
  StepCosts off(12, false, true, 0, cache);
  int executed = 0;
  auto exec = [&] {
    ++executed;
    return step(8000, 5e-3);
  };
  for (int ctx : {1000, 1300, 1700, 2500}) off.timing(decode_batch(8, ctx), exec);
  CHECK(executed == 4);
  CHECK(off.interpolated() == 0);
  off.timing(decode_batch(8, 2500), exec);  // same shape bucket
  CHECK(executed == 4);
  StepCosts none(0, true, true, 0, cache, mock_attention);  // no memoisation at all
  none.timing(decode_batch(8, 2500), exec);
  CHECK(executed == 5);
  CHECK_FALSE(none.memoises());
  none.timing(decode_batch(8, 2500), exec);  // the same shape again: executed again
  CHECK(executed == 6);
}

TEST_CASE("step costs: a step with prompt chunks is fitted from the executed steps of its kind near it in tokens, with its own attention") {
  StepCache cache;
  StepCosts costs(12, false, true, 0, cache, mock_attention);
  // The rest linear in the tokens: the fit is exact.
  Counted run{costs, [](const ReplicaBatch& b) { return step_of(b, 1e-5 * b.tokens()); }};
  const int& executed = run.executed;
  run(mixed_batch(40, 1000, 1000));
  run(mixed_batch(100, 1000, 1100));  // decode shares 4–8%: one stratum, whatever the mix
  run(mixed_batch(56, 1000, 1400));
  CHECK(executed == 3);
  run(mixed_batch(30, 1000, 1200));  // three neighbours are too few to judge a fit by
  CHECK(executed == 4);
  run(mixed_batch(20, 1000, 1700));
  CHECK(executed == 5);
  // Among them in tokens, with another decode share and a decode context twice as long.
  const ReplicaBatch mid = mixed_batch(48, 2000, 1200);
  const StepTiming t = run(mid);
  CHECK(executed == 5);
  CHECK(costs.interpolated_mixed() == 1);
  // Ratios: Approx's margin is absolute. A line in tokens would put this step's attention 3% off.
  CHECK(t.critical[kAttn] / mock_attention(mid).critical == doctest::Approx(1.0));
  CHECK(t.critical[kExperts] / (1e-5 * mid.tokens()) == doctest::Approx(1.0));
  CHECK(t.makespan / step_of(mid, 1e-5 * mid.tokens()).makespan == doctest::Approx(1.0));
  // Beyond the neighbours' tokens by more than 10%: executed, not extrapolated.
  run(mixed_batch(10, 1000, 2000));
  CHECK(executed == 6);
  // No neighbour within 2× in tokens: executed.
  run(mixed_batch(100, 1000, 4500));
  CHECK(executed == 7);
  // Steps of prompt chunks alone are a stratum of their own: fitted from their kind only.
  auto prefill = [](int chunk) {
    ReplicaBatch b;
    b.groups.resize(1);
    b.groups[0].push_back(SeqWork{1000, 0, chunk, 0, true, 0});
    return b;
  };
  run(prefill(1300));  // mixed neighbours aplenty, but none of its kind
  CHECK(executed == 8);
  for (int chunk : {1000, 1150, 1600}) run(prefill(chunk));
  CHECK(executed == 11);
  const StepTiming pf = run(prefill(1250));
  CHECK(executed == 11);
  CHECK(pf.critical[kExperts] / (1e-5 * 1250) == doctest::Approx(1.0));
}

TEST_CASE("step costs: under attention-DP the fit follows the tokens outside the chunk's group as well") {
  // Group 0 holds a prompt chunk and `beside` decode tokens, group 1 `other` decode tokens; the
  // rest is linear in the tokens in all and in those outside group 0, with different slopes.
  auto batch = [](int chunk, int beside, int other) {
    ReplicaBatch b;
    b.groups.resize(2);
    for (int i = 0; i < beside; ++i) b.groups[0].push_back(SeqWork{static_cast<std::uint32_t>(i), 500, 1, 500, true, 0});
    b.groups[0].push_back(SeqWork{999, 0, chunk, 0, true, 0});
    for (int i = 0; i < other; ++i) b.groups[1].push_back(SeqWork{static_cast<std::uint32_t>(100 + i), 500, 1, 500, true, 0});
    return b;
  };
  auto rest = [](const ReplicaBatch& b) { return 1e-5 * b.tokens() + 5e-5 * static_cast<double>(b.groups[1].size()); };
  StepCache cache;
  StepCosts costs(12, false, true, 0, cache, mock_attention);
  Counted run{costs, [&](const ReplicaBatch& b) { return step_of(b, rest(b)); }};
  for (auto [c, bs, o] : std::vector<std::array<int, 3>>{{1000, 2, 10}, {1200, 1, 40}, {1400, 3, 20}, {1100, 2, 60}})
    run(batch(c, bs, o));
  REQUIRE(run.executed == 4);
  // A line in the tokens alone through those four would be off by 8–11% (their outside
  // tokens do not follow their tokens); the fit in both is exact.
  for (auto [c, bs, o] : std::vector<std::array<int, 3>>{{1250, 2, 30}, {1300, 1, 5}, {1050, 3, 55}}) {
    const ReplicaBatch q = batch(c, bs, o);
    const StepTiming t = run(q);
    CHECK(run.executed == 4);
    CHECK(t.critical[kExperts] / rest(q) == doctest::Approx(1.0).epsilon(1e-6));
  }
}

TEST_CASE("step costs: mixed steps can be switched off") {
  // Switched off, every new mixed shape is executed.
  StepCache other;
  StepCosts off(12, false, false, 0, other, mock_attention);
  Counted run2{off, [](const ReplicaBatch& b) { return step_of(b, 1e-2); }};
  run2(mixed_batch(40, 1000, 1000));
  run2(mixed_batch(56, 1000, 1400));
  run2(mixed_batch(48, 1000, 1200));
  CHECK(run2.executed == 3);
  CHECK(off.interpolated_mixed() == 0);
}
