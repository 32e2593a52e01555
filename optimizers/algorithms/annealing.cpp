// optimizers/algorithms/annealing.cpp — the "sa" optimizer: start, neighbourhood, Metropolis, schedule.
#include "optimizers/algorithms/annealing.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace shardsim {

namespace {

constexpr std::size_t kTabuLength = 50;    // keys remembered
constexpr int kRedraws = 32;               // neighbour draws before a tabu one is accepted
constexpr double kTargetAcceptance = 0.8;  // of worsening moves at T0
constexpr std::size_t kT0Samples = 8;      // worsening moves that fix the T0 estimate
constexpr double kEstimateShare = 0.1;     // …or this share of the budget with at least one
constexpr double kEndRatio = 1e-3;         // T_end / T0
constexpr double kInfeasibleMove = 0.02;   // feasible → infeasible acceptance at T0

// The T at which the mean of exp(−d/T) over `deltas` (all > 0) is `target`: bisection on log T.
double temperature_for(const std::vector<double>& deltas, double target) {
  double lo = std::log(1e-12), hi = std::log(1e6);
  for (int it = 0; it < 100; ++it) {
    const double mid = 0.5 * (lo + hi), t = std::exp(mid);
    double mean = 0;
    for (double d : deltas) mean += std::exp(-d / t);
    mean /= static_cast<double>(deltas.size());
    (mean < target ? lo : hi) = mid;
  }
  return std::exp(0.5 * (lo + hi));
}

}  // namespace

AnnealingOptimizer::AnnealingOptimizer(const OptimizerContext& ctx)
    : space_(*ctx.space), budget_(std::max<long>(1, ctx.budget)), rng_("sa", ctx.seed) {
  auto integer = [&](const char* key, long fallback, long lo, long hi) { return ctx.integer("sa", key, fallback, lo, hi); };
  auto real = [&](const char* key, double fallback, double lo, double hi) { return ctx.real("sa", key, fallback, lo, hi); };
  batch_ = static_cast<int>(integer("batch", 4, 1, 256));
  macro_ = real("macro", 0.05, 0, 1);
  restart_ = real("restart", 0.1, 0.001, 1);
  t0_param_ = 0;
  if (ctx.text("sa", "t0", "auto") != "auto") t0_param_ = real("t0", 0, 1e-9, 1e9);
  t0_ = t0_param_;
  const bool seed_portfolio = integer("seed_portfolio", 1, 0, 1) == 1;

  for (int i = 0; i < space_.num_decisions(); ++i) {
    const Decision& d = space_.decisions()[static_cast<std::size_t>(i)];
    if (d.block == Block::Degrees) degree_genes_.push_back(i);
    switch (d.kind) {
      case Decision::Kind::Factor:
      case Decision::Kind::PoolSplit:
        if (d.size() > 1) factor_genes_.push_back(i);
        break;
      case Decision::Kind::EtpSplit: etp_genes_.push_back(i); break;  // one per pool
      case Decision::Kind::Sp: sp_genes_.push_back(i); break;
      case Decision::Kind::Shard:
        if (d.size() > 1) shard_genes_.push_back(i);
        break;
      default: tune_genes_.push_back(i); break;  // mapping, batching, routing
    }
  }

  if (seed_portfolio) {
    std::set<std::string> seen;
    for (const Genes& g : ctx.portfolio)
      if (space_.in_range(g) && seen.insert(space_.key(g)).second) seeds_.push_back(space_.canonical(g));
  }
  if (seeds_.empty()) seeds_.push_back(space_.repair(space_.random([this] { return rng_.next(); })));
}

int AnnealingOptimizer::batch_size() const {
  if (!started_) return std::max(1, static_cast<int>(seeds_.size() - next_seed_));
  return batch_;
}

std::vector<Genes> AnnealingOptimizer::ask(int n) {
  std::vector<Genes> out;
  if (!started_) {
    while (static_cast<int>(out.size()) < n && next_seed_ < seeds_.size()) {
      remember(space_.key(seeds_[next_seed_]));
      out.push_back(seeds_[next_seed_++]);
    }
    return out;
  }
  for (int i = 0; i < std::min(n, batch_); ++i) {
    Genes g = neighbour();
    remember(space_.key(g));
    out.push_back(std::move(g));
  }
  return out;
}

void AnnealingOptimizer::tell(const std::vector<Evaluated>& results) {
  const long stall = std::max<long>(1, std::lround(std::ceil(restart_ * static_cast<double>(budget_))));
  for (const Evaluated& r : results) {
    ++evaluations_;
    const bool new_best = evaluations_ == 1 || better(r.score, best_.score);
    if (new_best) best_ = r, since_best_ = 0;
    else ++since_best_;
    if (!started_) continue;
    if (accept(r.score)) current_ = r;
    if (since_best_ >= stall) current_ = best_, since_best_ = 0;
  }
  if (!started_ && next_seed_ >= seeds_.size() && evaluations_ >= static_cast<long>(seeds_.size())) {
    current_ = best_;
    started_ = true;
    since_best_ = 0;
  }
  const bool enough = worsening_.size() >= kT0Samples ||
                      static_cast<double>(evaluations_) >= kEstimateShare * static_cast<double>(budget_);
  if (t0_ == 0 && !worsening_.empty() && enough) t0_ = temperature_for(worsening_, kTargetAcceptance);
}

