// sim/serving/step_costs.cpp — memoised, interpolated or executed step timings.
#include "sim/serving/step_costs.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

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
      (w.decodes() ? v[0] : v[1]) += w.new_tokens;
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

// Routing samples averaged before a decode family stands for new steps: with three, one unlucky
// sample reached too many steps (Mixtral TP2 paced TPOT p50 −1.25% against the exact path).
constexpr long kMinAnchors = 5;
// Batch-size buckets either way whose decode families pool their routing samples, how many samples
// a pool needs at least, and the standard error (relative) its line must reach (performance-log.md).
constexpr int kPoolBuckets = 2;
constexpr double kMinPooled = 4;
constexpr double kPoolPrecision = 0.005;
constexpr double kPoolReach = 1.1;  // the line may reach this far beyond its samples

// a + w (b − a), field by field for w in [0, 1]; kernels from the nearer one.
StepTiming blend(const StepTiming& a, const StepTiming& b, double w) { return weighted({{&a, 1 - w}, {&b, w}}); }

AttentionCost mix(const AttentionCost& a, const AttentionCost& b, double w) {
  AttentionCost m;
  m.add(a, 1 - w);
  m.add(b, w);
  return m;
}

// A step with prompt chunks: its stratum — whether decode tokens are beside the chunks, the cost
// class — and the features its rest follows, its tokens and those outside its largest chunk group
// (step_fit.hpp). How many attention groups hold chunks, and how unevenly, is left to those
// features: as strata of their own (tried first, then "one group or several") they left a wide
// plan's strata with too few executed steps to fit from, and the sparse several-groups stratum
// ran `tp=1,attn_dp=64,ep=64` 0.9% fast on two routing seeds of three (performance-log.md). Decode
// tokens beside the chunks stay a stratum of their own: merged, a prefill-only step fitted from
// mixed ones moved the small paced cases' TTFT p50 by up to 3 points.
// Contexts are not part of either: they reach the step through its attention, which is swapped.
struct Mixed {
  std::vector<int> stratum;
  MixedFeatures x;
};

Mixed mixed_of(const ReplicaBatch& batch, int cost_class) {
  double chunk_tokens = 0, all = 0, group_max = 0;
  for (const auto& g : batch.groups) {
    double pf = 0, n = 0;
    for (const auto& w : g) {
      n += w.new_tokens;
      if (!w.decodes()) pf += w.new_tokens;
    }
    all += n;
    chunk_tokens += pf;
    if (pf > 0) group_max = std::max(group_max, n);
  }
  return {{all > chunk_tokens ? 1 : 0, cost_class}, {all, group_max}};
}

}  // namespace

StepCosts::StepCosts(int buckets_per_octave, bool interpolate, bool interpolate_mixed, int cost_class, StepCache& cache,
                     AttentionEstimator attention)
    : b_(buckets_per_octave),
      interpolate_(interpolate && buckets_per_octave > 0 && attention),
      interpolate_mixed_(interpolate_mixed && buckets_per_octave > 0 && attention),
      cost_class_(cost_class),
      decode_stratum_{cost_class},
      cache_(cache),
      attention_(std::move(attention)) {}

ShapeKey StepCosts::key(const double* sums, const double* maxs, int emits) const {
  return {bucket(sums[0], b_), bucket(sums[1], b_), bucket(sums[2], b_), bucket(maxs[0], b_),
          bucket(maxs[1], b_), bucket(maxs[2], b_), bucket(emits, b_), cost_class_};
}

StepTiming StepCosts::timing(const ReplicaBatch& batch, const std::function<StepTiming()>& execute) {
  const Shape s = shape_of(batch);
  if (!memoises()) return execute();
  last_key_ = key(s.sums, s.maxs, s.emits);
  const ShapeKey k = last_key_;
  if (auto hit = cache_.by_shape.find(k); hit != cache_.by_shape.end()) return hit->second;
  if (interpolate_mixed_ && s.sums[1] > 0) return mixed(batch, k, execute);
  CostFamily* family = nullptr;
  FamilyKey fkey{};
  if (interpolate_ && s.decode_only()) {
    fkey = {bucket(s.sums[0], b_), bucket(s.maxs[0], b_), bucket(s.emits, b_), cost_class_};
    family = &cache_.families[fkey];
  }
  StepTiming t;
  // Plain decode (one token a sequence, each emitted): the decode fit's features and stratum.
  const bool plain = family != nullptr && s.emits == static_cast<int>(s.sums[0]);
  const MixedFeatures dx{s.sums[0], s.maxs[0]};
  if (family != nullptr && family->count >= kMinAnchors) {
    t = with_attention(family->mean, family->attention, attention_(batch));
    ++interpolated_;
  } else if (family != nullptr && from_neighbours(fkey, s.sums[0], batch, t)) {
    ++interpolated_;
  } else if (plain && cache_.decode.predict(decode_stratum_, dx, attention_(batch), t)) {
    ++interpolated_;
  } else {
    t = execute();
    if (family != nullptr) {  // one more routing sample of the family: running means
      ++family->count;
      const double w = 1.0 / static_cast<double>(family->count);
      const AttentionCost a = attention_(batch);
      if (plain) cache_.decode.add(decode_stratum_, dx, a, t);
      const double rest = t.makespan - a.critical, delta = rest - family->rest();  // Welford
      family->mean = family->count == 1 ? t : blend(family->mean, t, w);
      family->attention = family->count == 1 ? a : mix(family->attention, a, w);
      family->at += w * (s.sums[0] - family->at);
      family->rest_m2 += delta * (rest - family->rest());
    }
  }
  cache_.by_shape.emplace(k, t);
  return t;
}

