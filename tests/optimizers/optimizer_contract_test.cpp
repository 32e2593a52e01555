// tests/optimizers/optimizer_contract_test.cpp — the contract every registered optimizer keeps, run over the
// whole registry (optimizer_names()), so an optimizer added in one line of optimizers/algorithms/registry.cpp
// is held to it without a test of its own:
//   * the budget: it never proposes more genomes than its budget, every one in range; a stochastic
//     optimizer (not megatron or exhaustive) spends all of it;
//   * determinism: the same seed proposes the same genomes in the same order; another seed
//     proposes others (stochastic optimizers);
//   * infeasible plans: told that a third of its plans, or every plan, is infeasible, it finishes
//     its budget without throwing, its best is feasible whenever it proposed a feasible plan, and
//     its anytime curve never decreases.
// The space is Mixtral-8x7B's degrees and batching on one DGX-H100 (small enough for exhaustive
// to enumerate), scored by the fixtures' synthetic objective; no SimGrid, no TBB.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "optimizers/algorithms/optimizer.hpp"
#include "tests/search_fixtures.hpp"

using namespace shardsim;
using namespace shardsim::testing;

namespace {

SpaceOptions degrees_and_batching() {
  SpaceOptions o;
  o.sharding = o.mapping = false;
  return o;
}

// `name` built at `seed` with `budget` and driven through the budget wrapper (search_fixtures.hpp).
DriveRun run(const SearchWorld& w, const std::string& name, std::uint64_t seed, long budget, const Scorer& score) {
  return drive_run(name, w, make_optimizer(name, w.context(seed, budget)), budget, score);
}

// A third of the plans (by their key) made infeasible on top of the space's own checks.
Score mostly_feasible(const SearchWorld& w, const Genes& g) {
  const std::string key = w.space.key(w.space.canonical(g));
  if (std::hash<std::string>{}(key) % 3 == 0) {
    Score s;
    s.violation = 1 + static_cast<double>(std::hash<std::string>{}(key) % 7);
    s.reason = "planted";
    return s;
  }
  return fake_score(w.space, g);
}

Score never_feasible(const Genes&) {
  Score s;
  s.violation = 1;
  s.reason = "planted";
  return s;
}

}  // namespace

TEST_CASE("optimizer contract: every registered optimizer keeps its budget, its seed and its head on infeasible plans") {
  const SearchWorld w("mixtral-8x7b", "dgx-h100:1", degrees_and_batching());
  const long size = static_cast<long>(w.space.canonical_size());
  REQUIRE(size > 8);
  const Scorer plain = [&](const Genes& g) { return fake_score(w.space, g); };
  const Scorer planted = [&](const Genes& g) { return mostly_feasible(w, g); };
  REQUIRE(optimizer_names().size() >= 7);
  for (const std::string& name : optimizer_names()) {
    CAPTURE(name);
    const bool stochastic = !runs_once(name);
    const long budget = name == "exhaustive" ? size : 300;  // exhaustive needs the whole space
    const DriveRun a = run(w, name, 1, budget, plain);
    CHECK(a.used <= budget);
    CHECK(static_cast<long>(a.proposed.size()) == a.used);
    CHECK(!a.proposed.empty());
    if (stochastic) CHECK(a.used == budget);
    if (name == "exhaustive") CHECK(a.used == size);
    // Determinism, and that the seed matters.
    const DriveRun again = run(w, name, 1, budget, plain);
    CHECK(again.proposed == a.proposed);
    if (stochastic) CHECK(run(w, name, 2, budget, plain).proposed != a.proposed);
    // Infeasible plans among the feasible ones, then nothing feasible at all.
    for (const Scorer* score : {&planted, static_cast<const Scorer*>(nullptr)}) {
      const DriveRun r = score ? run(w, name, 3, budget, *score) : run(w, name, 3, budget, never_feasible);
      CHECK(r.used <= budget);
      if (stochastic) CHECK(r.used == budget);
      CHECK(r.best_feasible == r.any_feasible_told);
      for (std::size_t k = 1; k < r.anytime.size(); ++k) CHECK(r.anytime[k] >= r.anytime[k - 1]);
      if (!score) {
        CHECK(!r.best_feasible);
        for (double f : r.anytime) CHECK(f == 0);
      }
    }
  }
}