double AnnealingOptimizer::temperature() const {
  const double frac = std::min(1.0, static_cast<double>(evaluations_) / static_cast<double>(budget_));
  return t0_ * std::pow(kEndRatio, frac);
}

bool AnnealingOptimizer::accept(const Score& cand) {
  const Score& cur = current_.score;
  if (!cur.feasible) return !better(cur, cand);  // smaller (or equal) violation, or feasible
  if (!cand.feasible) return rng_.uniform() < kInfeasibleMove * (t0_ > 0 ? temperature() / t0_ : 1.0);
  if (cand.objective >= cur.objective) return true;
  const double relative = (cur.objective - cand.objective) / std::max(std::abs(cur.objective), 1e-12);
  if (t0_ == 0) {
    worsening_.push_back(relative);
    return rng_.uniform() < kTargetAcceptance;
  }
  return rng_.uniform() < std::exp(-relative / temperature());
}

void AnnealingOptimizer::remember(const std::string& key) {
  tabu_.push_back(key);
  ++tabu_count_[key];
  if (tabu_.size() > kTabuLength) {
    auto it = tabu_count_.find(tabu_.front());
    if (--it->second == 0) tabu_count_.erase(it);
    tabu_.pop_front();
  }
}

void AnnealingOptimizer::step_gene(Genes& g, int i) {
  const int size = space_.decisions()[static_cast<std::size_t>(i)].size();
  auto& v = g[static_cast<std::size_t>(i)];
  if (size <= 1) return;
  int step = rng_.uniform() < 0.5 ? -1 : 1;
  if (v + step < 0 || v + step >= size) step = -step;
  v += step;
}

void AnnealingOptimizer::other_value(Genes& g, int i) {
  const int size = space_.decisions()[static_cast<std::size_t>(i)].size();
  auto& v = g[static_cast<std::size_t>(i)];
  if (size <= 1) return;
  const int w = rng_.below(size - 1);
  v = w >= v ? w + 1 : w;
}

Genes AnnealingOptimizer::move(const Genes& from) {
  Genes g = from;
  if (!degree_genes_.empty() && rng_.uniform() < macro_) {
    for (int i : degree_genes_)
      g[static_cast<std::size_t>(i)] = rng_.below(space_.decisions()[static_cast<std::size_t>(i)].size());
    return g;
  }
  enum Kind { Factor, Shard, Etp, Sp, Tune };
  std::vector<Kind> kinds;
  if (!factor_genes_.empty()) kinds.push_back(Factor);
  if (!shard_genes_.empty()) kinds.push_back(Shard);
  if (!etp_genes_.empty()) kinds.push_back(Etp);
  if (!sp_genes_.empty()) kinds.push_back(Sp);
  if (!tune_genes_.empty()) kinds.push_back(Tune);
  if (kinds.empty()) return g;
  auto pick = [this](const std::vector<int>& genes) {
    return genes[static_cast<std::size_t>(rng_.below(static_cast<int>(genes.size())))];
  };
  switch (kinds[static_cast<std::size_t>(rng_.below(static_cast<int>(kinds.size())))]) {
    case Factor: other_value(g, pick(factor_genes_)); break;
    case Shard: other_value(g, pick(shard_genes_)); break;
    case Etp: step_gene(g, pick(etp_genes_)); break;
    case Sp: other_value(g, pick(sp_genes_)); break;
    case Tune: {
      const int i = pick(tune_genes_);
      if (space_.decisions()[static_cast<std::size_t>(i)].ordinal) step_gene(g, i);
      else other_value(g, i);
      break;
    }
  }
  return g;
}

Genes AnnealingOptimizer::neighbour() {
  const std::string here = space_.key(current_.genes);
  Genes g;
  bool have = false;
  for (int t = 0; t < kRedraws; ++t) {
    // A move that lands on the current point or a tabu plan (a proposed plan repairs to itself)
    // is redrawn before paying for repair's check_plan.
    Genes c = space_.canonical(move(current_.genes));
    std::string k = space_.key(c);
    if (k == here || tabu(k)) continue;
    g = space_.repair(c);
    have = true;
    k = space_.key(g);
    if (k != here && !tabu(k)) return g;
  }
  // Everything near is the current point or tabu: a repeat costs budget, nothing else.
  return have ? g : space_.repair(move(current_.genes));
}

}  // namespace shardsim
