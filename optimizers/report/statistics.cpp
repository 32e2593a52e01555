// optimizers/report/statistics.cpp — quantiles, bootstrap intervals, Mann–Whitney U, Holm, A12.
#include "optimizers/report/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "workloads/request_trace.hpp"

namespace shardsim {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(std::floor(pos));
  const double frac = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] + frac * (v[i + 1] - v[i]) : v[i];
}

Interval bootstrap_median_interval(const std::vector<double>& values, std::uint64_t seed, int resamples, double level) {
  if (values.empty()) return {};
  if (values.size() == 1) return {values[0], values[0]};
  SplitMix64 rng(mix64(seed ^ 0xb0075742a9ULL));
  const std::size_t n = values.size();
  std::vector<double> medians, sample(n);
  medians.reserve(static_cast<std::size_t>(std::max(1, resamples)));
  for (int b = 0; b < std::max(1, resamples); ++b) {
    for (std::size_t i = 0; i < n; ++i) sample[i] = values[(rng.next() >> 11) % n];
    medians.push_back(quantile(sample, 0.5));
  }
  return {quantile(medians, (1 - level) / 2), quantile(medians, (1 + level) / 2)};
}

namespace {

// Φ, the standard normal CDF.
double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// P(U ≤ u) under the null for samples of sizes n and m without ties: the number of
// arrangements with U = k, counted by the recursion c(n, m, k) = c(n−1, m, k−m) + c(n, m−1, k).
double exact_cdf(int n, int m, double u) {
  // counts[i][k] for the current m, rolled over m.
  const int umax = n * m;
  std::vector<std::vector<double>> prev(static_cast<std::size_t>(n + 1)), cur(static_cast<std::size_t>(n + 1));
  for (int i = 0; i <= n; ++i) prev[static_cast<std::size_t>(i)].assign(1, 1.0);  // m = 0: U = 0 only
  for (int mm = 1; mm <= m; ++mm) {
    cur[0].assign(1, 1.0);  // n = 0: U = 0 only
    for (int i = 1; i <= n; ++i) {
      std::vector<double>& c = cur[static_cast<std::size_t>(i)];
      c.assign(static_cast<std::size_t>(i * mm + 1), 0.0);
      const std::vector<double>& a = cur[static_cast<std::size_t>(i - 1)];   // c(i−1, mm, k − mm)
      const std::vector<double>& b = prev[static_cast<std::size_t>(i)];      // c(i, mm−1, k)
      for (std::size_t k = 0; k < c.size(); ++k) {
        if (k >= static_cast<std::size_t>(mm) && k - static_cast<std::size_t>(mm) < a.size()) c[k] += a[k - static_cast<std::size_t>(mm)];
        if (k < b.size()) c[k] += b[k];
      }
    }
    std::swap(prev, cur);
  }
  const std::vector<double>& counts = prev[static_cast<std::size_t>(n)];
  double total = 0, below = 0;
  for (int k = 0; k <= umax; ++k) {
    total += counts[static_cast<std::size_t>(k)];
    if (k <= u + 1e-9) below += counts[static_cast<std::size_t>(k)];
  }
  return below / total;
}

}  // namespace

MannWhitney mann_whitney(const std::vector<double>& a, const std::vector<double>& b) {
  MannWhitney r;
  if (a.empty() || b.empty()) return r;
  const double n = static_cast<double>(a.size()), m = static_cast<double>(b.size());
  for (double x : a)
    for (double y : b) r.u += x > y ? 1.0 : x == y ? 0.5 : 0.0;
  // Ties over the pooled sample.
  std::vector<double> pooled = a;
  pooled.insert(pooled.end(), b.begin(), b.end());
  std::sort(pooled.begin(), pooled.end());
  double tie_term = 0;  // Σ (t³ − t)
  for (std::size_t i = 0; i < pooled.size();) {
    std::size_t j = i;
    while (j < pooled.size() && pooled[j] == pooled[i]) ++j;
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    i = j;
  }
  if (tie_term == 0 && a.size() <= 25 && b.size() <= 25) {
    r.exact = true;
    const double lower = std::min(r.u, n * m - r.u);  // the distribution is symmetric
    r.p = std::min(1.0, 2 * exact_cdf(static_cast<int>(a.size()), static_cast<int>(b.size()), lower));
    return r;
  }
  const double mean = n * m / 2;
  const double var = n * m / 12 * ((n + m + 1) - tie_term / ((n + m) * (n + m - 1)));
  if (!(var > 0)) return r;  // every value tied: no evidence either way
  const double z = (std::fabs(r.u - mean) - 0.5) / std::sqrt(var);
  r.p = std::min(1.0, 2 * (1 - normal_cdf(std::max(0.0, z))));
  return r;
}

std::vector<double> holm_adjust(const std::vector<double>& p) {
  const std::size_t m = p.size();
  std::vector<std::size_t> order(m);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return p[x] < p[y]; });
  std::vector<double> out(m);
  double running = 0;
  for (std::size_t r = 0; r < m; ++r) {
    running = std::max(running, std::min(1.0, static_cast<double>(m - r) * p[order[r]]));
    out[order[r]] = running;
  }
  return out;
}

double a12(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || b.empty()) return 0.5;
  return mann_whitney(a, b).u / (static_cast<double>(a.size()) * static_cast<double>(b.size()));
}

}  // namespace shardsim
