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

// Routing samples averaged before a decode family stands for new steps: with three, one unlucky
// sample reached too many steps (Mixtral TP2 paced TPOT p50 −1.25% against the exact path).
constexpr long kMinAnchors = 5;
constexpr double kTokenSpan = 2.0;
// Batch-size buckets either way whose decode families pool their routing samples, how many samples
// a pool needs at least, and the standard error (relative) its line must reach (performance.md).
constexpr int kPoolBuckets = 2;
constexpr double kMinPooled = 4;
constexpr double kPoolPrecision = 0.005;  // two executed mixed steps this close (ratio of tokens) interpolate

// Σ wᵢ·tᵢ field by field (weights summing to 1, negative ones allowed for a fitted line), each
// field at least 0; kernels from the heaviest part.
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
  for (std::size_t i = 0; i < t.critical.size(); ++i) {
    t.critical[i] = sum([i](const StepTiming& p) { return p.critical[i]; });
    t.busy[i] = sum([i](const StepTiming& p) { return p.busy[i]; });
  }
  for (std::size_t i = 0; i < t.coll_by_kind.size(); ++i) t.coll_by_kind[i] = sum([i](const StepTiming& p) { return p.coll_by_kind[i]; });
  t.comm_busy = sum([](const StepTiming& p) { return p.comm_busy; });
  t.comm_exposed = sum([](const StepTiming& p) { return p.comm_exposed; });
  t.expert_imbalance = sum([](const StepTiming& p) { return p.expert_imbalance; });
  t.expert_time = sum([](const StepTiming& p) { return p.expert_time; });
  t.idle_on_path = sum([](const StepTiming& p) { return p.idle_on_path; });
  for (std::size_t i = 0; i < t.link_bytes.size(); ++i) {
    t.link_bytes[i] = sum([i](const StepTiming& p) { return p.link_bytes[i]; });
    t.link_busiest[i] = sum([i](const StepTiming& p) { return p.link_busiest[i]; });
  }
  return t;
}

// a + w (b − a), field by field for w in [0, 1]; kernels from the nearer one.
StepTiming blend(const StepTiming& a, const StepTiming& b, double w) { return weighted({{&a, 1 - w}, {&b, w}}); }

constexpr auto kAttn = static_cast<std::size_t>(OpClass::Attention);

// `t` (a step whose attention was `from`) with its attention replaced by `to`: the makespan and
// critical path move by the difference, the stages in proportion.
StepTiming with_attention(StepTiming t, const AttentionCost& from, const AttentionCost& to) {
  const double before = t.makespan;
  t.makespan = std::max(0.0, t.makespan + to.critical - from.critical);
  t.critical[kAttn] = std::max(0.0, t.critical[kAttn] + to.critical - from.critical);
  t.busy[kAttn] = std::max(0.0, t.busy[kAttn] + to.busy - from.busy);
  if (before > 0)
    for (double& st : t.stage_time) st *= t.makespan / before;
  return t;
}

AttentionCost mix(const AttentionCost& a, const AttentionCost& b, double w) {
  return {a.critical + w * (b.critical - a.critical), a.busy + w * (b.busy - a.busy)};
}

bool is_decode(const SeqWork& w) { return w.new_tokens == 1 && w.context > 0; }

// The decode sequences' share of a mixed step's tokens, in this many equal buckets. A step's
// GEMMs, experts and collectives depend on its tokens in all, so a mixed step is interpolated
// along them; how they split between decode tokens (spread over groups) and prompt chunks (in
// the groups holding them) is what the shares pin.
// With 25, wide EP's mixed steps came out +1.9% on average: later steps of a bucket hold more decode
// tokens beside fewer prompt tokens than its first, executed ones (performance.md).
constexpr double kDecodeShareBuckets = 50;

// A mixed step's tokens (decode and prompt chunks) and its family: chunks, emitting chunks and
// groups holding chunks exactly, how unevenly those groups hold them (4 buckets per octave), and
// the decode sequences' share of the tokens (in all, and in the groups holding chunks). Contexts
// are not part of it: they reach the step through its attention, which is swapped.
struct Mixed {
  double tokens = 0;
  std::vector<int> family;
};

