// sim/serving/step_costs.cpp — memoised, interpolated or executed step timings.
#include "sim/serving/step_costs.hpp"

#include <algorithm>
#include <cmath>

#include "sim/step/lowering.hpp"

namespace shardsim {

namespace {

// A batch's shape: per attention group (decode tokens, prefill tokens, context tokens), their
// sums and maxima over groups, and the tokens it emits.
struct Shape {
  double sums[3] = {0, 0, 0}, maxs[3] = {0, 0, 0};
  int emits = 0;
  int groups = 0;
  bool decode_only() const { return sums[1] == 0 && sums[0] > 0; }
};

Shape shape_of(const ReplicaBatch& batch) {
  Shape s;
  s.groups = static_cast<int>(batch.groups.size());
  for (const auto& g : batch.groups) {
    double v[3] = {0, 0, 0};
    for (const auto& w : g) {
      (w.new_tokens == 1 && w.context > 0 ? v[0] : v[1]) += w.new_tokens;
      v[2] += w.context;
      s.emits += w.emits;
    }
    for (int i = 0; i < 3; ++i) {
      s.sums[i] += v[i];
      s.maxs[i] = std::max(s.maxs[i], v[i]);
    }
  }
  return s;
}

int bucket(double x, int b) {
  return x <= 2.0 * b ? static_cast<int>(x) : static_cast<int>(2 * b + std::lround(b * std::log2(x / (2.0 * b))));
}

constexpr double kMinSpread = 1.25;  // two anchors this far apart (ratio of contexts) define a slope
constexpr double kReach = 2.0;       // and are trusted up to one octave beyond the nearer one
constexpr std::size_t kMinAnchors = 3;  // routing samples averaged before a family interpolates

// a + w (b − a), field by field for w in [0, 1]; kernels from the nearer one.
StepTiming blend(const StepTiming& a, const StepTiming& b, double w) {
  auto mix = [w](double x, double y) { return std::max(0.0, x + w * (y - x)); };
  StepTiming t = a;
  t.makespan = mix(a.makespan, b.makespan);
  for (std::size_t i = 0; i < t.stage_time.size() && i < b.stage_time.size(); ++i) t.stage_time[i] = mix(a.stage_time[i], b.stage_time[i]);
  for (std::size_t i = 0; i < t.critical.size(); ++i) {
    t.critical[i] = mix(a.critical[i], b.critical[i]);
    t.busy[i] = mix(a.busy[i], b.busy[i]);
  }
  for (std::size_t i = 0; i < t.coll_by_kind.size(); ++i) t.coll_by_kind[i] = mix(a.coll_by_kind[i], b.coll_by_kind[i]);
  t.comm_busy = mix(a.comm_busy, b.comm_busy);
  t.comm_exposed = mix(a.comm_exposed, b.comm_exposed);
  t.expert_imbalance = mix(a.expert_imbalance, b.expert_imbalance);
  t.expert_time = mix(a.expert_time, b.expert_time);
  t.idle_on_path = mix(a.idle_on_path, b.idle_on_path);
  for (std::size_t i = 0; i < t.link_bytes.size(); ++i) {
    t.link_bytes[i] = mix(a.link_bytes[i], b.link_bytes[i]);
    t.link_busiest[i] = mix(a.link_busiest[i], b.link_busiest[i]);
  }
  t.kernels = w < 0.5 ? a.kernels : b.kernels;
  return t;
}

}  // namespace

StepCosts::StepCosts(int buckets_per_octave, bool interpolate, int cost_class, StepCache& cache)
    : b_(buckets_per_octave), interpolate_(interpolate && buckets_per_octave > 0), cost_class_(cost_class), cache_(cache) {}

std::vector<int> StepCosts::key(const double* sums, const double* maxs, int emits) const {
  if (b_ <= 0) return {};
  return {bucket(sums[0], b_), bucket(sums[1], b_), bucket(sums[2], b_), bucket(maxs[0], b_),
          bucket(maxs[1], b_), bucket(maxs[2], b_), bucket(emits, b_)};
}

StepTiming StepCosts::timing(const ReplicaBatch& batch, const std::function<StepTiming()>& execute, bool fresh) {
  const Shape s = shape_of(batch);
  last_key_ = key(s.sums, s.maxs, s.emits);
  if (last_key_.empty()) return execute();
  std::vector<int> k = last_key_;
  k.push_back(cost_class_);
  if (!fresh) {
    auto hit = cache_.by_shape.find(k);
    if (hit != cache_.by_shape.end()) return hit->second;
  }
  std::vector<int> family;
  if (interpolate_ && s.decode_only()) {
    const double imbalance = s.sums[2] > 0 ? s.maxs[2] * s.groups / s.sums[2] : 1.0;
    family = {bucket(s.sums[0], b_), bucket(s.maxs[0], b_), bucket(s.emits, b_),
              static_cast<int>(std::lround(4 * std::log2(std::max(1.0, imbalance)))), cost_class_};
    StepTiming t;
    if (!fresh && interpolate_into(family, s.sums[2], t)) {
      ++interpolated_;
      cache_.by_shape.emplace(std::move(k), t);
      return t;
    }
  }
  StepTiming t = execute();
  if (!family.empty()) {
    CostFamily& f = cache_.families[family];
    auto& v = f.anchors;
    auto at = std::lower_bound(v.begin(), v.end(), s.sums[2], [](const CostAnchor& a, double x) { return a.context < x; });
    if (at == v.end() || at->context != s.sums[2]) {
      v.insert(at, CostAnchor{s.sums[2], t});
      f.mean = v.size() == 1 ? t : blend(f.mean, t, 1.0 / static_cast<double>(v.size()));  // running mean
    }
  }
  cache_.by_shape.emplace(std::move(k), t);
  return t;
}

// Linear in the context sum between two anchors of `family`: bracketing it within one octave, or
// both on one side, at least kMinSpread apart, with `x` within one octave of the nearer.
bool StepCosts::interpolate_into(const std::vector<int>& family, double x, StepTiming& out) const {
  auto f = cache_.families.find(family);
  if (f == cache_.families.end() || f->second.anchors.size() < kMinAnchors || x <= 0) return false;
  const auto& v = f->second.anchors;
  auto at = std::lower_bound(v.begin(), v.end(), x, [](const CostAnchor& a, double c) { return a.context < c; });
  const CostAnchor *lo = nullptr, *hi = nullptr;
  if (at != v.begin() && at != v.end()) {  // bracketed
    lo = &*(at - 1);
    hi = &*at;
    if (hi->context > kReach * lo->context) return false;
  } else if (at == v.end()) {  // above every anchor: the last and one at least kMinSpread below it
    hi = &v.back();
    if (x > kReach * hi->context) return false;
    for (auto it = v.rbegin() + 1; it != v.rend() && lo == nullptr; ++it)
      if (it->context * kMinSpread <= hi->context) lo = &*it;
  } else {  // below every anchor
    lo = &v.front();
    if (x * kReach < lo->context) return false;
    for (auto it = v.begin() + 1; it != v.end() && hi == nullptr; ++it)
      if (it->context >= kMinSpread * lo->context) hi = &*it;
  }
  if (lo == nullptr || hi == nullptr) return false;
  // Context reaches a decode step's cost through its attention only (linear in the KV read): that
  // part is the anchors' line at x. The rest depends on the routing sample each anchor drew, not on
  // the context: it is the mean over the family's anchors, so that every sample counts.
  constexpr auto attn = static_cast<std::size_t>(OpClass::Attention);
  const double w = (x - lo->context) / (hi->context - lo->context);
  auto line = [&](double a, double b) { return a + w * (b - a); };
  out = f->second.mean;
  const double mean_attn = out.critical[attn];
  const double crit = line(lo->timing.critical[attn], hi->timing.critical[attn]);
  const double busy = line(lo->timing.busy[attn], hi->timing.busy[attn]);
  if (crit < 0 || busy < 0) return false;
  const double before = out.makespan;
  out.makespan += crit - mean_attn;
  out.critical[attn] = crit;
  out.busy[attn] = busy;
  if (!(out.makespan > 0) || !(before > 0)) return false;
  for (double& st : out.stage_time) st *= out.makespan / before;
  return true;
}

}  // namespace shardsim
