// optimizers/algorithms/simple_optimizers.cpp — megatron, random, exhaustive.
#include "common/readable_number.hpp"
#include "optimizers/algorithms/simple_optimizers.hpp"

#include <cmath>

#include "common/input_error.hpp"

namespace shardsim {

MegatronOptimizer::MegatronOptimizer(const OptimizerContext& ctx) {
  std::set<std::string> seen;
  for (const auto& g : ctx.portfolio)
    if (seen.insert(ctx.space->key(g)).second) plans_.push_back(g);
  if (plans_.empty()) throw InputError("--optimizers", "megatron", "no rule plan can be expressed in this search space");
}

std::vector<Genes> MegatronOptimizer::ask(int n) {
  std::vector<Genes> out;
  while (static_cast<int>(out.size()) < n && next_ < plans_.size()) out.push_back(plans_[next_++]);
  return out;
}

RandomOptimizer::RandomOptimizer(const OptimizerContext& ctx)
    : space_(*ctx.space), rng_("random", ctx.seed),
      batch_(static_cast<int>(ctx.integer("random", "batch", 8, 1, 4096))) {}

std::vector<Genes> RandomOptimizer::ask(int n) {
  std::vector<Genes> out;
  for (int i = 0; i < n; ++i) {
    Genes g;
    for (int tries = 0; tries < 50; ++tries) {
      g = space_.random([this] { return rng_.next(); });
      if (!seen_.count(space_.key(g))) break;
    }
    seen_.insert(space_.key(g));
    out.push_back(g);
  }
  return out;
}

ExhaustiveOptimizer::ExhaustiveOptimizer(const OptimizerContext& ctx) {
  const double size = ctx.space->canonical_size();
  const long limit = ctx.integer("exhaustive", "limit", kExhaustiveLimit, 1, 100'000'000);
  char buf[160];
  if (size > static_cast<double>(ctx.budget)) {
    std::snprintf(buf, sizeof buf, "the space has %s distinct plans, more than the budget of %ld", readable(size).c_str(), ctx.budget);
    throw InputError("--optimizers", "exhaustive",
                     std::string(buf) + "; raise --budget or search fewer blocks (--space degrees,sharding)");
  }
  if (size > static_cast<double>(limit)) {
    std::snprintf(buf, sizeof buf, "the space has %s distinct plans, more than exhaustive.limit=%ld", readable(size).c_str(), limit);
    throw InputError("--optimizers", "exhaustive",
                     std::string(buf) + " (search fewer blocks with --space, or raise --param exhaustive.limit=N)");
  }
  ctx.space->for_each_canonical([this](const Genes& g) {
    all_.push_back(g);
    return true;
  });
}

std::vector<Genes> ExhaustiveOptimizer::ask(int n) {
  std::vector<Genes> out;
  while (static_cast<int>(out.size()) < n && next_ < all_.size()) out.push_back(all_[next_++]);
  return out;
}

}  // namespace shardsim
