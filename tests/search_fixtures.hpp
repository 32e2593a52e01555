// tests/search_fixtures.hpp — what the optimizer tests share: a model on a cluster with its search
// space and encoded Megatron portfolio, a synthetic objective with a known shape, and a loop that
// drives an optimizer through the budget wrapper (no SimGrid, no TBB).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/input_error.hpp"
#include "optimizers/space/megatron_portfolio.hpp"
#include "optimizers/algorithms/optimizer.hpp"
#include "optimizers/space/search_space.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"
#include "workloads/model.hpp"

namespace shardsim::testing {

// A model on a cluster, its search space and its Megatron portfolio (encoded).
struct SearchWorld {
  SearchWorld(const std::string& model_name, const std::string& cluster_spec, SpaceOptions o = {})
      : model(load_model(model_name)), cluster(load_cluster(cluster_spec)), base(default_plan(model)),
        space(model, cluster, base, o) {
    for (const auto& r : portfolio_genes(space)) portfolio.push_back(r.genes);
  }
  OptimizerContext context(std::uint64_t seed, long budget, const OptimizerParams* params = nullptr,
                           bool with_portfolio = true) const {
    return OptimizerContext{&space, seed, budget, with_portfolio ? portfolio : std::vector<Genes>{}, params};
  }
  ModelSpec model;
  Cluster cluster;
  Plan base;
  PoolSpace space;
  std::vector<Genes> portfolio;
};

// Mixtral-8x7B on two DGX-H100 nodes (16 GPUs): the GA and SA tests' world.
struct Setup : SearchWorld {
  explicit Setup(SpaceOptions o = {}) : SearchWorld("mixtral-8x7b", "dgx-h100:2", o) {}
};

inline double log2i(int v) { return std::log2(static_cast<double>(v)); }

// A synthetic objective: smooth in the log-degrees around tp = 2, attn_dp = 2, pp = 1, ep = 4,
// etp = 1, a bonus for sequence parallelism, one for a redundant expert per EP rank (1%; 0.5%
// for two), and per-operator sharding preferences of 0.5–4%.
// Infeasible plans (check_plan) get Deb's violation score.
inline Score fake_score(const SearchSpace& space, const Genes& g) {
  PlanCheck chk = space.check(g);
  if (!chk.feasible()) return infeasible_score(chk);
  const Plan p = space.decode(g);
  const Degrees& d = p.deg;
  double f = 1000 * std::exp(-0.08 * std::pow(log2i(d.tp) - 1, 2) - 0.05 * std::pow(log2i(d.attn_dp) - 1, 2) -
                             0.10 * log2i(d.pp) - 0.06 * std::pow(log2i(d.ep) - 2, 2) - 0.04 * log2i(d.etp));
  if (d.sp > 1) f *= 1.02;
  f *= 1 + 0.01 * (p.redundant_experts > 0 && d.ep > 0 ? 1.0 / (1 + std::abs(p.redundant_experts / d.ep - 1)) : 0);
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = static_cast<Op>(i);
    const auto& allowed = allowed_shards(op);
    const int n = static_cast<int>(allowed.size());
    const int choice = static_cast<int>(std::find(allowed.begin(), allowed.end(), p.shard(op)) - allowed.begin());
    const int preferred = (i * 7 + 1) % n;
    const double weight = 0.005 + 0.005 * (i % 8);  // 0.5% … 4% per step away
    f *= 1 - weight * std::abs(choice - preferred);
  }
  Score s;
  s.feasible = true;
  s.objective = f;
  return s;
}

using Scorer = std::function<Score(const Genes&)>;

// What a run through the budget wrapper did.
struct DriveRun {
  std::vector<Genes> proposed;     // every genome asked for, in order
  long used = 0;                   // evaluations the wrapper counted
  bool best_feasible = false;      // the wrapper's best is feasible
  double best = 0;                 // its objective (0 when none is feasible)
  std::vector<double> anytime;     // best feasible objective after each evaluation
  bool any_feasible_told = false;  // some scored genome was feasible
};

// Runs `opt` (named `name`) through the budget wrapper, scoring with `score` (default: fake_score);
// checks that each batch fits the budget left and every genome is in range.
inline DriveRun drive_run(const std::string& name, const SearchWorld& s, std::unique_ptr<Optimizer> opt, long budget,
                          const Scorer& score = {}) {
  BudgetedOptimizer b(name, std::move(opt), s.space, budget);
  DriveRun r;
  while (!b.done()) {
    auto batch = b.ask();
    if (batch.empty()) break;
    CHECK(static_cast<long>(batch.size()) <= budget - b.used());
    std::vector<Evaluated> results;
    for (const auto& g : batch) {
      CHECK(s.space.in_range(g));
      r.proposed.push_back(g);
      results.push_back({g, score ? score(g) : fake_score(s.space, g)});
      r.any_feasible_told = r.any_feasible_told || results.back().score.feasible;
    }
    b.tell(results);
  }
  CHECK(b.used() <= budget);
  r.used = b.used();
  r.best_feasible = b.best() && b.best()->score.feasible;
  r.best = r.best_feasible ? b.best()->score.objective : 0;
  r.anytime = b.anytime();
  return r;
}

// drive_run's proposals; `best` (optional) gets the best feasible objective and `evals_to`
// (optional) the evaluations spent until it first reached `target` (−1 if never).
inline std::vector<Genes> drive(const std::string& name, const SearchWorld& s, std::unique_ptr<Optimizer> opt,
                                long budget, double* best = nullptr, const Scorer& score = {}, double target = 0,
                                long* evals_to = nullptr) {
  DriveRun r = drive_run(name, s, std::move(opt), budget, score);
  if (best) *best = r.best;
  if (evals_to) {
    auto it = std::find_if(r.anytime.begin(), r.anytime.end(), [&](double f) { return f >= target; });
    *evals_to = it == r.anytime.end() ? -1 : static_cast<long>(it - r.anytime.begin()) + 1;
  }
  return std::move(r.proposed);
}

// Builds an `Opt` with `params_text`: the field named by the InputError it throws (whose message
// must quote the offending value), or "no error".
template <class Opt>
std::string param_error_field(const SearchWorld& s, const std::string& params_text) {
  OptimizerParams params = OptimizerParams::parse(params_text, "--param");
  try {
    Opt opt(s.context(1, 100, &params));
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find(params_text.substr(params_text.find('=') + 1)) != std::string::npos);
    return e.field();
  }
  return "no error";
}

}  // namespace shardsim::testing
