// tests/optimizers/rl_test.cpp — the "rl" and "rl-noattn" optimizers and their policy, against a fake scorer
// (no SimGrid, no TBB): hand-written gradients vs central finite differences, canonical masked
// decoding, sampling without replacement, save → load round trip, a policy moved to another model
// and cluster, bad parameters and policy files refused, determinism by seed, the elite history's
// invariants, and learning on a synthetic objective whose optimum is found by enumeration.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <unistd.h>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "optimizers/space/megatron_portfolio.hpp"
#include "optimizers/algorithms/optimizer.hpp"
#include "optimizers/algorithms/rl_critic.hpp"
#include "optimizers/algorithms/rl_optimizer.hpp"
#include "optimizers/algorithms/rl_policy.hpp"
#include "tests/cli_runner.hpp"
#include "tests/search_fixtures.hpp"
#include "optimizers/space/search_space.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

using namespace shardsim;

namespace {

using World = shardsim::testing::SearchWorld;

double lg(int v) { return std::log2(static_cast<double>(v)); }

// A made-up throughput with a known shape: best at tp = 4, pp = 1, ep = 4, etp = 1, sequence
// parallelism on, and one preferred sharding per operator worth 1–3%; expert operators pay off
// only together (row-up + column-down, when they are sharded at all). Infeasible plans get the
// violation check_plan reports.
Score synthetic_score(const SearchSpace& space, const Genes& g) {
  const PlanCheck chk = space.check(g);
  if (!chk.feasible()) return infeasible_score(chk);
  const Plan p = space.decode(g);
  const Degrees& d = p.deg;
  double f = 500;
  f /= 1 + 0.15 * std::abs(lg(d.tp) - 2);
  f /= 1 + 0.25 * lg(d.pp);
  f /= 1 + 0.10 * std::abs(lg(d.ep) - 2);
  f /= 1 + 0.05 * lg(d.etp);
  f /= 1 + 0.04 * std::abs(lg(d.attn_dp) - 0);
  if (d.sp > 1) f *= 1.03;
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = static_cast<Op>(i);
    if (op == Op::ExpertUp || op == Op::ExpertDown) continue;
    const auto& allowed = allowed_shards(op);
    const Shard preferred = allowed[static_cast<std::size_t>((i * 3 + 1) % static_cast<int>(allowed.size()))];
    if (p.shard(op) == preferred) f *= 1.01 + 0.01 * (i % 3);
  }
  if (d.etp > 1 && p.shard(Op::ExpertUp) == Shard::Row && p.shard(Op::ExpertDown) == Shard::Column) f *= 1.06;
  Score s;
  s.feasible = true;
  s.objective = f;
  return s;
}

// Runs `opt` through the budget wrapper against the synthetic scorer. Returns the proposals in order
// and, per told batch, the mean objective as a fraction of `optimum` (infeasible = 0).
struct RunLog {
  std::vector<Genes> proposals;
  std::vector<double> batch_quality;
  double best = 0;
  std::unique_ptr<BudgetedOptimizer> runner;  // keeps the optimizer for inspection
  const RlOptimizer& rl() const { return dynamic_cast<const RlOptimizer&>(runner->optimizer()); }
};
RunLog drive(std::unique_ptr<Optimizer> opt, const SearchSpace& space, long budget, double optimum = 1,
             const std::string& name = "rl") {
  RunLog log;
  log.runner = std::make_unique<BudgetedOptimizer>(name, std::move(opt), space, budget);
  BudgetedOptimizer& b = *log.runner;
  for (;;) {
    std::vector<Genes> batch = b.ask();
    if (batch.empty()) break;
    std::vector<Evaluated> told;
    double q = 0;
    for (const auto& g : batch) {
      told.push_back({g, synthetic_score(space, g)});
      log.proposals.push_back(g);
      if (told.back().score.feasible) q += told.back().score.objective / optimum;
    }
    log.batch_quality.push_back(q / static_cast<double>(batch.size()));
    b.tell(told);
  }
  log.best = b.best() && b.best()->score.feasible ? b.best()->score.objective : 0;
  return log;
}

double optimum_of(const SearchSpace& space) {
  double best = 0;
  space.for_each_canonical([&](const Genes& g) {
    const Score s = synthetic_score(space, g);
    if (s.feasible) best = std::max(best, s.objective);
    return true;
  });
  return best;
}