Mixed mixed_of(const ReplicaBatch& batch, int cost_class) {
  double chunk_tokens = 0, chunk_max = 0, dec = 0, dec_beside = 0;
  int chunks = 0, emits = 0, groups = 0;
  for (const auto& g : batch.groups) {
    double pf = 0, d = 0;
    for (const auto& w : g) {
      if (is_decode(w)) {
        d += 1;
        continue;
      }
      pf += w.new_tokens;
      ++chunks;
      emits += w.emits ? 1 : 0;
    }
    chunk_tokens += pf;
    chunk_max = std::max(chunk_max, pf);
    dec += d;
    if (pf > 0) {
      ++groups;
      dec_beside += d;
    }
  }
  auto quarter = [](double x) { return x < 1 ? -1 : static_cast<int>(4 * std::log2(x)); };
  auto share = [&](double d) { return static_cast<int>(kDecodeShareBuckets * d / (d + chunk_tokens)); };
  const double imbalance = chunk_max * groups / chunk_tokens;  // largest chunk group ÷ their mean
  return {chunk_tokens + dec, {chunks, emits, groups, quarter(imbalance), share(dec), share(dec_beside), cost_class}};
}

}  // namespace

StepCosts::StepCosts(int buckets_per_octave, bool interpolate, bool interpolate_mixed, int cost_class, StepCache& cache,
                     AttentionEstimator attention)
    : b_(buckets_per_octave),
      interpolate_(interpolate && buckets_per_octave > 0 && attention),
      interpolate_mixed_(interpolate_mixed && buckets_per_octave > 0 && attention),
      cost_class_(cost_class),
      cache_(cache),
      attention_(std::move(attention)) {}

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
  if (interpolate_mixed_ && !fresh && s.sums[0] > 0 && s.sums[1] > 0) return mixed(batch, std::move(k), execute);
  CostFamily* family = nullptr;
  std::vector<int> fkey;
  if (interpolate_ && s.decode_only()) {
    fkey = {bucket(s.sums[0], b_), bucket(s.maxs[0], b_), bucket(s.emits, b_), cost_class_};
    family = &cache_.families[fkey];
  }
  StepTiming t;
  if (family != nullptr && !fresh && family->count >= kMinAnchors) {
    t = with_attention(family->mean, family->attention, attention_(batch));
    ++interpolated_;
  } else if (family != nullptr && !fresh && from_neighbours(fkey, s.sums[0], batch, t)) {
    ++interpolated_;
  } else {
    t = execute();
    if (family != nullptr) {  // one more routing sample of the family: running means
      ++family->count;
      const double w = 1.0 / static_cast<double>(family->count);
      const AttentionCost a = attention_(batch);
      family->mean = family->count == 1 ? t : blend(family->mean, t, w);
      family->attention = family->count == 1 ? a : mix(family->attention, a, w);
      family->at += w * (s.sums[0] - family->at);
      const double rest = t.makespan - a.critical, delta = rest - family->rest;  // Welford
      family->rest += w * delta;
      family->rest_m2 += delta * (rest - family->rest);
    }
  }
  cache_.by_shape.emplace(std::move(k), t);
  return t;
}

