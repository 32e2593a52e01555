// optimizers/algorithms/genetic.cpp — the "ga" optimizer: first generation, variation, survivor selection.
#include "optimizers/algorithms/genetic.hpp"

#include <algorithm>

namespace shardsim {

namespace {

constexpr int kRetries = 8;           // fresh offspring tried before mutating harder
constexpr int kStrongMutations = 16;  // then 1, 2, … extra gene changes
constexpr int kRandomDraws = 32;      // then random genomes

bool by_deb(const Evaluated& a, const Evaluated& b) { return better(a.score, b.score); }

}  // namespace

GeneticOptimizer::GeneticOptimizer(const OptimizerContext& ctx) : space_(*ctx.space), rng_("ga", ctx.seed) {
  auto integer = [&](const char* key, long fallback, long lo, long hi) { return ctx.integer("ga", key, fallback, lo, hi); };
  auto real = [&](const char* key, double fallback, double lo, double hi) { return ctx.real("ga", key, fallback, lo, hi); };
  population_ = static_cast<int>(integer("population", 32, 4, 4096));
  tournament_ = static_cast<int>(integer("tournament", 3, 2, 16));
  elite_ = static_cast<int>(integer("elite", 2, 0, population_ - 1));
  niche_ = static_cast<int>(integer("niche", std::max(1, population_ / 4), 1, population_));
  crossover_ = real("crossover", 0.9, 0, 1);
  mutation_ = real("mutation", 1.0 / std::max(1, space_.num_decisions()), 0, 1);
  macro_ = real("macro", 0.05, 0, 1);
  const bool seed_portfolio = integer("seed_portfolio", 1, 0, 1) == 1;

  for (int i = 0; i < space_.num_decisions(); ++i) {
    const Decision& d = space_.decisions()[static_cast<std::size_t>(i)];
    if (d.block != Block::Degrees) other_genes_.push_back(i);
    else if (d.kind == Decision::Kind::Factor) degree_genes_.push_back(i), factor_genes_.push_back(i);
    else degree_genes_.push_back(i), degree_other_genes_.push_back(i);
  }

  // The first generation: the portfolio as given (canonical), then repaired random genomes.
  if (seed_portfolio)
    for (const Genes& g : ctx.portfolio) {
      if (static_cast<int>(initial_.size()) >= population_) break;
      if (!space_.in_range(g)) continue;
      Genes c = space_.canonical(g);
      if (proposed_.insert(space_.key(c)).second) initial_.push_back(c);
    }
  for (int tries = 0; static_cast<int>(initial_.size()) < population_ && tries < 50 * population_; ++tries) {
    Genes g;
    if (repaired_if_new(space_.random([this] { return rng_.next(); }), g))
      proposed_.insert(space_.key(g)), initial_.push_back(g);
  }
  if (initial_.empty()) initial_.push_back(space_.repair(space_.random([this] { return rng_.next(); })));
}

int GeneticOptimizer::batch_size() const {
  if (!evolving_) return std::max(1, static_cast<int>(initial_.size() - next_initial_));
  return std::max(1, population_ - elite_);
}

std::vector<Genes> GeneticOptimizer::ask(int n) {
  std::vector<Genes> out;
  if (!evolving_) {
    while (static_cast<int>(out.size()) < n && next_initial_ < initial_.size())
      out.push_back(initial_[next_initial_++]);
    return out;
  }
  const int count = std::min(n, std::max(1, population_ - elite_));
  for (int i = 0; i < count; ++i) {
    Genes g = novel_offspring();
    proposed_.insert(space_.key(g));
    out.push_back(std::move(g));
  }
  return out;
}

void GeneticOptimizer::tell(const std::vector<Evaluated>& results) {
  if (!evolving_) {
    members_.insert(members_.end(), results.begin(), results.end());
    if (members_.size() >= initial_.size()) {
      std::stable_sort(members_.begin(), members_.end(), by_deb);
      evolving_ = true;
    }
    return;
  }
  select_survivors(results);
}

const Evaluated& GeneticOptimizer::tournament() {
  const int m = static_cast<int>(members_.size());
  const Evaluated* best = &members_[static_cast<std::size_t>(rng_.below(m))];
  for (int i = 1; i < tournament_; ++i) {
    const Evaluated* c = &members_[static_cast<std::size_t>(rng_.below(m))];
    if (better(c->score, best->score)) best = c;
  }
  return *best;
}

Genes GeneticOptimizer::crossover(const Genes& a, const Genes& b) {
  Genes child = a;
  // Degree block: coupled genes travel together.
  if (!degree_genes_.empty()) {
    if (factor_genes_.size() < 2 || rng_.uniform() < 0.5) {
      const Genes& from = rng_.uniform() < 0.5 ? a : b;
      for (int i : degree_genes_) child[static_cast<std::size_t>(i)] = from[static_cast<std::size_t>(i)];
    } else {
      // One-point on the factor string: genes before the cut from one parent, the rest from the other.
      const bool a_first = rng_.uniform() < 0.5;
      const int cut = 1 + rng_.below(static_cast<int>(factor_genes_.size()) - 1);
      for (int j = 0; j < static_cast<int>(factor_genes_.size()); ++j) {
        const std::size_t i = static_cast<std::size_t>(factor_genes_[static_cast<std::size_t>(j)]);
        child[i] = ((j < cut) == a_first ? a : b)[i];
      }
      for (int i : degree_other_genes_)
        child[static_cast<std::size_t>(i)] = (rng_.uniform() < 0.5 ? a : b)[static_cast<std::size_t>(i)];
    }
  }
  // Other blocks: uniform.
  for (int i : other_genes_)
    child[static_cast<std::size_t>(i)] = (rng_.uniform() < 0.5 ? a : b)[static_cast<std::size_t>(i)];
  return child;
}

void GeneticOptimizer::mutate_gene(Genes& g, int i) {
  const Decision& d = space_.decisions()[static_cast<std::size_t>(i)];
  auto& v = g[static_cast<std::size_t>(i)];
  const int size = d.size();
  if (size <= 1) return;
  if (d.ordinal) {
    int step = rng_.uniform() < 0.5 ? -1 : 1;
    if (v + step < 0 || v + step >= size) step = -step;  // reflect at the ends
    v += step;
  } else {
    int w = rng_.below(size - 1);  // another value, uniformly
    v = w >= v ? w + 1 : w;
  }
}

void GeneticOptimizer::mutate(Genes& g, double rate) {
  for (int i = 0; i < space_.num_decisions(); ++i)
    if (rng_.uniform() < rate) mutate_gene(g, i);
}

void GeneticOptimizer::resample_degrees(Genes& g) {
  for (int i : degree_genes_)
    g[static_cast<std::size_t>(i)] = rng_.below(space_.decisions()[static_cast<std::size_t>(i)].size());
}

Genes GeneticOptimizer::make_offspring() {
  const Evaluated& a = tournament();
  const Evaluated& b = tournament();
  Genes child = rng_.uniform() < crossover_ ? crossover(a.genes, b.genes) : a.genes;
  mutate(child, mutation_);
  if (!degree_genes_.empty() && rng_.uniform() < macro_) resample_degrees(child);
  return child;
}

bool GeneticOptimizer::repaired_if_new(const Genes& raw, Genes& out) const {
  // Proposed genomes are repair's fixed points, so a raw genome already proposed repairs to
  // itself: skip the repair (it runs check_plan) and report the duplicate.
  out = space_.canonical(raw);
  if (proposed_.count(space_.key(out))) return false;
  out = space_.repair(out);
  return !proposed_.count(space_.key(out));
}

Genes GeneticOptimizer::novel_offspring() {
  Genes g;
  for (int t = 0; t < kRetries; ++t)
    if (repaired_if_new(make_offspring(), g)) return g;
  // Mutate the last duplicate harder: 1, 2, … extra gene changes, the degree block resampled
  // in the second half of the attempts.
  const Genes start = g;
  for (int strength = 1; strength <= kStrongMutations; ++strength) {
    Genes raw = start;
    for (int k = 0; k < strength; ++k) mutate_gene(raw, rng_.below(space_.num_decisions()));
    if (strength > kStrongMutations / 2 && !degree_genes_.empty()) resample_degrees(raw);
    if (repaired_if_new(raw, g)) return g;
  }
  for (int t = 0; t < kRandomDraws; ++t)
    if (repaired_if_new(space_.random([this] { return rng_.next(); }), g)) return g;
  return space_.repair(g);  // the space is (nearly) exhausted: a repeat costs budget, nothing else
}

std::string GeneticOptimizer::degree_key(const Genes& g) const {
  std::string k;
  for (int i : degree_genes_) k += std::to_string(g[static_cast<std::size_t>(i)]) + ".";
  return k;
}

void GeneticOptimizer::select_survivors(std::vector<Evaluated> offspring) {
  const std::size_t keep = std::min(members_.size(), static_cast<std::size_t>(elite_));
  const std::size_t target =
      std::min(static_cast<std::size_t>(population_), members_.size() + offspring.size());
  std::vector<Evaluated> next(members_.begin(), members_.begin() + static_cast<long>(keep));
  std::vector<Evaluated> pool(members_.begin() + static_cast<long>(keep), members_.end());
  pool.insert(pool.end(), std::make_move_iterator(offspring.begin()), std::make_move_iterator(offspring.end()));
  std::stable_sort(pool.begin(), pool.end(), by_deb);

  std::map<std::string, int> copies;
  for (const auto& e : next) ++copies[degree_key(e.genes)];
  std::vector<Evaluated*> skipped;
  for (auto& e : pool) {
    if (next.size() >= target) break;
    int& c = copies[degree_key(e.genes)];
    if (c < niche_) {
      ++c;
      next.push_back(std::move(e));
    } else {
      skipped.push_back(&e);
    }
  }
  for (Evaluated* e : skipped) {
    if (next.size() >= target) break;
    next.push_back(std::move(*e));
  }
  std::stable_sort(next.begin(), next.end(), by_deb);
  members_ = std::move(next);
}

}  // namespace shardsim