// Adds N(0, scale²) noise to every parameter (so no entry sits at a special initial value).
void jitter(RlPolicy& p, double scale, std::uint64_t seed) {
  Rng rng("jitter", seed);
  for (int i = 0; i < p.params().size(); ++i)
    for (long r = 0; r < p.params()[i].rows(); ++r)
      for (long c = 0; c < p.params()[i].cols(); ++c) p.params()[i](r, c) += scale * rng.normal();
}

void check_gradient(bool attention) {
  SpaceOptions o;
  o.mapping = o.batching = false;
  World w("mixtral-8x7b", "dgx-h100:1", o);
  RlPolicy policy(4, attention, 3);
  policy.bind(w.space);
  jitter(policy, 0.4, 11);
  Rng rng("gradcheck", 5);
  std::vector<EliteToken> elites;
  for (int i = 0; i < 3; ++i)
    elites.push_back({w.space.random([&] { return rng.next(); }), 1.0 - 0.5 * i, 0.9 - 0.7 * i});
  const RlPolicy::Context ctx = policy.encode(elites);
  std::vector<Episode> eps;
  const double weights[] = {0.7, -0.4, 1.3};
  for (double wt : weights) {
    Episode e = policy.sample(ctx, rng, nullptr, 1.5);
    e.weight = wt;
    e.entropy = 0.05;
    eps.push_back(e);
  }
  // A state-dependent baseline gives each decision its own weight (rl.baseline=critic).
  Episode stepped = policy.sample(ctx, rng, nullptr, 1.5);
  stepped.entropy = 0.05;
  for (int d = 0; d < w.space.num_decisions(); ++d) stepped.step_weights.push_back(0.9 - 0.35 * (d % 5));
  eps.push_back(stepped);
  std::vector<Eigen::MatrixXd> grad = policy.params().zeros();
  policy.loss(elites, eps, &grad);
  const double h = 1e-5;
  double worst = 0;
  std::string worst_key;
  int checked = 0, nonzero = 0;
  for (int i = 0; i < policy.params().size(); ++i) {
    Eigen::MatrixXd& m = policy.params()[i];
    for (long r = 0; r < m.rows(); ++r)
      for (long c = 0; c < m.cols(); ++c) {
        const double keep = m(r, c);
        m(r, c) = keep + h;
        const double up = policy.loss(elites, eps, nullptr);
        m(r, c) = keep - h;
        const double down = policy.loss(elites, eps, nullptr);
        m(r, c) = keep;
        const double fd = (up - down) / (2 * h);
        const double an = grad[static_cast<std::size_t>(i)](r, c);
        const double rel = std::abs(fd - an) / std::max(1e-3, std::abs(fd) + std::abs(an));
        if (rel > worst) worst = rel, worst_key = policy.params().key(i);
        ++checked;
        nonzero += std::abs(an) > 1e-6;
      }
  }
  MESSAGE(std::string(attention ? "rl" : "rl-noattn")
          << ": " << checked << " partial derivatives (" << nonzero << " nonzero), worst relative error " << worst
          << " at " << worst_key);
  CHECK(worst < 1e-4);
  CHECK(nonzero > checked / 4);
  // Attention parameters get gradient only with attention.
  const auto& g_wk = grad[static_cast<std::size_t>(policy.params().find("W_k"))];
  const auto& g_beta = grad[static_cast<std::size_t>(policy.params().find("beta"))];
  if (attention) {
    CHECK(g_wk.norm() > 0);
    CHECK(g_beta.norm() > 0);
  } else {
    CHECK(g_wk.norm() == 0);
    CHECK(g_beta.norm() == 0);
  }
}

// The synthetic objective's problem: Mixtral-8x7B on 8 GPUs, degrees and sharding only, its
// optimum by enumeration and a budget of 10% of the space.
SpaceOptions degrees_and_sharding() {
  SpaceOptions o;
  o.mapping = o.batching = false;
  return o;
}
struct SyntheticProblem {
  World w{"mixtral-8x7b", "dgx-h100:1", degrees_and_sharding()};
  double optimum = optimum_of(w.space);
  long budget = static_cast<long>(0.1 * w.space.canonical_size());
};

// A policy's mean quality on the synthetic objective (objective / optimum, infeasible = 0) over
// 200 of its samples.
double policy_quality(const SearchSpace& space, const RlPolicy& p, const std::vector<EliteToken>& elites,
                      double optimum) {
  const RlPolicy::Context ctx = p.encode(elites);
  Rng rng("quality", 1);
  double q = 0;
  for (int i = 0; i < 200; ++i) {
    const Score s = synthetic_score(space, p.sample(ctx, rng).genes);
    if (s.feasible) q += s.objective / optimum / 200;
  }
  return q;
}

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/shardsim-rl-test-" + name;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

}  // namespace

