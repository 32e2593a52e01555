// tests/optimizers/statistics_test.cpp — the optimizer comparison's statistics on samples worked by hand.
#include <doctest/doctest.h>

#include "optimizers/report/statistics.hpp"
#include "workloads/request_trace.hpp"

using namespace shardsim;

TEST_CASE("quantile: linear interpolation between order statistics") {
  CHECK(quantile({}, 0.5) == 0);
  CHECK(quantile({3, 1, 2}, 0.5) == 2);
  CHECK(quantile({1, 2, 3, 4}, 0.5) == doctest::Approx(2.5));
  CHECK(quantile({1, 2, 3, 4}, 0.25) == doctest::Approx(1.75));
  CHECK(quantile({5, 1}, 1.0) == 5);
}

TEST_CASE("Mann–Whitney U: exact p without ties, as the permutation distribution gives it") {
  // Complete separation of 5 and 5: U = 0, the most extreme of C(10, 5) = 252 arrangements on
  // either side, p = 2/252 — the smallest p five seeds per optimizer allow.
  MannWhitney r = mann_whitney({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10});
  CHECK(r.exact);
  CHECK(r.u == 0);
  CHECK(r.p == doctest::Approx(2.0 / 252));
  CHECK(mann_whitney({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5}).u == 25);
  CHECK(mann_whitney({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5}).p == doctest::Approx(2.0 / 252));
  // 3 and 3 interleaved: U = 3 (3>2, 5>2, 5>4). Of the 20 arrangements, U = 0..9 occur
  // 1,1,2,3,3,3,3,2,1,1 times: P(U ≤ 3) = 7/20, two-sided 0.7.
  r = mann_whitney({1, 3, 5}, {2, 4, 6});
  CHECK(r.u == 3);
  CHECK(r.p == doctest::Approx(0.7));
  // Identical samples: no evidence.
  CHECK(mann_whitney({1, 2, 3}, {1, 2, 3}).p == doctest::Approx(1.0));
}

TEST_CASE("Mann–Whitney U: ties take the normal approximation with tie and continuity corrections") {
  // a = {1,2,2,3}, b = {2,3,3,4}: U = 3 (3>2; 2=2 twice ½ each; 3=3 twice ½ each). Pooled ties:
  // 2 ×3, 3 ×3 → Σ(t³−t) = 48; var = 16/12 · (9 − 48/56) = 10.857; z = (|3 − 8| − ½)/√var = 1.3657.
  const MannWhitney r = mann_whitney({1, 2, 2, 3}, {2, 3, 3, 4});
  CHECK(!r.exact);
  CHECK(r.u == doctest::Approx(3));
  CHECK(r.p == doctest::Approx(0.17203).epsilon(1e-4));
  // Every value tied: nothing to test.
  CHECK(mann_whitney({2, 2}, {2, 2, 2}).p == 1);
}

TEST_CASE("Holm: step-down adjusted p-values, monotone and capped at 1") {
  const std::vector<double> adj = holm_adjust({0.01, 0.04, 0.03});
  // Sorted 0.01, 0.03, 0.04 → 3·0.01 = 0.03, 2·0.03 = 0.06, max(0.06, 1·0.04) = 0.06.
  CHECK(adj[0] == doctest::Approx(0.03));
  CHECK(adj[1] == doctest::Approx(0.06));
  CHECK(adj[2] == doctest::Approx(0.06));
  CHECK(holm_adjust({0.5, 0.6})[1] == 1.0);
  CHECK(holm_adjust({}).empty());
}

TEST_CASE("Vargha–Delaney A12: wins plus half the ties over all pairs") {
  CHECK(a12({1, 2, 3}, {2, 2, 4}) == doctest::Approx(3.0 / 9));  // 3 beats both 2s; 2 ties both 2s (½ each)
  CHECK(a12({1, 2, 3}, {2, 2, 2}) == doctest::Approx(4.5 / 9));  // three wins, three ties: even
  CHECK(a12({6, 7}, {1, 2}) == 1.0);
  CHECK(a12({1, 2}, {6, 7}) == 0.0);
  CHECK(a12({}, {1}) == 0.5);
}

TEST_CASE("bootstrap interval of the median: holds the median, is reproducible, and narrows with more runs") {
  SplitMix64 rng(7);
  std::vector<double> big;
  for (int i = 0; i < 200; ++i) big.push_back(100 + 10 * rng.normal());
  const std::vector<double> small(big.begin(), big.begin() + 5), mid(big.begin(), big.begin() + 50);
  const Interval s = bootstrap_median_interval(small, 1), m = bootstrap_median_interval(mid, 1),
                 b = bootstrap_median_interval(big, 1);
  for (const auto& [iv, v] : {std::pair{s, small}, std::pair{m, mid}, std::pair{b, big}}) {
    CHECK(iv.lo <= quantile(v, 0.5));
    CHECK(iv.hi >= quantile(v, 0.5));
  }
  CHECK(m.hi - m.lo < s.hi - s.lo);
  CHECK(b.hi - b.lo < m.hi - m.lo);
  const Interval again = bootstrap_median_interval(mid, 1);
  CHECK(again.lo == m.lo);
  CHECK(again.hi == m.hi);
  CHECK(bootstrap_median_interval({4}, 1).lo == 4);
  CHECK(bootstrap_median_interval({}, 1).hi == 0);
}
