// tests/optimizers/search_space_test.cpp — the search space: encoding, canonical form, sizes, repair, masks,
// and the Megatron rule portfolio.
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <set>

#include "common/input_error.hpp"
#include "optimizers/space/megatron_portfolio.hpp"
#include "optimizers/algorithms/optimizer.hpp"
#include "optimizers/space/search_space.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"
#include "workloads/model.hpp"

using namespace shardsim;

namespace {

// Visits every raw genome of a (small) space.
void for_each_raw(const SearchSpace& s, const std::function<void(const Genes&)>& f) {
  Genes g(static_cast<std::size_t>(s.num_decisions()), 0);
  for (;;) {
    f(g);
    int i = s.num_decisions() - 1;
    while (i >= 0 && ++g[static_cast<std::size_t>(i)] == s.decisions()[static_cast<std::size_t>(i)].size())
      g[static_cast<std::size_t>(i--)] = 0;
    if (i < 0) return;
  }
}

}  // namespace

TEST_CASE("space: canonical keys identify equal plans exactly, and the sizes count them") {
  ModelSpec m = load_model("mixtral-8x7b");
  std::unique_ptr<Cluster> c(new Cluster(load_cluster("dgx-h100:1")));
  SpaceOptions o;
  o.mapping = false;
  o.batching = false;
  PoolSpace s(m, *c, default_plan(m), o);
  // Raw genomes: 4^3 factor genes × 4 etp splits × 2 sp × 3 redundant-expert values × 2·3·2·3·3·3·2
  // sharding genes.
  CHECK(s.raw_size() == doctest::Approx(64.0 * 4 * 2 * 3 * 648));
  std::map<std::string, Plan> by_key;
  std::set<std::string> plan_texts;
  long visited = 0;
  for_each_raw(s, [&](const Genes& g) {
    ++visited;
    Plan p = s.decode(g);
    CHECK(p.deg.gpus() == 8);  // the product holds by construction
    CHECK(p.deg.ep * p.deg.etp == p.deg.unit());
    // Equal keys ⇒ equal plans.
    auto [it, fresh] = by_key.emplace(s.key(g), p);
    if (!fresh) CHECK(it->second == p);
  });
  CHECK(visited == static_cast<long>(s.raw_size()));
  // Distinct keys ⇒ distinct plans.
  std::set<std::string> distinct_plans;
  for (const auto& [k, p] : by_key) distinct_plans.insert(plan_to_json(p).dump());
  CHECK(distinct_plans.size() == by_key.size());
  long canon_visits = 0;
  s.for_each_canonical([&](const Genes& g) {
    ++canon_visits;
    CHECK(s.canonical(g) == g);
    return true;
  });
  CHECK(static_cast<double>(by_key.size()) == doctest::Approx(s.canonical_size()));
  CHECK(canon_visits == static_cast<long>(by_key.size()));
}

TEST_CASE("space: encode inverts decode on canonical genomes — equal primes are interchangeable") {
  ModelSpec m = load_model("deepseek-v3");
  std::unique_ptr<Cluster> c(new Cluster(load_cluster("dgx-h100:4")));
  PoolSpace s(m, *c, default_plan(m));
  Rng rng("test", 7);
  for (int i = 0; i < 300; ++i) {
    Genes g = s.random([&] { return rng.next(); });
    Genes e;
    REQUIRE(s.encode(s.decode(g), e));
    CHECK(e == g);
  }
  // Swapping which copy of a 2 goes to tp and which to dp changes nothing.
  Genes a = s.random([&] { return rng.next(); });
  Genes b = a;
  a[0] = 0, a[1] = 3;  // first ×2 → tp, second → dp
  b[0] = 3, b[1] = 0;
  CHECK(s.key(a) == s.key(b));
  CHECK(s.decode(a) == s.decode(b));
}