TEST_CASE("rl: policy gradient matches central finite differences (attention)") { check_gradient(true); }

TEST_CASE("rl: policy gradient matches central finite differences (no attention)") { check_gradient(false); }

// A fresh policy on DeepSeek-V3 / 32 GPUs with the portfolio as its elites.
struct PortfolioPolicy {
  World w{"deepseek-v3", "dgx-h100:4"};
  RlPolicy policy{8, true, 1};
  RlPolicy::Context ctx;
  PortfolioPolicy() {
    policy.bind(w.space);
    std::vector<EliteToken> elites;
    for (const auto& g : w.portfolio) elites.push_back({g, 0.5, 0.5});
    ctx = policy.encode(elites);
  }
};

TEST_CASE("rl: sampled genomes are canonical and allowed by the validity masks") {
  PortfolioPolicy pp;
  auto& [w, policy, ctx] = pp;
  Rng rng("masks", 1);
  for (int i = 0; i < 50; ++i) {
    Episode e = policy.sample(ctx, rng);
    REQUIRE(w.space.in_range(e.genes));
    CHECK(w.space.canonical(e.genes) == e.genes);
    for (int d = 0; d < w.space.num_decisions(); ++d) {
      CHECK(w.space.valid_values(d, e.genes)[static_cast<std::size_t>(e.genes[static_cast<std::size_t>(d)])]);
      CHECK(e.masks[static_cast<std::size_t>(d)] == decision_mask(w.space, d, e.genes));
    }
  }
}

TEST_CASE("rl: a local move keeps the anchor's fixed decisions and stays inside the masks") {
  PortfolioPolicy pp;
  auto& [w, policy, ctx] = pp;
  Rng rng("local", 1);
  const Genes& base = w.portfolio.front();
  const int n = w.space.num_decisions();
  int changed_free = 0, runs = 0;
  for (int free_d = 0; free_d < n; ++free_d) {
    if (w.space.decisions()[static_cast<std::size_t>(free_d)].size() < 2) continue;
    Genes anchor = base;
    anchor[static_cast<std::size_t>(free_d)] = -1;
    for (int i = 0; i < 10; ++i, ++runs) {
      const Episode e = policy.sample(ctx, rng, nullptr, 2.0, nullptr, &anchor);
      REQUIRE(w.space.in_range(e.genes));
      for (int d = 0; d < n; ++d) {
        const auto& mask = e.masks[static_cast<std::size_t>(d)];
        const int g = e.genes[static_cast<std::size_t>(d)];
        CHECK(mask[static_cast<std::size_t>(g)]);
        if (d == free_d) {
          changed_free += g != base[static_cast<std::size_t>(d)];
        } else if (mask[static_cast<std::size_t>(base[static_cast<std::size_t>(d)])]) {
          CHECK(g == base[static_cast<std::size_t>(d)]);  // a fixed decision keeps the anchor's value wherever allowed
        }
      }
    }
  }
  REQUIRE(runs > 0);
  CHECK(changed_free > 0);  // the freed decisions are drawn from π
}

