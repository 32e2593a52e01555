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

constexpr double kMinSpread = 1.25;  // two points this far apart (ratio) define a slope
constexpr double kReach = 2.0;       // and are trusted up to one octave beyond the nearer one
// Points closer together than kMinSpread still give the slope a little beyond them: up to this
// share of their span (a decode batch's longest context creeps up one token a step).
constexpr double kCreep = 0.25;
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

// y at x on the line through two of `pts` (sorted by x): the two bracketing x within kReach of
// each other, or — beyond the ends — the nearest end and the next point at least kMinSpread from
// it (or the far end, x being within kCreep of their span), with x within kReach of that end. Local lines: the attention's kernel efficiency moves with
// the context, so a line through the far ends of a family misses (+2% TPOT on a Mixtral case).
bool line_at(const CostLine& pts, double x, double& y) {
  if (pts.size() < 2 || x <= 0) return false;
  auto at = std::lower_bound(pts.begin(), pts.end(), x, [](const std::pair<double, double>& p, double v) { return p.first < v; });
  const std::pair<double, double>*lo = nullptr, *hi = nullptr;
  if (at != pts.end() && at->first == x) {
    y = at->second;
    return true;
  }
  if (at != pts.begin() && at != pts.end()) {  // bracketed
    lo = &*(at - 1);
    hi = &*at;
    if (hi->first > kReach * lo->first) return false;
  } else if (at == pts.end()) {  // above every point
    hi = &pts.back();
    if (x > kReach * hi->first) return false;
    for (auto it = pts.rbegin() + 1; it != pts.rend() && lo == nullptr; ++it)
      if (it->first * kMinSpread <= hi->first) lo = &*it;
    if (lo == nullptr && x - hi->first <= kCreep * (hi->first - pts.front().first)) lo = &pts.front();
  } else {  // below every point
    lo = &pts.front();
    if (x * kReach < lo->first) return false;
    for (auto it = pts.begin() + 1; it != pts.end() && hi == nullptr; ++it)
      if (it->first >= kMinSpread * lo->first) hi = &*it;
    if (hi == nullptr && lo->first - x <= kCreep * (pts.back().first - lo->first)) hi = &pts.back();
  }
  if (lo == nullptr || hi == nullptr || hi->first <= lo->first) return false;
  y = lo->second + (x - lo->first) / (hi->first - lo->first) * (hi->second - lo->second);
  return true;
}

// Adds (x, y) to a line; a second point at the same x keeps the first.
void add_point(CostLine& pts, double x, double y) {
  auto at = std::lower_bound(pts.begin(), pts.end(), x, [](const std::pair<double, double>& p, double v) { return p.first < v; });
  if (at == pts.end() || at->first != x) pts.insert(at, {x, y});
}

// An executed decode step joins its family (its attention per GPU, the mean) and the line of its
// critical attention.
void add_to_family(CostFamily& f, CostLine& longest, double context_sum, double context_max, const StepTiming& t) {
  constexpr auto attn = static_cast<std::size_t>(OpClass::Attention);
  add_point(longest, context_max, t.critical[attn]);
  add_point(f.busy, context_sum, t.busy[attn]);
  ++f.count;
  const double w = 1.0 / static_cast<double>(f.count);
  f.mean = f.count == 1 ? t : blend(f.mean, t, w);  // running means
  f.mean_context += w * (context_sum - f.mean_context);
}

bool is_decode(const SeqWork& w) { return w.new_tokens == 1 && w.context > 0; }

constexpr double kTokenSpan = 2.0;  // two executed mixed steps this close (ratio of tokens) interpolate
// The decode sequences' share of a mixed step's tokens, in this many equal buckets. A step's
// GEMMs, experts and collectives depend on its tokens in all, so a mixed step is interpolated
// along them; how they split between decode and prompt changes the attention only, by about the
// bucket width of the step at most.
constexpr double kDecodeShareBuckets = 25;