TEST_CASE("space: repair moves an invalid genome to a valid plan") {
  ModelSpec m = load_model("deepseek-v3");
  std::unique_ptr<Cluster> c(new Cluster(load_cluster("dgx-h100:8")));
  SpaceOptions o;
  o.sharding = o.mapping = o.batching = false;
  PoolSpace s(m, *c, default_plan(m), o);
  // Every factor to dp: one GPU holds all 671B parameters → memory overflow.
  Genes all_dp(static_cast<std::size_t>(s.num_decisions()), 0);
  for (int i = 0; i < 6; ++i) all_dp[static_cast<std::size_t>(i)] = 3;
  CHECK_FALSE(s.check(all_dp).feasible());
  CHECK(s.check(all_dp).violations.front().field == "/memory");
  Genes r = s.repair(all_dp);
  CHECK(s.check(r).feasible());
  // Every factor to tp: tp = 64 spans nodes and does not divide what it must.
  Genes all_tp(static_cast<std::size_t>(s.num_decisions()), 0);
  CHECK_FALSE(s.check(all_tp).feasible());
  CHECK(s.check(s.repair(all_tp)).feasible());
}

TEST_CASE("space: valid_values masks tp beyond the NVLink domain and pp beyond the layers") {
  ModelSpec m = load_model("mixtral-8x7b");
  std::unique_ptr<Cluster> c(new Cluster(load_cluster("dgx-h100:4")));
  PoolSpace s(m, *c, default_plan(m));
  Genes g(static_cast<std::size_t>(s.num_decisions()), 0);  // factors 1–3 → tp = 8
  auto ok = s.valid_values(3, g);
  CHECK(ok[0] == 0);  // a fourth ×2 on tp would make tp = 16 > 8 GPUs per node
  CHECK(ok[3] == 1);  // dp is fine
  // The etp split: with tp = 8, attn_dp = 1 → unit 8; ep must divide Mixtral's 8 experts: all do.
  Genes h = g;
  h[3] = 3, h[4] = 3;
  auto e = s.valid_values(5, h);
  CHECK(e[0] == 1);
  CHECK(e[4] == 0);  // more splits than the unit has factors
}

TEST_CASE("space: block lists parse, and bad ones are refused naming the block") {
  SpaceOptions o = parse_space_options("degrees,batching", "--space");
  CHECK(o.degrees);
  CHECK_FALSE(o.sharding);
  CHECK(o.batching);
  CHECK(to_string(parse_space_options("all", "--space")) == "degrees,sharding,mapping,batching");
  CHECK_THROWS_WITH_AS(parse_space_options("degrees,shards", "--space"), doctest::Contains("shards: unknown block"),
                       InputError);
}

TEST_CASE("space: the routing block searches the dispatch where there are replicas to dispatch to") {
  CHECK_FALSE(parse_space_options("all", "--space").routing);  // asked for, not part of "all"
  CHECK(to_string(parse_space_options("all,routing", "--space")) == "degrees,sharding,mapping,batching,routing");
  ModelSpec m = load_model("mixtral-8x7b");
  std::unique_ptr<Cluster> c(new Cluster(load_cluster("dgx-h100:1")));
  const SpaceOptions o = parse_space_options("degrees,routing", "--space");
  PoolSpace s(m, *c, default_plan(m), o);
  REQUIRE(s.decisions().back().kind == Decision::Kind::Dispatch);
  CHECK(s.decisions().back().block == Block::Routing);
  std::map<std::string, Plan> by_key;
  int prefix_plans = 0, least_plans = 0;
  for_each_raw(s, [&](const Genes& g) {
    const Plan p = s.decode(g);
    if (p.deg.dp == 1) CHECK(p.engine.dispatch == Dispatch::RoundRobin);  // nothing to dispatch: canonical 0
    if (p.engine.dispatch == Dispatch::PrefixAffinity) ++prefix_plans;
    if (p.engine.dispatch == Dispatch::LeastLoaded) ++least_plans;
    auto [it, fresh] = by_key.emplace(s.key(g), p);
    if (!fresh) CHECK(it->second == p);
    Genes back;
    REQUIRE(s.encode(p, back));
    CHECK(s.key(back) == s.key(g));
  });
  CHECK(prefix_plans > 0);
  CHECK(least_plans == prefix_plans);
  CHECK(static_cast<double>(by_key.size()) == doctest::Approx(s.canonical_size()));
  // Three times the plans of the space without it, less those with one replica.
  PoolSpace without(m, *c, default_plan(m), parse_space_options("degrees", "--space"));
  CHECK(s.canonical_size() > without.canonical_size());
  CHECK(s.canonical_size() < 3 * without.canonical_size());
  // Only the prefill pool of a disaggregated space deals requests by dispatch.
  std::unique_ptr<Cluster> two(new Cluster(load_cluster("dgx-h100:2")));
  auto pools = make_search_space(m, *two, default_plan(m), parse_space_options("degrees,routing,pools", "--space"));
  int dispatch_genes = 0;
  for (const auto& d : pools->decisions()) dispatch_genes += d.kind == Decision::Kind::Dispatch;
  CHECK(dispatch_genes == 1);
}