TEST_CASE("rl: sampling without replacement covers a small space once, then stops") {
  SpaceOptions o{true, false, false, false};  // degrees only: a few dozen plans
  World w("mixtral-8x7b", "dgx-h100:1", o);
  // Every genome the masks allow, found by enumeration.
  std::set<Genes> reachable;
  w.space.for_each_canonical([&](const Genes& g) {
    bool ok = true;
    for (int d = 0; d < w.space.num_decisions() && ok; ++d)
      ok = decision_mask(w.space, d, g)[static_cast<std::size_t>(g[static_cast<std::size_t>(d)])] != 0;
    if (ok) reachable.insert(g);
    return true;
  });
  REQUIRE(reachable.size() > 16);
  // The trie alone: exactly the reachable genomes, each once.
  RlPolicy policy(4, true, 1);
  policy.bind(w.space);
  const RlPolicy::Context ctx = policy.encode({});
  Rng rng("trie", 1);
  PlanTrie trie;
  std::set<Genes> drawn;
  while (!trie.exhausted()) CHECK(drawn.insert(policy.sample(ctx, rng, &trie).genes).second);
  CHECK(drawn == reachable);
  CHECK(trie.leaves() == reachable.size());
  // The optimizer, with a budget larger than the space: every plan once (the portfolio included),
  // then an empty ask ends the run early.
  // Without screening every reachable plan is proposed; with it (the default) the ones check_plan
  // refuses never are, and cost no budget.
  const long budget = static_cast<long>(reachable.size()) + 100;
  OptimizerParams unscreened = OptimizerParams::parse("rl.screen=0", "test");
  const RunLog all = drive(std::make_unique<RlOptimizer>(w.context(4, budget, &unscreened)), w.space, budget);
  std::set<Genes> proposed(all.proposals.begin(), all.proposals.end());
  CHECK(proposed.size() == all.proposals.size());
  CHECK(all.runner->done());
  CHECK(all.runner->used() < budget);
  for (const auto& g : reachable) CHECK(proposed.count(g) == 1);
  auto screening = std::make_unique<RlOptimizer>(w.context(4, budget));
  RlOptimizer* rl = screening.get();
  const RunLog log = drive(std::move(screening), w.space, budget);
  std::set<Genes> feasible_proposed(log.proposals.begin(), log.proposals.end());
  CHECK(feasible_proposed.size() == log.proposals.size());
  long infeasible = 0;
  for (const auto& g : reachable) {
    const bool ok = w.space.check(g).feasible();
    infeasible += !ok;
    // The portfolio is proposed as given; every sampled plan check_plan refuses is screened out.
    if (ok) CHECK(feasible_proposed.count(g) == 1);
  }
  REQUIRE(infeasible > 0);
  CHECK(rl->screened() > 0);
  // No sampled proposal breaks a rule check_plan knows (divisibility, groups inside nodes, memory):
  // only the Megatron portfolio, proposed as given, may.
  std::set<std::string> portfolio;
  for (const auto& g : w.portfolio) portfolio.insert(w.space.key(g));
  for (const auto& g : log.proposals)
    if (!portfolio.count(w.space.key(g))) CHECK(w.space.check(g).feasible());
  CHECK(log.runner->used() + rl->screened() <= all.runner->used());
}

TEST_CASE("rl: save then load gives identical parameters and probabilities") {
  World w("mixtral-8x7b", "dgx-h100:2");
  OptimizerParams params = OptimizerParams::parse("rl.batch=8,rl.dim=6", "test");
  const RunLog log = drive(std::make_unique<RlOptimizer>(w.context(3, 48, &params)), w.space, 48);
  const RlOptimizer* rl = &log.rl();
  const std::string text = rl->state();
  RlPolicy loaded = RlPolicy::load(text, "saved", true, 99);
  loaded.bind(w.space);
  CHECK(loaded.dim() == 6);
  CHECK(loaded.save() == text);
  const RlPolicy& trained = rl->policy();
  REQUIRE(loaded.params().size() == trained.params().size());
  for (const auto& [key, i] : trained.params().index()) {
    const int j = loaded.params().find(key);
    REQUIRE(j >= 0);
    CHECK(loaded.params()[j] == trained.params()[i]);  // bit-identical
  }
  std::vector<EliteToken> elites;
  int rank = 0;
  for (const auto& e : rl->elites()) elites.push_back({e.genes, 1.0 / (1 + rank++), 0.5});
  const auto ctx_a = trained.encode(elites);
  const auto ctx_b = loaded.encode(elites);
  Rng rng("roundtrip", 1);
  for (int i = 0; i < 10; ++i) {
    const Episode e = trained.sample(ctx_a, rng);
    CHECK(trained.probabilities(ctx_a, e) == loaded.probabilities(ctx_b, e));
  }
}

TEST_CASE("rl: a policy saved on one model and cluster warm-starts another") {
  World small("mixtral-8x7b", "dgx-h100:2");
  OptimizerParams p1 = OptimizerParams::parse("rl.batch=8", "test");
  const RunLog first = drive(std::make_unique<RlOptimizer>(small.context(1, 64, &p1)), small.space, 64);
  const RlOptimizer* rl = &first.rl();
  const std::string path = temp_path("warm.json");
  write_file(path, rl->state());

  World large("deepseek-v3", "dgx-h100:4");
  OptimizerParams p2;
  p2.set("rl", "policy_in", path);
  p2.set("rl", "batch", "8");
  auto warm = std::make_unique<RlOptimizer>(large.context(1, 48, &p2));
  CHECK(p2.unread("rl").empty());
  const RlPolicy& moved = warm->policy();
  const RlPolicy& source = rl->policy();
  for (const char* key : {"W_o", "q:factor", "e:factor=tp", "e:etp split=1", "b:shard qkv=replicate"}) {
    CAPTURE(key);
    REQUIRE(moved.params().find(key) >= 0);
    CHECK(moved.params()[moved.params().find(key)] == source.params()[source.params().find(key)]);
  }
  // DeepSeek-V3 has shared experts and dense layers Mixtral does not: new entries were created.
  CHECK(source.params().find("q:shard shared_expert") < 0);
  CHECK(moved.params().find("q:shard shared_expert") >= 0);
  RunLog log = drive(std::move(warm), large.space, 48);
  CHECK(log.proposals.size() == 48);
  for (const auto& g : log.proposals) CHECK(large.space.in_range(g));
  CHECK(log.rl().mean_rewards().size() >= 2);
  std::remove(path.c_str());
}

