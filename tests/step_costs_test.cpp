// tests/step_costs_test.cpp — where the fast path's step timings come from: memoised by shape,
// interpolated along context for decode steps (attention on the anchors' line, the rest their
// mean), interpolated along tokens for mixed steps of one family, or executed.
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
  for (int i = 0; i < seqs; ++i) b.groups[0].push_back(SeqWork{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(ctx), 1, ctx, true});
  return b;
}

// `seqs` decode sequences with `ctx` tokens of context plus one prompt chunk of `chunk` tokens.
ReplicaBatch mixed_batch(int seqs, int ctx, int chunk) {
  ReplicaBatch b = decode_batch(seqs, ctx);
  b.groups[0].push_back(SeqWork{1000, 0, chunk, 0, true});
  return b;
}

constexpr auto kAttn = static_cast<std::size_t>(OpClass::Attention);
constexpr auto kExperts = static_cast<std::size_t>(OpClass::Experts);

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

// A step of critical attention `crit`, per-GPU attention `busy` and expert time `experts`.
StepTiming parts(double crit, double busy, double experts) {
  StepTiming t;
  t.critical[kAttn] = crit;
  t.busy[kAttn] = busy;
  t.critical[kExperts] = experts;
  t.makespan = crit + experts;
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

TEST_CASE("step costs: a decode step is interpolated from three executed ones: attention on their line, the rest their mean") {
  StepCache cache;
  StepCosts costs(12, true, true, 0, cache);
  int executed = 0;
  const double samples[] = {4e-3, 6e-3, 5e-3};
  auto run = [&](int ctx) {
    return costs.timing(decode_batch(8, ctx), [&] {
      const double sample = samples[executed % 3];
      ++executed;
      return step(8.0 * ctx, sample);
    });
  };
  run(1000);
  run(1300);
  run(1700);  // three anchors, 30% apart
  CHECK(executed == 3);
  const StepTiming t = run(2500);  // within an octave above the last
  CHECK(executed == 3);
  CHECK(costs.interpolated() == 1);
  CHECK(t.critical[kAttn] == doctest::Approx(1e-3 + 2e-9 * 8 * 2500));
  CHECK(t.critical[kExperts] == doctest::Approx(5e-3));  // the mean of the three samples
  CHECK(t.makespan == doctest::Approx(1e-3 + 2e-9 * 8 * 2500 + 5e-3));
  run(4000);  // beyond an octave of every anchor: executed
  CHECK(executed == 4);
  // Another batch size is another family: executed until it has its own anchors.
  costs.timing(decode_batch(9, 2500), [&] {
    ++executed;
    return step(9.0 * 2500, 5e-3);
  });
  CHECK(executed == 5);
}

TEST_CASE("step costs: attention-DP decode steps read the critical attention off the longest group, per-GPU off the sum") {
  // Up to four groups of one sequence each: the critical path runs through the longest context,
  // whatever the other groups hold, and the per-GPU attention through all of them; how unevenly
  // they are spread does not split a family, and a batch of another size reads the same line.
  auto spread = [](std::vector<int> ctx) {
    ReplicaBatch b;
    b.groups.resize(4);
    for (std::size_t g = 0; g < ctx.size(); ++g)
      b.groups[g].push_back(SeqWork{static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(ctx[g]), 1, ctx[g], true});
    return b;
  };
  auto timed = [](std::vector<int> ctx) {
    double sum = 0, mx = 0;
    for (int c : ctx) {
      sum += c;
      mx = std::max(mx, static_cast<double>(c));
    }
    return parts(1e-3 + 4e-9 * mx, 1e-3 + 1e-9 * sum, 1e-3 * static_cast<double>(ctx.size()));
  };
  StepCache cache;
  StepCosts costs(12, true, true, 0, cache);
  int executed = 0;
  auto run = [&](std::vector<int> ctx) {
    return costs.timing(spread(ctx), [&] {
      ++executed;
      return timed(ctx);
    });
  };
  run({200, 200, 200, 1000});  // imbalance 2.5
  run({400, 400, 400, 1300});  // 2.1
  run({600, 600, 600, 1700});  // 1.9
  REQUIRE(executed == 3);
  const std::vector<int> uneven = {100, 200, 300, 1500};  // imbalance 2.9: more uneven than any executed
  const StepTiming t = run(uneven);
  CHECK(executed == 3);
  CHECK(t.critical[kAttn] == doctest::Approx(timed(uneven).critical[kAttn]));
  CHECK(t.busy[kAttn] == doctest::Approx(timed(uneven).busy[kAttn]));
  CHECK(t.makespan == doctest::Approx(timed(uneven).makespan));
  // Three sequences: a family of its own (its routing-decided rest), whose three executed steps
  // span 1,000–1,200 tokens of longest context (too close to reach 1,500 on their own); at 1,500
  // its critical attention comes off the line the four-sequence steps drew.
  run({300, 300, 1000});
  run({300, 300, 1100});
  run({300, 300, 1200});
  REQUIRE(executed == 6);
  const std::vector<int> three = {300, 300, 1500};
  const StepTiming u = run(three);
  CHECK(executed == 6);
  CHECK(u.critical[kAttn] == doctest::Approx(timed(three).critical[kAttn]));
  CHECK(u.critical[kExperts] == doctest::Approx(timed(three).critical[kExperts]));
  CHECK(u.makespan == doctest::Approx(timed(three).makespan));
}

TEST_CASE("step costs: memoised shapes are reused, fresh steps re-executed, interpolation can be switched off") {
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
  off.timing(decode_batch(8, 2500), exec, true);  // a timeline step: always executed
  CHECK(executed == 5);
  StepCosts none(0, true, true, 0, cache);  // no memoisation at all
  none.timing(decode_batch(8, 2500), exec);
  CHECK(executed == 6);
  CHECK(none.key(std::array<double, 3>{1, 2, 3}.data(), std::array<double, 3>{1, 2, 3}.data(), 1).empty());
}

TEST_CASE("step costs: a mixed step is interpolated along its tokens between two executed steps of its family") {
  StepCache cache;
  StepCosts costs(12, false, true, 0, cache);
  // Cost linear in the tokens: interpolation is exact.
  Counted run{costs, [](const ReplicaBatch& b) { return step(0, 1e-5 * b.tokens()); }};
  int& executed = run.executed;
  run(mixed_batch(40, 1000, 1000));
  run(mixed_batch(44, 1000, 1300));  // same decode share (25 buckets), decode context within a quarter octave
  CHECK(executed == 2);
  const StepTiming t = run(mixed_batch(42, 1000, 1150));
  CHECK(executed == 2);
  CHECK(costs.interpolated_mixed() == 1);
  // On the line through the steps of 1,040 and 1,344 tokens (ratios: Approx's margin is absolute).
  CHECK(t.critical[kExperts] / (1e-5 * (42 + 1150)) == doctest::Approx(1.0));
  CHECK(t.makespan / (1e-3 + 1e-5 * (42 + 1150)) == doctest::Approx(1.0));
  // Outside the two (or with no neighbour within 1.5×): executed, then a member of the family.
  run(mixed_batch(42, 1000, 2400));
  CHECK(executed == 3);
  // Another family: a larger decode share, or the decode context an octave longer.
  run(mixed_batch(400, 1000, 1150));
  run(mixed_batch(42, 2000, 1150));
  CHECK(executed == 5);
  // Decode-only steps never come from a mixed family; switched off, every new mixed shape is executed.
  StepCache other;
  StepCosts off(12, false, false, 0, other);
  off.timing(mixed_batch(40, 1000, 1000), [&] { return ++executed, step(0, 1e-2); });
  off.timing(mixed_batch(44, 1000, 1300), [&] { return ++executed, step(0, 1e-2); });
  off.timing(mixed_batch(42, 1000, 1150), [&] { return ++executed, step(0, 1e-2); });
  CHECK(executed == 8);
  CHECK(off.interpolated_mixed() == 0);
}

TEST_CASE("step costs: a mixed step's attention is interpolated in attention work, the rest in tokens") {
  // A fresh chunk's attention grows with the square of its length: the line in tokens through
  // steps of 1,010 and 1,410 tokens would put a 1,210-token step's attention 2.7% high.
  auto work = [](const ReplicaBatch& b) {
    double w = 0;
    for (const auto& g : b.groups)
      for (const auto& x : g) w += x.new_tokens * (x.context + (x.new_tokens + 1) / 2.0);
    return w;
  };
  auto timed = [&](const ReplicaBatch& b) { return parts(1e-9 * work(b), 1e-9 * work(b), 1e-5 * b.tokens()); };
  StepCache cache;
  StepCosts costs(12, false, true, 0, cache);
  Counted run{costs, timed};
  const int& executed = run.executed;
  run(mixed_batch(10, 1000, 1000));
  run(mixed_batch(10, 1000, 1400));
  const ReplicaBatch mid = mixed_batch(10, 1000, 1200);
  const StepTiming t = run(mid);
  REQUIRE(executed == 2);
  CHECK(t.critical[kAttn] / timed(mid).critical[kAttn] == doctest::Approx(1.0));
  CHECK(t.busy[kAttn] / timed(mid).busy[kAttn] == doctest::Approx(1.0));
  CHECK(t.makespan / timed(mid).makespan == doctest::Approx(1.0));
}
