// sim/serving/step_fit.cpp — weighted sums of step timings and the local fit of mixed steps.
#include "sim/serving/step_fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

namespace shardsim {

namespace {

constexpr auto kAttn = static_cast<std::size_t>(OpClass::Attention);

constexpr double kSlack = 1.1;       // a feature may lie this far beyond the neighbours' range
constexpr double kMinSpread = 0.02;  // of the tokens: less spread in the outside tokens leaves them out
constexpr int kMinNeighbours = 4;    // up to three coefficients, and some scatter to judge them by
constexpr int kMaxNeighbours = 24;   // the nearest in tokens, when more are within the span
constexpr double kPrecision = 0.005; // standard error of the fitted rest, relative
constexpr double kMaxLeverage = 3;  // Σ|λ| beyond this is an ill-posed extrapolation
constexpr double kMaxVariance = 0.5; // or Σλ² at most this: as steady as the line between two executed steps
constexpr int kMinDof = 3;           // a precise-only fit's scatter is judged on at least this many degrees of freedom

}  // namespace

StepTiming weighted(const std::vector<std::pair<const StepTiming*, double>>& parts) {
  std::size_t heaviest = 0;
  for (std::size_t i = 1; i < parts.size(); ++i)
    if (parts[i].second >= parts[heaviest].second) heaviest = i;  // ties: the later part
  StepTiming t = *parts[heaviest].first;
  auto sum = [&](auto field) {
    double x = 0;
    for (const auto& [p, w] : parts) x += w * field(*p);
    return std::max(0.0, x);
  };
  t.makespan = sum([](const StepTiming& p) { return p.makespan; });
  for (std::size_t i = 0; i < t.stage_time.size(); ++i)
    t.stage_time[i] = sum([i](const StepTiming& p) { return i < p.stage_time.size() ? p.stage_time[i] : 0.0; });
  // Every other sum, part by part in the same order: Σ w · x, at least 0.
  for_each_sum(t, t, [](double& x, double) { x = 0; });
  for (const auto& [p, w] : parts) for_each_sum(t, *p, [w = w](double& x, double y) { x += w * y; });
  for_each_sum(t, t, [](double& x, double) { x = std::max(0.0, x); });
  return t;
}

StepTiming with_attention(StepTiming t, const AttentionCost& from, const AttentionCost& to) {
  const double before = t.makespan;
  t.makespan = std::max(0.0, t.makespan + to.critical - from.critical);
  t.critical[kAttn] = std::max(0.0, t.critical[kAttn] + to.critical - from.critical);
  t.busy[kAttn] = std::max(0.0, t.busy[kAttn] + to.busy - from.busy);
  t.tensor_work = std::max(0.0, t.tensor_work + to.tensor_work - from.tensor_work);
  t.hbm_work = std::max(0.0, t.hbm_work + to.hbm_work - from.hbm_work);
  if (before > 0)
    for (double& st : t.stage_time) st *= t.makespan / before;
  return t;
}

void MixedFit::add(const std::vector<int>& stratum, const MixedFeatures& x, const AttentionCost& attention,
                   const StepTiming& timing) {
  auto& v = strata_[stratum];
  auto at = std::lower_bound(v.begin(), v.end(), x.tokens, [](const Anchor& a, double t) { return a.x.tokens < t; });
  v.insert(at, Anchor{x, attention, timing});
}

namespace {

// The executed steps within `span` of `tokens`, the nearest kMaxNeighbours in log tokens.
template <class Anchor>
std::vector<const Anchor*> neighbours(const std::vector<Anchor>& v, double tokens, double span) {
  auto below = [](const Anchor& a, double t) { return a.x.tokens < t; };
  auto lo = std::lower_bound(v.begin(), v.end(), tokens / span, below);
  auto hi = std::upper_bound(v.begin(), v.end(), tokens * span, [](double t, const Anchor& a) { return t < a.x.tokens; });
  auto mid = std::lower_bound(lo, hi, tokens, below);
  std::vector<const Anchor*> near;
  for (auto l = mid, h = mid; static_cast<int>(near.size()) < kMaxNeighbours && (l != lo || h != hi);) {
    const double dl = l != lo ? std::log(tokens / (l - 1)->x.tokens) : INFINITY;
    const double dh = h != hi ? std::log(h->x.tokens / tokens) : INFINITY;
    near.push_back(dl <= dh ? &*--l : &*h++);
  }
  return near;
}

// The weights λ (Σλ = 1) that make a step at `x` from the neighbours' rests `r`: weighted least
// squares of the rest on (1, tokens, outside tokens) / tokens, kernel 1 − |log₂(tokens ratio)|,
// the outside tokens only where the neighbours vary in them. Empty when x is not bracketed (in
// tokens within kSlack, in outside tokens within kSlack − 1 of the tokens), when the weights are
// an ill-posed extrapolation, or when the fit is neither precise (standard error from the scatter
// about it) nor as steady as the line between two executed steps (Σλ² ≤ kMaxVariance).
// Fixed-capacity Eigen types (at most kMaxNeighbours steps, three coefficients): the fit runs
// once per interpolated step, and heap-sized matrices made its allocations most of its cost.
using Vec = Eigen::Matrix<double, Eigen::Dynamic, 1, 0, kMaxNeighbours, 1>;
using Coef = Eigen::Matrix<double, Eigen::Dynamic, 1, 0, 3, 1>;
using Design = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, 0, kMaxNeighbours, 3>;
using Normal = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, 0, 3, 3>;
struct Features {  // the neighbours' features, in a fixed array
  MixedFeatures v[kMaxNeighbours];
  int n = 0;
  std::size_t size() const { return static_cast<std::size_t>(n); }
  const MixedFeatures& operator[](std::size_t i) const { return v[i]; }
  const MixedFeatures* begin() const { return v; }
  const MixedFeatures* end() const { return v + n; }
};

Vec fit_weights(const Features& xs, const Vec& r, const MixedFeatures& x, bool steady_line) {
  const int n = static_cast<int>(xs.size());
  double t_lo = INFINITY, t_hi = 0, o_lo = INFINITY, o_hi = -INFINITY;
  for (const MixedFeatures& f : xs) {
    t_lo = std::min(t_lo, f.tokens);
    t_hi = std::max(t_hi, f.tokens);
    o_lo = std::min(o_lo, f.outside());
    o_hi = std::max(o_hi, f.outside());
  }
  const double slack = (kSlack - 1) * x.tokens;
  if (x.tokens * kSlack < t_lo || x.tokens > t_hi * kSlack || x.outside() < o_lo - slack || x.outside() > o_hi + slack)
    return {};
  const int p = o_hi - o_lo > kMinSpread * x.tokens ? 3 : 2;
  auto row = [&](const MixedFeatures& f) {
    Coef v(p);
    v(0) = 1;
    v(1) = f.tokens / x.tokens;
    if (p == 3) v(2) = f.outside() / x.tokens;
    return v;
  };
  Design X(n, p);
  Vec w(n);
  for (int i = 0; i < n; ++i) {
    X.row(i) = row(xs[static_cast<std::size_t>(i)]).transpose();
    w(i) = std::max(0.05, 1 - std::abs(std::log2(xs[static_cast<std::size_t>(i)].tokens / x.tokens)));
  }
  const Normal normal = X.transpose() * w.asDiagonal() * X;
  Eigen::CompleteOrthogonalDecomposition<Normal> cod(normal);
  cod.setThreshold(1e-9);
  const Vec lambda = (w.array() * (X * cod.solve(row(x))).array()).matrix();
  if (lambda.cwiseAbs().sum() > kMaxLeverage) return {};
  const Vec e = r - X * cod.solve(X.transpose() * (w.array() * r.array()).matrix());
  if (!steady_line && n - cod.rank() < kMinDof) return {};
  const double dof = std::max(1.0, static_cast<double>(n - cod.rank()));
  const double s2 = (w.array() * e.array().square()).sum() / w.sum() * n / dof;
  const double rest = lambda.dot(r);
  if (!(rest > 0)) return {};
  if (std::sqrt(s2 * lambda.squaredNorm()) > kPrecision * rest && (!steady_line || lambda.squaredNorm() > kMaxVariance)) return {};
  return lambda;
}

}  // namespace

bool MixedFit::predict(const std::vector<int>& stratum, const MixedFeatures& x, const AttentionCost& attention,
                       StepTiming& out) const {
  auto s = strata_.find(stratum);
  if (s == strata_.end() || x.tokens <= 0) return false;
  const std::vector<const Anchor*> near = neighbours(s->second, x.tokens, span_);
  const int n = static_cast<int>(near.size());
  if (n < kMinNeighbours) return false;
  Features xs;
  Vec r(n);
  for (int i = 0; i < n; ++i) {
    xs.v[xs.n++] = near[static_cast<std::size_t>(i)]->x;
    r(i) = near[static_cast<std::size_t>(i)]->timing.makespan - near[static_cast<std::size_t>(i)]->attention.critical;
  }
  const Vec lambda = fit_weights(xs, r, x, steady_line_);
  if (lambda.size() == 0) return false;
  std::vector<std::pair<const StepTiming*, double>> parts;
  AttentionCost from;
  for (int i = 0; i < n; ++i) {
    const Anchor& a = *near[static_cast<std::size_t>(i)];
    parts.push_back({&a.timing, lambda(i)});
    from.add(a.attention, lambda(i));
  }
  out = with_attention(weighted(parts), from, attention);
  return true;
}

}  // namespace shardsim