TEST_CASE("rl: bad parameters and malformed policy files are refused") {
  World w("mixtral-8x7b", "dgx-h100:1");
  auto refused = [&](const std::string& text, const std::string& field) {
    CAPTURE(text);
    OptimizerParams p = OptimizerParams::parse(text, "--param");
    try {
      if (text.rfind("rl-noattn.", 0) == 0) {
        RlNoAttnOptimizer opt(w.context(1, 10, &p));
      } else {
        RlOptimizer opt(w.context(1, 10, &p));
      }
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.field() == field);
    }
  };
  refused("rl.elite=0", "rl.elite");
  refused("rl.per_degree=-1", "rl.per_degree");
  refused("rl.batch=1", "rl.batch");
  refused("rl.lr=fast", "rl.lr");
  refused("rl.entropy=-0.1", "rl.entropy");
  refused("rl.dim=1", "rl.dim");
  refused("rl.seed_portfolio=2", "rl.seed_portfolio");
  refused("rl.risk=0", "rl.risk");
  refused("rl.retries=-1", "rl.retries");
  refused("rl.imitate=x", "rl.imitate");
  refused("rl.shaping=linear", "rl.shaping");
  refused("rl.baseline=value", "rl.baseline");
  refused("rl.local=often", "rl.local");
  refused("rl.local=1.5", "rl.local");
  refused("rl.critic_history=2", "rl.critic_history");
  // A setting of the baseline not chosen is refused, not ignored; with its own baseline it is taken.
  refused("rl.baseline=critic,rl.risk=0.5", "rl.risk");
  refused("rl.baseline=critic,rl.shaping=zscore", "rl.shaping");
  refused("rl.critic_history=64", "rl.critic_history");
  for (const char* ok : {"rl.baseline=critic,rl.critic_history=64", "rl.risk=0.5,rl.shaping=zscore"}) {
    CAPTURE(ok);
    OptimizerParams p = OptimizerParams::parse(ok, "--param");
    CHECK_NOTHROW(RlOptimizer(w.context(1, 10, &p)));
  }
  refused("rl-noattn.lr=0", "rl-noattn.lr");

  // rl-noattn reads its own keys and ignores rl's.
  OptimizerParams mixed = OptimizerParams::parse("rl.elite=4,rl-noattn.elite=8", "--param");
  RlNoAttnOptimizer noattn(w.context(1, 10, &mixed));
  CHECK(mixed.unread("rl-noattn").empty());
  CHECK(mixed.unread("rl") == std::vector<std::string>{"elite"});

  // Policy files.
  RlPolicy good(4, true, 1);
  good.bind(w.space);
  const std::string text = good.save();
  auto load_error = [&](const std::string& body) -> std::string {
    try {
      RlPolicy::load(body, "policy.json", true, 1);
    } catch (const InputError& e) {
      CHECK(e.source() == "policy.json");
      return e.field();
    }
    return "accepted";
  };
  CHECK(load_error(text) == "accepted");
  CHECK(load_error("{\"format\": ") != "accepted");
  CHECK(load_error("[1, 2]") != "accepted");
  CHECK(load_error("{\"format\": \"other\", \"version\": 1, \"dim\": 4, \"params\": {}}") == "/format");
  CHECK(load_error("{\"format\": \"shardsim-rl-policy\", \"version\": 2, \"dim\": 4, \"params\": {}}") == "/version");
  CHECK(load_error("{\"format\": \"shardsim-rl-policy\", \"version\": 1, \"dim\": 0, \"params\": {}}") == "/dim");
  CHECK(load_error("{\"format\": \"shardsim-rl-policy\", \"version\": 1, \"dim\": 4, \"params\": 3}") == "/params");
  CHECK(load_error("{\"format\": \"shardsim-rl-policy\", \"version\": 1, \"dim\": 4, \"params\": {}, \"trained_on\": 3}") ==
        "/trained_on");
  CHECK(load_error("{\"format\": \"shardsim-rl-policy\", \"version\": 1, \"dim\": 4, \"params\": {}, \"trained_on\": {}}") ==
        "accepted");
  CHECK(load_error("{\"format\": \"shardsim-rl-policy\", \"version\": 1, \"dim\": 4, \"params\": {}, \"x\": 1}") ==
        "/x");
  const std::string head = "{\"format\": \"shardsim-rl-policy\", \"version\": 1, \"dim\": 2, \"params\": {";
  CHECK(load_error(head + "\"W_q\": {\"shape\": [2, 2], \"data\": [1, 2, 3, 4]}}}") == "/params/W_q");
  CHECK(load_error(head + "\"W_s\": {\"shape\": [2, 1], \"data\": [1, 2]}}}") == "/params/W_s/shape");
  CHECK(load_error(head + "\"W_s\": {\"shape\": [2, 2], \"data\": [1, 2, 3]}}}") == "/params/W_s/data");
  CHECK(load_error(head + "\"W_s\": {\"shape\": [2, 2], \"data\": [1, 2, \"x\", 4]}}}") == "/params/W_s/data/2");
  CHECK(load_error(head + "\"e:a/b\": {\"shape\": [2, 1], \"data\": [1]}}}") == "/params/e:a~1b/data");

  // A missing file, a malformed file, and a dim that contradicts the file.
  OptimizerParams missing;
  missing.set("rl", "policy_in", temp_path("does-not-exist.json"));
  CHECK_THROWS_AS(RlOptimizer(w.context(1, 10, &missing)), InputError);
  const std::string path = temp_path("bad.json");
  write_file(path, "{\"format\": \"shardsim-rl-policy\"");
  OptimizerParams bad;
  bad.set("rl", "policy_in", path);
  CHECK_THROWS_AS(RlOptimizer(w.context(1, 10, &bad)), InputError);
  write_file(path, text);
  OptimizerParams dim;
  dim.set("rl", "policy_in", path);
  dim.set("rl", "dim", "8");
  try {
    RlOptimizer opt(w.context(1, 10, &dim));
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.field() == "rl.dim");
  }
  std::remove(path.c_str());
}