// A mixed step's tokens (decode and prompt chunks) and its family: the steps it is interpolated
// from along those tokens — chunks, emitting chunks and groups holding chunks exactly, how
// unevenly those groups hold them (4 buckets per octave), the octave of the decode sequences'
// context and of the chunks' context, and the decode sequences' share of the tokens (in all, and in
// the groups holding chunks).
struct Mixed {
  CostAnchor at;  // tokens and attention work (no timing)
  std::vector<int> family;
};

Mixed mixed_of(const ReplicaBatch& batch, int cost_class) {
  double chunk_tokens = 0, chunk_ctx = 0, chunk_max = 0, dec = 0, dec_beside = 0, dec_ctx = 0;
  double work_beside = 0, work_all = 0;
  int chunks = 0, emits = 0, groups = 0;
  for (const auto& g : batch.groups) {
    double pf = 0, d = 0, work = 0;
    for (const auto& w : g) {
      work += w.new_tokens * (w.context + (w.new_tokens + 1) / 2.0);  // as the attention's flops
      if (is_decode(w)) {
        d += 1;
        dec_ctx += w.context;
        continue;
      }
      pf += w.new_tokens;
      chunk_ctx += w.context;
      ++chunks;
      emits += w.emits ? 1 : 0;
    }
    chunk_tokens += pf;
    chunk_max = std::max(chunk_max, pf);
    dec += d;
    work_all += work;
    if (pf > 0) {
      ++groups;
      dec_beside += d;
      work_beside += work;
    }
  }
  auto octave = [](double x) { return x < 1 ? -1 : static_cast<int>(std::log2(x)); };
  auto quarter = [](double x) { return x < 1 ? -1 : static_cast<int>(4 * std::log2(x)); };
  auto share = [&](double d) { return static_cast<int>(kDecodeShareBuckets * d / (d + chunk_tokens)); };
  const double imbalance = chunk_max * groups / chunk_tokens;  // largest chunk group ÷ their mean
  return {CostAnchor{chunk_tokens + dec, work_beside, work_all, {}},
          {chunks, emits, groups, quarter(imbalance), octave(chunk_ctx), share(dec), share(dec_beside), octave(dec_ctx),
           cost_class}};
}

}  // namespace

StepCosts::StepCosts(int buckets_per_octave, bool interpolate, bool interpolate_mixed, int cost_class, StepCache& cache)
    : b_(buckets_per_octave),
      interpolate_(interpolate && buckets_per_octave > 0),
      interpolate_mixed_(interpolate_mixed && buckets_per_octave > 0),
      cost_class_(cost_class),
      cache_(cache) {}

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
  std::vector<int> family, line;
  if (interpolate_ && s.decode_only()) {
    family = {bucket(s.sums[0], b_), bucket(s.maxs[0], b_), bucket(s.emits, b_), cost_class_};
    line = {bucket(s.maxs[0], b_), cost_class_};
    StepTiming t;
    if (!fresh && interpolate_into(family, line, s.sums[2], s.maxs[2], t)) {
      ++interpolated_;
      cache_.by_shape.emplace(std::move(k), t);
      return t;
    }
  }
  if (interpolate_mixed_ && !fresh && s.sums[0] > 0 && s.sums[1] > 0) return mixed(batch, std::move(k), execute);
  StepTiming t = execute();
  if (!family.empty()) add_to_family(cache_.families[family], cache_.longest[line], s.sums[2], s.maxs[2], t);
  cache_.by_shape.emplace(std::move(k), t);
  return t;
}

// A mixed step: from its family's executed steps, or executed and added to them.
StepTiming StepCosts::mixed(const ReplicaBatch& batch, std::vector<int> k, const std::function<StepTiming()>& execute) {
  Mixed mx = mixed_of(batch, cost_class_);
  StepTiming t;
  if (from_mixed_family(mx.family, mx.at, t)) {
    ++interpolated_mixed_;
  } else {
    t = execute();
    auto& v = cache_.mixed[mx.family];
    mx.at.timing = t;
    v.insert(std::lower_bound(v.begin(), v.end(), mx.at.at, [](const CostAnchor& a, double x) { return a.at < x; }), mx.at);
  }
  cache_.by_shape.emplace(std::move(k), t);
  return t;
}

