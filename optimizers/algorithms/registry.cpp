// optimizers/algorithms/registry.cpp — every optimizer by name: one line each. make_optimizer builds one,
// passing the context, and refuses parameters the optimizer did not read.
#include <functional>
#include <utility>

#include "common/input_error.hpp"
#include "optimizers/algorithms/annealing.hpp"
#include "optimizers/algorithms/genetic.hpp"
#include "optimizers/algorithms/optimizer.hpp"
#include "optimizers/algorithms/rl_optimizer.hpp"
#include "optimizers/algorithms/simple_optimizers.hpp"

namespace shardsim {

namespace {

using Factory = std::function<std::unique_ptr<Optimizer>(const OptimizerContext&)>;

template <class T>
Factory make() {
  return [](const OptimizerContext& c) { return std::make_unique<T>(c); };
}

const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> r = {
      {"megatron", make<MegatronOptimizer>()},
      {"random", make<RandomOptimizer>()},
      {"exhaustive", make<ExhaustiveOptimizer>()},
      {"ga", make<GeneticOptimizer>()},
      {"sa", make<AnnealingOptimizer>()},
      {"rl", make<RlOptimizer>()},
      {"rl-noattn", make<RlNoAttnOptimizer>()},
  };
  return r;
}

}  // namespace

bool runs_once(const std::string& optimizer) { return optimizer == "megatron" || optimizer == "exhaustive"; }

std::vector<std::string> optimizer_names() {
  std::vector<std::string> out;
  for (const auto& [name, f] : registry()) out.push_back(name);
  return out;
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const OptimizerContext& ctx) {
  for (const auto& [n, factory] : registry()) {
    if (n != name) continue;
    auto opt = factory(ctx);
    if (ctx.params)
      for (const auto& key : ctx.params->unread(name))
        throw InputError("--param", name + "." + key, "not a parameter of " + name + " (see docs/optimizers.md)");
    return opt;
  }
  std::string known;
  for (const auto& n : optimizer_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError("--optimizers", name, "unknown optimizer (expected one of: " + known + ")");
}

}  // namespace shardsim