TEST_CASE("rl: the same seed gives the same proposals") {
  World w("mixtral-8x7b", "dgx-h100:2");
  auto run = [&](bool attention, std::uint64_t seed) {
    std::unique_ptr<Optimizer> opt;
    if (attention)
      opt = std::make_unique<RlOptimizer>(w.context(seed, 80));
    else
      opt = std::make_unique<RlNoAttnOptimizer>(w.context(seed, 80));
    return drive(std::move(opt), w.space, 80).proposals;
  };
  for (bool attention : {true, false}) {
    const auto a = run(attention, 7), b = run(attention, 7), c = run(attention, 8);
    CHECK(a.size() == 80);
    CHECK(a == b);
    CHECK(a != c);
    std::set<std::vector<int>> distinct(a.begin(), a.end());
    CHECK(distinct.size() == a.size());  // never the same plan twice in a run
  }
}

TEST_CASE("rl: the elite history is distinct, ranked by Deb's rules and diverse in degrees") {
  World w("mixtral-8x7b", "dgx-h100:2");
  OptimizerParams params = OptimizerParams::parse("rl.elite=6,rl.per_degree=2", "test");
  const RunLog log = drive(std::make_unique<RlOptimizer>(w.context(2, 160, &params)), w.space, 160);
  const auto elites = log.rl().elites();
  CHECK(elites.size() == 6);
  std::set<std::string> keys;
  std::map<std::string, int> per_degree;
  for (std::size_t i = 0; i < elites.size(); ++i) {
    keys.insert(w.space.key(elites[i].genes));
    if (i > 0) CHECK_FALSE(better(elites[i].score, elites[i - 1].score));
    std::string deg;
    for (int d = 0; d < w.space.num_decisions(); ++d)
      if (w.space.decisions()[static_cast<std::size_t>(d)].block == Block::Degrees)
        deg += std::to_string(elites[i].genes[static_cast<std::size_t>(d)]) + ".";
    CHECK(++per_degree[deg] <= 2);
  }
  CHECK(keys.size() == elites.size());
}