TEST_CASE("portfolio: the rules give classic Megatron for a dense model and wide EP for DeepSeek") {
  ModelSpec llama = load_model("llama3-70b");
  std::unique_ptr<Cluster> two(new Cluster(load_cluster("dgx-h100:2")));
  auto dense = megatron_portfolio(llama, *two, default_plan(llama));
  REQUIRE_FALSE(dense.empty());
  CHECK(dense.front().rule == "H1 TP-max");
  CHECK(dense.front().plan.deg.tp == 8);
  for (const auto& r : dense) {
    CHECK(check_plan(r.plan, llama, *two).feasible());
    CHECK(r.plan.deg.ep == 1);  // H4–H6 are for MoE models only
  }
  ModelSpec ds = load_model("deepseek-v3");
  std::unique_ptr<Cluster> big(new Cluster(load_cluster("dgx-h100:32")));
  auto moe = megatron_portfolio(ds, *big, default_plan(ds));
  std::set<std::string> rules;
  for (const auto& r : moe) {
    rules.insert(r.rule.substr(0, 2));
    CHECK(check_plan(r.plan, ds, *big).feasible());
    if (r.rule.rfind("H6", 0) == 0) CHECK(r.plan.deg.ep >= 32);
  }
  CHECK(rules.count("H1"));
  CHECK(rules.count("H4"));
  CHECK(rules.count("H5"));
  CHECK(rules.count("H6"));
  // Every rule plan has a genome in the full space.
  PoolSpace s(ds, *big, default_plan(ds));
  CHECK(portfolio_genes(s).size() == moe.size());
}

TEST_CASE("space: a disaggregated space splits the cluster into pools with their own plans, keys and sizes exact") {
  // llama3-70b on two nodes (dense: fewer genes): one split (8P8D); each pool's 8 GPUs have 3 factor genes.
  ModelSpec m = load_model("llama3-70b");
  std::unique_ptr<Cluster> c(new Cluster(load_cluster("dgx-h100:2")));
  SpaceOptions o;
  o.sharding = o.mapping = o.batching = false;
  o.pools = true;
  auto s = make_search_space(m, *c, default_plan(m), o);
  REQUIRE(s->decisions().front().kind == Decision::Kind::PoolSplit);
  CHECK(s->decisions().front().labels == std::vector<std::string>{"8P8D"});
  std::map<std::string, Plan> by_key;
  long canon = 0;
  s->for_each_canonical([&](const Genes& g) {
    ++canon;
    Plan p = s->decode(g);
    REQUIRE(p.disaggregated());
    CHECK(p.deg.gpus() == 8);
    CHECK(p.decode().deg.gpus() == 8);
    CHECK(p.decode().first_gpu == 8);
    CHECK(s->canonical(g) == g);
    Genes back;
    REQUIRE(s->encode(p, back));
    CHECK(back == g);
    auto [it, fresh] = by_key.emplace(s->key(g), p);
    CHECK(fresh);  // canonical genomes have distinct keys
    return true;
  });
  CHECK(canon == static_cast<long>(s->canonical_size()));
  // Distinct keys ⇔ distinct plans.
  std::set<std::string> plans;
  for (const auto& [k, p] : by_key) plans.insert(plan_to_json(p).dump());
  CHECK(plans.size() == by_key.size());
  // A colocated plan is not in the space.
  Genes g;
  CHECK(!s->encode(plan_from_string("tp=8,dp=2", 16, plan_defaults(m)), g));
}