// A decode family with fewer than kMinAnchors routing samples of its own: the weighted least-squares
// line, in decode tokens, through its own and its neighbours' means — the families kPoolBuckets
// batch-size buckets either way with the same largest group and emitted tokens (or, where those
// equal the batch, the neighbour's own) — once their samples bracket this step's tokens and pin
// its routing-decided rest (makespan less critical attention) to kPoolPrecision, the line's
// standard error at those tokens from the samples' scatter about it. The rest moves smoothly with
// the batch (distinct experts hit, all-to-all sizes), so neighbours' samples count where the
// routing is steady (DeepSeek-V3's 256 experts); where it is noisy (Mixtral's 8, top 2) the
// scatter keeps the line from standing in, and a family waits for its own five.
bool StepCosts::from_neighbours(const std::vector<int>& fkey, double tokens, const ReplicaBatch& batch,
                                StepTiming& out) const {
  struct Part {
    const CostFamily* f;
    double x, c;
  };
  std::vector<Part> parts;
  double C = 0, sx = 0, sr = 0;
  bool below = false, above = false;
  for (int d = -kPoolBuckets; d <= kPoolBuckets; ++d) {
    std::vector<int> k = fkey;  // the largest group and the emitted tokens move with the batch where they equal it
    for (int i : {1, 2}) k[i] += k[i] == fkey[0] ? d : 0;
    k[0] += d;
    auto f = cache_.families.find(k);
    if (f == cache_.families.end() || f->second.count == 0) continue;
    const CostFamily& fam = f->second;
    const double c = static_cast<double>(fam.count);
    parts.push_back({&fam, fam.at, c});
    C += c;
    sx += c * fam.at;
    sr += c * fam.rest;
    below = below || fam.at <= tokens;
    above = above || fam.at >= tokens;
  }
  if (C < kMinPooled || !below || !above) return false;  // never extrapolated
  const double mx = sx / C, mr = sr / C;
  double sxx = 0, sxr = 0;
  for (const Part& p : parts) {
    sxx += p.c * (p.x - mx) * (p.x - mx);
    sxr += p.c * (p.x - mx) * (p.f->rest - mr);
  }
  const double slope = sxx > 0 ? sxr / sxx : 0;
  // Scatter about the line: within each family and of the families' means off it.
  double ss = 0;
  for (const Part& p : parts) {
    const double off = p.f->rest - (mr + slope * (p.x - mx));
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
    attention.critical += w * p.f->attention.critical;
    attention.busy += w * p.f->attention.busy;
  }
  out = with_attention(weighted(timings), attention, attention_(batch));
  return true;
}

// A mixed step: from its family's executed steps, or executed and added to them.
StepTiming StepCosts::mixed(const ReplicaBatch& batch, std::vector<int> k, const std::function<StepTiming()>& execute) {
  const Mixed mx = mixed_of(batch, cost_class_);
  const AttentionCost attention = attention_(batch);
  StepTiming t;
  if (from_mixed_family(mx.family, mx.tokens, attention, t)) {
    ++interpolated_mixed_;
  } else {
    t = execute();
    auto& v = cache_.mixed[mx.family];
    v.insert(std::lower_bound(v.begin(), v.end(), mx.tokens, [](const CostAnchor& a, double x) { return a.at < x; }),
             CostAnchor{mx.tokens, attention, t});
  }
  cache_.by_shape.emplace(std::move(k), t);
  return t;
}

// The timing of `family` at `tokens`, attention swapped for `attention`: an executed step with
// those tokens, or the line through the two bracketing them when they are at most kTokenSpan
// apart. Never the nearest step of the same shape bucket: a serving run's batches grow, so the
// step executed first in a bucket is mostly the smaller one, and reusing it biased TPOT low by
// 1.5% on the MLPerf Server rows.
bool StepCosts::from_mixed_family(const std::vector<int>& family, double tokens, const AttentionCost& attention,
                                  StepTiming& out) const {
  auto f = cache_.mixed.find(family);
  if (f == cache_.mixed.end()) return false;
  const auto& v = f->second;
  auto at = std::lower_bound(v.begin(), v.end(), tokens, [](const CostAnchor& a, double x) { return a.at < x; });
  if (at != v.end() && at->at == tokens) {
    out = with_attention(at->timing, at->attention, attention);
    return true;
  }
  if (at == v.begin() || at == v.end() || at->at > kTokenSpan * (at - 1)->at) return false;
  const CostAnchor &lo = *(at - 1), &hi = *at;
  const double w = (tokens - lo.at) / (hi.at - lo.at);
  out = with_attention(blend(lo.timing, hi.timing, w), mix(lo.attention, hi.attention, w), attention);
  return true;
}

}  // namespace shardsim