TEST_CASE("rl: learns the synthetic objective — near the optimum at 10% of the space" * doctest::test_suite("heavy")) {
  const SyntheticProblem problem;
  const World& w = problem.w;
  const double optimum = problem.optimum;
  const long budget = problem.budget;
  double portfolio_best = 0;
  for (const auto& g : w.portfolio) {
    const Score s = synthetic_score(w.space, g);
    if (s.feasible) portfolio_best = std::max(portfolio_best, s.objective);
  }
  auto quality = [&](const RlPolicy& p, const std::vector<EliteToken>& elites) {
    return policy_quality(w.space, p, elites, optimum);
  };
  for (bool attention : {true, false}) {
    std::vector<double> ratios;
    int learned = 0;
    std::string line;
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      std::unique_ptr<Optimizer> opt;
      if (attention)
        opt = std::make_unique<RlOptimizer>(w.context(seed, budget));
      else
        opt = std::make_unique<RlNoAttnOptimizer>(w.context(seed, budget));
      const RunLog log = drive(std::move(opt), w.space, budget, optimum);
      ratios.push_back(log.best / optimum);
      long to_99 = 0;
      const auto& anytime = log.runner->anytime();
      while (to_99 < static_cast<long>(anytime.size()) && anytime[static_cast<std::size_t>(to_99)] < 0.99 * optimum)
        ++to_99;
      RlPolicy initial(16, attention, seed);
      initial.bind(w.space);
      const double before = quality(initial, {}), after = quality(log.rl().policy(), log.rl().elite_tokens());
      learned += after > before + 0.1;
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    " seed %d: best %.4f (99%% after %ld evaluations), policy's mean quality %.3f → %.3f;",
                    static_cast<int>(seed), ratios.back(), to_99 + 1, before, after);
      line += buf;
    }
    std::sort(ratios.begin(), ratios.end());
    MESSAGE(std::string(attention ? "rl" : "rl-noattn")
            << " on " << w.space.canonical_size() << " plans, budget " << budget << ", Megatron portfolio "
            << portfolio_best / optimum << ":" << line);
    CHECK(ratios[2] >= 0.99);
    CHECK(learned == 5);
  }
}

TEST_CASE("rl: local moves by default only where the budget is a small part of the space") {
  SpaceOptions o;
  o.mapping = o.batching = false;
  World small("mixtral-8x7b", "dgx-h100:1", o);
  World large("deepseek-v3", "dgx-h100:4");
  REQUIRE(small.space.canonical_size() < 1e6);
  REQUIRE(large.space.canonical_size() > 1e6);
  const long tenth = static_cast<long>(0.1 * small.space.canonical_size());
  CHECK(RlOptimizer(small.context(1, tenth)).local_share() == 0);
  CHECK(RlOptimizer(small.context(1, static_cast<long>(0.005 * small.space.canonical_size()))).local_share() == 0.25);
  CHECK(RlOptimizer(large.context(1, 1000)).local_share() == 0.25);
  const OptimizerParams fixed = OptimizerParams::parse("rl.local=0.5", "test"), off = OptimizerParams::parse("rl.local=0", "test");
  CHECK(RlOptimizer(small.context(1, tenth, &fixed)).local_share() == 0.5);
  CHECK(RlOptimizer(large.context(1, 1000, &off)).local_share() == 0);
}

TEST_CASE("rl: the prefix critic expects the mean reward first, then what the choices made so far are worth") {
  // Three decisions of 2, 3 and 2 values; the reward is 1 when decision 0 takes value 1, plus 0.3
  // when decision 1 takes value 2; decision 2 does not matter. Every combination 20 times.
  PrefixCritic critic({2, 3, 2}, 100000, 1.0);
  auto score_of = [](const Genes& g) {
    Score s;
    s.feasible = true;
    s.objective = (g[0] == 1 ? 1.0 : 0.0) + (g[1] == 2 ? 0.3 : 0.0);
    return s;
  };
  std::vector<Genes> all;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) all.push_back({a, b, c});
  const auto objective = [](const Score& s) { return s.objective; };
  CHECK_FALSE(critic.fit(objective, 1));  // nothing kept yet
  for (int rep = 0; rep < 20; ++rep)
    for (const Genes& g : all) critic.add(g, score_of(g));
  CHECK_FALSE(critic.fit(objective, 1000));
  REQUIRE(critic.fit(objective, 10));
  const double mean = 0.5 + 0.3 / 3;
  for (const Genes& g : all) {
    const std::vector<double> v = critic.values(g);
    REQUIRE(v.size() == 3);
    CHECK(v[0] == doctest::Approx(mean).epsilon(1e-9));  // the intercept is not shrunk
    // After decision 0 the first term is known; ridge 1 against 120 rows per value shrinks little.
    CHECK(std::abs(v[1] - ((g[0] == 1 ? 1.0 : 0.0) + 0.1)) < 0.02);
    CHECK(std::abs(v[2] - score_of(g).objective) < 0.02);
  }
  // Only the last `history` samples count: after 240 samples of a constant reward it expects that.
  PrefixCritic recent({2, 3, 2}, 24, 1.0);
  for (const Genes& g : all) recent.add(g, score_of(g));
  Score flat;
  flat.feasible = true;
  flat.objective = 0.25;
  for (int rep = 0; rep < 2; ++rep)
    for (const Genes& g : all) recent.add(g, flat);
  REQUIRE(recent.fit(objective, 1));
  for (double v : recent.values(all[5])) CHECK(v == doctest::Approx(0.25).epsilon(1e-6));
}