TEST_CASE("space: pool splits are whole nodes — padding genes of smaller pools stay 0") {
  ModelSpec m = load_model("mixtral-8x7b");
  std::unique_ptr<Cluster> c(new Cluster(load_cluster("dgx-h100:3")));  // splits 8P16D and 16P8D
  SpaceOptions o;
  o.pools = true;
  auto s = make_search_space(m, *c, default_plan(m), o);
  CHECK(s->decisions().front().labels == std::vector<std::string>{"8P16D", "16P8D"});
  int factors = 0;
  for (const auto& d : s->decisions()) factors += d.kind == Decision::Kind::Factor;
  CHECK(factors == 4 + 4);  // each pool padded to 16 GPUs' four factors of 2
  std::uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 11;
  };
  for (int i = 0; i < 300; ++i) {
    Genes g = s->random(next);
    Plan p = s->decode(g);
    REQUIRE(p.disaggregated());
    CHECK(p.total_gpus() == 24);
    CHECK(p.deg.gpus() == (g[0] == 0 ? 8 : 16));
    Genes r = s->repair(g);
    CHECK(s->in_range(r));
    CHECK(s->decode(r).total_gpus() == 24);
    // The prefill pool's fourth factor gene is padding when it has 8 GPUs: only 0 is valid there.
    if (g[0] == 0) {
      const int pad = 1 + 3;
      CHECK(g[static_cast<std::size_t>(pad)] == 0);
      std::vector<char> v = s->valid_values(pad, g);
      CHECK(v[0] == 1);
      for (std::size_t k = 1; k < v.size(); ++k) CHECK(v[k] == 0);
    }
  }
  CHECK_THROWS_AS(parse_space_options("sharding,pools", "--space"), InputError);
  CHECK(parse_space_options("all,pools", "--space").pools);
}

TEST_CASE("space: on a mixed cluster the pool split chooses which GPU type prefills, and every space has pools") {
  // Two H100 nodes then one H200 node: the pools that each lie on one type are 16 H100 + 8 H200,
  // prefill on either.
  ModelSpec m = load_model("mixtral-8x7b");
  std::unique_ptr<Cluster> c(new Cluster(load_cluster("dgx-h100:2+dgx-h200:1")));
  SpaceOptions o;
  o.sharding = o.mapping = o.batching = false;
  o.pools = true;
  auto s = make_search_space(m, *c, default_plan(m), o);
  CHECK(s->decisions().front().labels ==
        std::vector<std::string>{"16P8D (H100-SXM-80GB prefill)", "16D8P (H200-SXM-141GB prefill)"});
  std::set<std::string> keys;
  s->for_each_canonical([&](const Genes& g) {
    const Plan p = s->decode(g);
    REQUIRE(p.disaggregated());
    CHECK(p.decode_first() == (g[0] == 1));
    CHECK(c->pool_gpu(p.first_gpu).name == (g[0] == 0 ? "H100-SXM-80GB" : "H200-SXM-141GB"));
    CHECK(p.decode().first_gpu == (g[0] == 0 ? 16 : 0));
    Genes back;
    REQUIRE(s->encode(p, back));
    CHECK(back == g);
    CHECK(keys.insert(s->key(g)).second);
    return true;
  });
  CHECK(static_cast<double>(keys.size()) == s->canonical_size());
  // The rule plans of both orders are in the portfolio, and fit (each pool on one type).
  std::set<bool> orders;
  for (const auto& r : portfolio_genes(*s)) {
    const Plan p = s->decode(r.genes);
    CHECK(check_plan(p, m, *c).feasible());
    orders.insert(p.decode_first());
  }
  CHECK(orders.size() == 2);
  // A space asked without pools is the pools space there (every colocated plan spans two types).
  SpaceOptions colocated;
  colocated.sharding = colocated.mapping = colocated.batching = false;
  CHECK(make_search_space(m, *c, default_plan(m), colocated)->decisions().front().kind == Decision::Kind::PoolSplit);
  colocated.degrees = false;
  colocated.sharding = true;
  CHECK_THROWS_AS(make_search_space(m, *c, default_plan(m), colocated), InputError);
}