// A decode family with fewer than kMinAnchors routing samples of its own: the weighted least-squares
// line, in decode tokens, through its own and its neighbours' means — the families kPoolBuckets
// batch-size buckets either way with the same largest group and emitted tokens (or, where those
// equal the batch, the neighbour's own) — once their samples bracket this step's tokens (10%
// slack, as for mixed steps) and pin its routing-decided rest (makespan less critical attention)
// to kPoolPrecision, the line's standard error at those tokens from the samples' scatter about it. The rest moves smoothly with
// the batch (distinct experts hit, all-to-all sizes), so neighbours' samples count where the
// routing is steady (DeepSeek-V3's 256 experts); where it is noisy (Mixtral's 8, top 2) the
// scatter keeps the line from standing in, and a family waits for its own five.
bool StepCosts::from_neighbours(const FamilyKey& fkey, double tokens, const ReplicaBatch& batch,
                                StepTiming& out) const {
  struct Part {
    const CostFamily* f;
    double x, c;
  };
  std::vector<Part> parts;
  double C = 0, sx = 0, sr = 0;
  bool below = false, above = false;
  for (int d = -kPoolBuckets; d <= kPoolBuckets; ++d) {
    FamilyKey k = fkey;  // the largest group and the emitted tokens move with the batch where they equal it
    for (int i : {1, 2}) k[i] += k[i] == fkey[0] ? d : 0;
    k[0] += d;
    auto f = cache_.families.find(k);
    if (f == cache_.families.end() || f->second.count == 0) continue;
    const CostFamily& fam = f->second;
    const double c = static_cast<double>(fam.count);
    parts.push_back({&fam, fam.at, c});
    C += c;
    sx += c * fam.at;
    sr += c * fam.rest();
    below = below || fam.at <= tokens * kPoolReach;
    above = above || fam.at * kPoolReach >= tokens;
  }
  if (C < kMinPooled || !below || !above) return false;  // extrapolated at most kPoolReach
  const double mx = sx / C, mr = sr / C;
  double sxx = 0, sxr = 0;
  for (const Part& p : parts) {
    sxx += p.c * (p.x - mx) * (p.x - mx);
    sxr += p.c * (p.x - mx) * (p.f->rest() - mr);
  }
  const double slope = sxx > 0 ? sxr / sxx : 0;
  // Scatter about the line: within each family and of the families' means off it.
  double ss = 0;
  for (const Part& p : parts) {
    const double off = p.f->rest() - (mr + slope * (p.x - mx));
    ss += p.f->rest_m2 + p.c * off * off;
  }
  const double dof = C - (sxx > 0 ? 2 : 1);
  const double at = mr + slope * (tokens - mx);
  const double se = std::sqrt(ss / dof * (1 / C + (sxx > 0 ? (tokens - mx) * (tokens - mx) / sxx : 0)));
  if (!(at > 0) || se > kPoolPrecision * at) return false;
  std::vector<std::pair<const StepTiming*, double>> timings;
  AttentionCost attention;
  for (const Part& p : parts) {
    const double w = p.c * (1 / C + (sxx > 0 ? (p.x - mx) * (tokens - mx) / sxx : 0));
    timings.push_back({&p.f->mean, w});
    attention.add(p.f->attention, w);
  }
  out = with_attention(weighted(timings), attention, attention_(batch));
  return true;
}

// A mixed step: fitted from the executed mixed steps near it, or executed and added to them.
StepTiming StepCosts::mixed(const ReplicaBatch& batch, const ShapeKey& k, const std::function<StepTiming()>& execute) {
  const Mixed mx = mixed_of(batch, cost_class_);
  const AttentionCost attention = attention_(batch);
  StepTiming t;
  if (cache_.mixed.predict(mx.stratum, mx.x, attention, t)) {
    ++interpolated_mixed_;
  } else {
    t = execute();
    cache_.mixed.add(mx.stratum, mx.x, attention, t);
  }
  cache_.by_shape.emplace(k, t);
  return t;
}

}  // namespace shardsim