// The timing of `family` at `x`'s tokens: an executed step with those tokens, or the line through
// the two bracketing them when they are at most kTokenSpan apart. Never the nearest step of the
// same shape bucket: a serving run's batches grow, so the step executed first in a bucket is
// mostly the smaller one, and reusing it biased TPOT low by 1.5% on the MLPerf Server rows. The
// attention is the line in attention work, not tokens: a fresh chunk's attention grows with the
// square of its length, and a line in tokens overestimated wide-EP mixed steps by 2.2% on average.
bool StepCosts::from_mixed_family(const std::vector<int>& family, const CostAnchor& x, StepTiming& out) const {
  auto f = cache_.mixed.find(family);
  if (f == cache_.mixed.end()) return false;
  const auto& v = f->second;
  auto at = std::lower_bound(v.begin(), v.end(), x.at, [](const CostAnchor& a, double t) { return a.at < t; });
  if (at != v.end() && at->at == x.at) {
    out = at->timing;
    return true;
  }
  if (at == v.begin() || at == v.end() || at->at > kTokenSpan * (at - 1)->at) return false;
  const CostAnchor &lo = *(at - 1), &hi = *at;
  out = blend(lo.timing, hi.timing, (x.at - lo.at) / (hi.at - lo.at));
  auto along = [](double w, double w_lo, double w_hi, double y_lo, double y_hi, double fallback) {
    const double u = w_hi != w_lo ? (w - w_lo) / (w_hi - w_lo) : fallback;
    return std::max(0.0, y_lo + u * (y_hi - y_lo));
  };
  constexpr auto attn = static_cast<std::size_t>(OpClass::Attention);
  const double u = (x.at - lo.at) / (hi.at - lo.at);
  const double crit = along(x.work_beside, lo.work_beside, hi.work_beside, lo.timing.critical[attn], hi.timing.critical[attn], u);
  const double before = out.makespan;
  out.makespan += crit - out.critical[attn];
  out.critical[attn] = crit;
  out.busy[attn] = along(x.work_all, lo.work_all, hi.work_all, lo.timing.busy[attn], hi.timing.busy[attn], u);
  if (!(out.makespan > 0) || !(before > 0)) return false;
  for (double& st : out.stage_time) st *= out.makespan / before;
  return true;
}

// The decode family's timing at this context: the rest of the family's mean, with its attention
// read off the lines (see the header). Per GPU, without two executed steps of the family far
// enough apart, the family's mean scaled by the context.
bool StepCosts::interpolate_into(const std::vector<int>& family, const std::vector<int>& line, double context_sum,
                                 double context_max, StepTiming& out) const {
  auto f = cache_.families.find(family);
  auto l = cache_.longest.find(line);
  if (f == cache_.families.end() || l == cache_.longest.end() || f->second.count < static_cast<long>(kMinAnchors) ||
      context_sum <= 0)
    return false;
  constexpr auto attn = static_cast<std::size_t>(OpClass::Attention);
  const CostFamily& fam = f->second;
  double crit = 0, busy = 0;
  if (!line_at(l->second, context_max, crit) || crit < 0) return false;
  if (!line_at(fam.busy, context_sum, busy) || busy < 0)
    busy = fam.mean_context > 0 ? fam.mean.busy[attn] * context_sum / fam.mean_context : fam.mean.busy[attn];
  out = fam.mean;
  const double before = out.makespan;
  out.makespan += crit - out.critical[attn];
  out.critical[attn] = crit;
  out.busy[attn] = busy;
  if (!(out.makespan > 0) || !(before > 0)) return false;
  for (double& st : out.stage_time) st *= out.makespan / before;
  return true;
}

}  // namespace shardsim