TEST_CASE("rl: with the critic as its baseline it still learns the synthetic objective" * doctest::test_suite("heavy")) {
  const SyntheticProblem problem;
  const World& w = problem.w;
  const double optimum = problem.optimum;
  const long budget = problem.budget;
  // Without self-imitation the policy gradient alone has to move the policy.
  const OptimizerParams params = OptimizerParams::parse("rl.baseline=critic,rl.imitate=0", "test");
  std::vector<double> ratios, gains;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const RunLog log = drive(std::make_unique<RlOptimizer>(w.context(seed, budget, &params)), w.space, budget, optimum);
    ratios.push_back(log.best / optimum);
    RlPolicy initial(16, true, seed);
    initial.bind(w.space);
    gains.push_back(policy_quality(w.space, log.rl().policy(), log.rl().elite_tokens(), optimum) -
                    policy_quality(w.space, initial, {}, optimum));
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(gains.begin(), gains.end());
  MESSAGE("rl.baseline=critic,rl.imitate=0, budget " << budget << ": median best / optimum " << ratios[2]
                                                     << ", policy's mean quality gained " << gains[0] << ", " << gains[1]
                                                     << ", " << gains[2] << ", " << gains[3] << ", " << gains[4]);
  CHECK(ratios[2] >= 0.99);
  CHECK(gains[2] > 0.1);
}

TEST_CASE("rl: a saved policy records what it was trained on, and a warm start reports it") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("shardsim_policy_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string common = "--optimizers rl --requests 30 --fidelity analytic --quiet ";
  auto a = test::run_cli("search --objective drain --model mixtral-8x7b --cluster dgx-h100:1 " + common + "--budget 12 --seeds 2..3 --policy-out " +
                         (dir / "p1.json").string() + " --out " + (dir / "a").string());
  REQUIRE(a.exit_code == 0);
  std::ifstream in(dir / "p1.json");
  std::stringstream text;
  text << in.rdbuf();
  const json p1 = json::parse(text.str());
  REQUIRE(p1.contains("trained_on"));
  const json& t = p1["trained_on"];
  CHECK(t["budget"] == 12);
  CHECK((t["seed"] == 2 || t["seed"] == 3));
  CHECK(t["evaluations"] == 12);
  CHECK(t["inputs"]["model"] == "mixtral-8x7b");
  CHECK(t["inputs"]["cluster"] == "dgx-h100:1");
  CHECK(t["best_objective"].get<double>() > 0);
  RlPolicy::load(text.str(), "p1.json", true, 1);  // the provenance does not stop it loading
  auto b = test::run_cli("search --objective drain --model mixtral-8x7b --cluster dgx-h100:2 " + common + "--budget 8 --seeds 1 --policy-in " +
                         (dir / "p1.json").string() + " --policy-out " + (dir / "p2.json").string() + " --out " + (dir / "b").string());
  REQUIRE(b.exit_code == 0);
  std::ifstream summary(dir / "b" / "summary.md");
  std::stringstream md;
  md << summary.rdbuf();
  CHECK(md.str().find("trained on mixtral-8x7b on dgx-h100:1 with a budget of 12 evaluations") != std::string::npos);
  std::ifstream in2(dir / "p2.json");
  std::stringstream text2;
  text2 << in2.rdbuf();
  const json p2 = json::parse(text2.str());
  CHECK(p2["trained_on"]["inputs"]["cluster"] == "dgx-h100:2");
  CHECK(p2["trained_on"]["warm_start"]["trained_on"]["budget"] == 12);
  fs::remove_all(dir);
}
