// tests/optimizers/search_driver_test.cpp — the budget wrapper, the TBB driver (equal budgets, shared cache,
// the same results at any thread count), the serving evaluator and the output files.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/input_error.hpp"
#include "optimizers/report/anytime_plot.hpp"
#include "optimizers/space/megatron_portfolio.hpp"
#include "optimizers/search/search_driver.hpp"
#include "optimizers/report/search_report.hpp"
#include "optimizers/space/serving_evaluator.hpp"
#include "optimizers/algorithms/simple_optimizers.hpp"
#include "optimizers/report/statistics.hpp"
#include "sim/plan/plan_check.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

// A deterministic stand-in for the simulator: rewards tp = 4, ep = 8 and column-sharded QKV.
class FakeEvaluator : public Evaluator {
 public:
  Score evaluate(const Plan& p) const override {
    Score s;
    s.feasible = true;
    s.objective = 100.0 - 10.0 * std::abs(std::log2(p.deg.tp) - 2) - 5.0 * std::abs(std::log2(p.deg.ep) - 3) +
                  (p.shard(Op::Qkv) == Shard::Column ? 3 : 0) + 0.01 * p.engine.max_seqs / 32.0;
    return s;
  }
  ThreadSafety thread_safety() const override { return ThreadSafety::Constant; }
  std::string objective_unit() const override { return "points"; }
};

// An optimizer that misbehaves: proposes a genome out of range.
class BadOptimizer : public Optimizer {
 public:
  std::vector<Genes> ask(int) override { return {Genes{99}}; }
  void tell(const std::vector<Evaluated>&) override {}
};

}  // namespace

TEST_CASE("driver: every run spends exactly its budget and the results do not depend on the thread count") {
  ModelSpec m = load_model("mixtral-8x7b");
  std::unique_ptr<Cluster> c(new Cluster(load_cluster("dgx-h100:2")));
  PoolSpace space(m, *c, default_plan(m));
  FakeEvaluator eval;
  auto rules = portfolio_genes(space);
  SearchSettings st;
  st.budget = 40;
  for (const auto& r : rules) st.portfolio.push_back(r.genes);
  std::vector<SearchRun> runs = {{"megatron", 1, static_cast<long>(rules.size())}, {"random", 1, 0}, {"random", 2, 0}};
  st.threads = 1;
  SearchOutcome one = run_search(space, eval, runs, st);
  st.threads = 2;
  SearchOutcome two = run_search(space, eval, runs, st);
  REQUIRE(one.runs.size() == 3);
  CHECK(one.runs[0].evaluations == static_cast<long>(rules.size()));
  CHECK(one.runs[1].evaluations == 40);
  CHECK(one.runs[2].evaluations == 40);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    CHECK(one.runs[i].anytime == two.runs[i].anytime);
    CHECK(one.runs[i].best.genes == two.runs[i].best.genes);
    REQUIRE(one.runs[i].history.size() == two.runs[i].history.size());
    for (std::size_t k = 0; k < one.runs[i].history.size(); ++k) CHECK(one.runs[i].history[k].genes == two.runs[i].history[k].genes);
  }
  // Different seeds propose different plans; the cache accounts for every evaluation.
  CHECK(one.runs[1].history[0].genes != one.runs[2].history[0].genes);
  CHECK(one.evaluations == one.computed + one.cache_hits);
  // Anytime curves never decrease.
  for (const auto& r : one.runs)
    for (std::size_t k = 1; k < r.anytime.size(); ++k) CHECK(r.anytime[k] >= r.anytime[k - 1]);
}

TEST_CASE("driver: the budget wrapper refuses genomes out of range and an exhaustive run larger than its budget") {
  ModelSpec m = load_model("mixtral-8x7b");
  std::unique_ptr<Cluster> c(new Cluster(load_cluster("dgx-h100:1")));
  PoolSpace space(m, *c, default_plan(m));
  BudgetedOptimizer bad("bad", std::make_unique<BadOptimizer>(), space, 5);
  CHECK_THROWS_AS(bad.ask(), std::logic_error);
  OptimizerContext ctx{&space, 1, 100, {}, nullptr};
  CHECK_THROWS_WITH_AS(ExhaustiveOptimizer{ctx}, doctest::Contains("distinct plans, more than the budget of 100"), InputError);
  OptimizerParams p = OptimizerParams::parse("random.batch=0", "--param");
  ctx.params = &p;
  CHECK_THROWS_WITH_AS(make_optimizer("random", ctx), doctest::Contains("random.batch"), InputError);
  CHECK_THROWS_WITH_AS(make_optimizer("hillclimb", ctx), doctest::Contains("unknown optimizer"), InputError);
}

namespace {

// Mixtral-8x7B's degree and batching space on `cluster`, the fake evaluator, and search settings
// with `budget`, 2 threads and the Megatron portfolio.
struct DegreeWorld {
  DegreeWorld(const std::string& cluster, long budget)
      : m(load_model("mixtral-8x7b")), c(new Cluster(load_cluster(cluster))), space(m, *c, default_plan(m), options()),
        rules(portfolio_genes(space)) {
    st.budget = budget;
    st.threads = 2;
    for (const auto& r : rules) st.portfolio.push_back(r.genes);
  }
  static SpaceOptions options() {
    SpaceOptions o;
    o.sharding = o.mapping = false;
    return o;
  }
  ModelSpec m;
  std::unique_ptr<Cluster> c;
  PoolSpace space;
  std::vector<RuleGenes> rules;
  FakeEvaluator eval;
  SearchSettings st;
};

}  // namespace

TEST_CASE("driver: exhaustive finds the best plan of a small space and the others are compared to it") {
  DegreeWorld w("dgx-h100:1", 20);
  auto& [m, c, space, rules, eval, st] = w;
  const long size = static_cast<long>(space.canonical_size());
  std::vector<SearchRun> runs = {{"exhaustive", 1, size}, {"megatron", 1, static_cast<long>(rules.size())}, {"random", 1, 0}};
  SearchOutcome out = run_search(space, eval, runs, st);
  // The optimum by brute force over the same space.
  double best = 0;
  space.for_each_canonical([&](const Genes& g) {
    if (space.check(g).feasible()) best = std::max(best, eval.evaluate(space.decode(g)).objective);
    return true;
  });
  CHECK(out.runs[0].evaluations == size);
  CHECK(out.runs[0].best.score.objective == doctest::Approx(best));
  SearchReport rep = summarize_search(out, rules, space);
  CHECK(rep.optimum == doctest::Approx(best));
  CHECK(rep.best_known == doctest::Approx(best));
  REQUIRE(rep.optimizers.size() == 3);
  CHECK(rep.optimizers[0].vs_optimum == doctest::Approx(1.0));
  CHECK(rep.optimizers[1].vs_megatron == doctest::Approx(1.0));
  CHECK(rep.optimizers[2].vs_optimum <= 1.0);
  CHECK(evals_to_reach({0, 5, 5, 9, 10}, 9.5) == 5);
  CHECK(evals_to_reach({0, 5}, 9.5) == -1);
}

TEST_CASE("driver: a search on the real evaluator writes results a user can feed back to simulate") {
  ModelSpec m = load_model("mixtral-8x7b");
  std::unique_ptr<Cluster> c(new Cluster(load_cluster("dgx-h100:1")));
  RequestTrace trace = head(load_request_trace("azure-conv"), 40);
  auto routing = make_routing("synthetic:seed=3", m.routing_shape());
  EvaluatorInputs in;
  in.model = &m;
  in.cluster = c.get();
  in.cluster_spec = "dgx-h100:1";
  in.trace = &trace;
  in.routing = routing.get();
  in.serving.offline = true;
  in.objective = Objective::Drain;  // the driver is the subject: the cheap objective
  ServingEvaluator eval(in);
  SpaceOptions o;
  o.sharding = o.mapping = o.batching = false;
  PoolSpace space(m, *c, default_plan(m), o);
  auto rules = portfolio_genes(space);
  SearchSettings st;
  st.budget = 6;
  st.threads = 2;
  for (const auto& r : rules) st.portfolio.push_back(r.genes);
  SearchOutcome out = run_search(space, eval, {{"megatron", 1, static_cast<long>(rules.size())}, {"random", 1, 0}}, st);
  SearchReport rep = summarize_search(out, rules, space);
  REQUIRE(rep.best_known > 0);
  CHECK(rep.megatron_best > 0);
  CHECK_FALSE(rep.megatron_rule.empty());
  std::string md = summary_markdown(rep, out, space, rules, eval.objective_unit(), "test", st.budget);
  CHECK(md.find("| megatron | 1 |") != std::string::npos);
  auto dir = std::filesystem::temp_directory_path() / ("shardsim-search-" + std::to_string(::getpid()));
  write_search_outputs(dir.string(), json{{"test", true}}, rep, out, space, eval.objective_unit(), md, st.budget);
  for (const char* f : {"results.json", "anytime.csv", "summary.md", "anytime.gp", "best-plan.json"})
    CHECK(std::filesystem::exists(dir / f));
  json results = json::parse(std::ifstream(dir / "results.json"));
  CHECK(results["runs"].size() == 2);
  CHECK(results["runs"][0]["optimizer"] == "megatron");
  CHECK(results["runs"][1]["evaluations"] == 6);
  // The best plan loads as a plan file and is feasible.
  Plan best = load_plan((dir / "best-plan.json").string(), m, *c);
  CHECK(check_plan(best, m, *c).feasible());
  CHECK(eval.evaluate(best).objective == doctest::Approx(rep.best_known));
  // anytime.csv: a header and one row per evaluation.
  std::ifstream csv(dir / "anytime.csv");
  long rows = -1;
  for (std::string line; std::getline(csv, line);) ++rows;
  CHECK(rows == out.evaluations);
  std::filesystem::remove_all(dir);
}

TEST_CASE("report statistics: intervals, success rates, and tests against the reference with Holm and A12") {
  DegreeWorld w("dgx-h100:2", 12);
  auto& [m, c, space, rules, eval, st] = w;
  std::vector<SearchRun> runs = {{"megatron", 1, static_cast<long>(rules.size())}};
  for (std::uint64_t s = 1; s <= 5; ++s) runs.push_back({"random", s, 0, {}});
  for (std::uint64_t s = 1; s <= 5; ++s) runs.push_back({"sa", s, 0, {}});
  OptimizerParams params;
  st.params = &params;
  SearchOutcome out = run_search(space, eval, runs, st);
  SearchReport rep = summarize_search(out, rules, space, "random", 7);
  CHECK(rep.reference == "random");
  REQUIRE(rep.optimizers.size() == 3);
  const OptimizerSummary& meg = rep.optimizers[0];
  const OptimizerSummary& ref = rep.optimizers[1];
  const OptimizerSummary& sa = rep.optimizers[2];
  CHECK_FALSE(meg.test.done);  // deterministic: one run, no test
  CHECK_FALSE(ref.test.done);  // the reference itself
  REQUIRE(sa.test.done);
  // The test's figures are those of the statistics module on the runs' best objectives.
  std::vector<double> a, b;
  for (const auto& r : out.runs) {
    if (r.optimizer == "sa") a.push_back(r.best.score.objective);
    if (r.optimizer == "random") b.push_back(r.best.score.objective);
  }
  REQUIRE(a.size() == 5);
  CHECK(sa.test.u == doctest::Approx(mann_whitney(a, b).u));
  CHECK(sa.test.p == doctest::Approx(mann_whitney(a, b).p));
  CHECK(sa.test.p_holm == doctest::Approx(sa.test.p));  // one comparison: Holm changes nothing
  CHECK(sa.test.a12 == doctest::Approx(a12(a, b)));
  CHECK(sa.median_interval.lo <= sa.median);
  CHECK(sa.median_interval.hi >= sa.median);
  CHECK(sa.reached_95 <= sa.seeds);
  const std::string md = summary_markdown(rep, out, space, rules, "points", "test", st.budget);
  CHECK(md.find("## Statistics over seeds") != std::string::npos);
  CHECK(md.find("| random | 5 |") != std::string::npos);
  CHECK(md.find("the reference |") != std::string::npos);
  // The plot: one band per stochastic optimizer (q1 ≤ median ≤ q3 at every point), its fixed colour.
  const std::string gp = anytime_gnuplot(rep, out, "points", st.budget, true);
  CHECK(gp.find("set logscale x") != std::string::npos);
  CHECK(gp.find("lc rgb '" + optimizer_colour("sa") + "' title 'sa'") != std::string::npos);
  CHECK(optimizer_colour("sa") != optimizer_colour("random"));
  CHECK(optimizer_colour("my-optimizer") == optimizer_colour("my-optimizer"));
  const std::string head = "$band1 << EOD\n";  // sa's
  std::istringstream lines(gp.substr(gp.find(head) + head.size()));
  std::string line;
  int rows = 0;
  while (std::getline(lines, line) && line != "EOD") {
    double x = 0, q1 = 0, med = 0, q3 = 0;
    std::istringstream(line) >> x >> q1 >> med >> q3;
    CHECK(q1 <= med);
    CHECK(med <= q3);
    ++rows;
  }
  CHECK(rows == st.budget);
  // The runtime ECDF pools five targets per run: its steps rise from 0, never past 1, one step per
  // (run, target) pair reached, and what it ends at is the share of pairs reached.
  const std::string ecdf_head = "$ecdf1 << EOD\n";  // sa's
  std::istringstream ecdf(gp.substr(gp.find(ecdf_head) + ecdf_head.size()));
  std::vector<double> fractions;
  while (std::getline(ecdf, line) && line != "EOD") {
    double x = 0, f = -1;
    std::istringstream(line) >> x >> f;
    fractions.push_back(f);
  }
  REQUIRE(fractions.size() >= 2);
  CHECK(fractions.front() == 0);
  CHECK(std::is_sorted(fractions.begin(), fractions.end()));
  int reached = 0;
  for (const auto& r : out.runs)
    if (r.optimizer == "sa")
      for (double f : {0.95, 0.98, 0.99, 0.995, 1.0}) reached += evals_to_reach(r.anytime, f * rep.best_known) > 0;
  CHECK(fractions.back() == doctest::Approx(reached / 25.0));
  CHECK(fractions.size() == static_cast<std::size_t>(reached) + 2);
  CHECK(gp.find("set yrange [") != std::string::npos);  // zoomed to where the optimizers end
  // The same outcome summarised again gives the same intervals (the bootstrap is seeded).
  SearchReport again = summarize_search(out, rules, space, "random", 7);
  CHECK(again.optimizers[2].median_interval.lo == sa.median_interval.lo);
  CHECK(again.optimizers[2].median_interval.hi == sa.median_interval.hi);
}

TEST_CASE("driver: an outside optimizer's run (a script) is replayed like a built-in run, and may not take a built-in name") {
  ModelSpec m = load_model("mixtral-8x7b");
  std::unique_ptr<Cluster> c(new Cluster(load_cluster("dgx-h100:2")));
  PoolSpace space(m, *c, default_plan(m));
  FakeEvaluator eval;
  SearchSettings st;
  st.budget = 12;
  st.threads = 2;
  // A random run's proposals, handed to a scripted run: the same plans give the same curve.
  const SearchOutcome a = run_search(space, eval, {{"random", 4, 0, {}}}, st);
  std::vector<Genes> script;
  for (const auto& e : a.runs[0].history) script.push_back(e.genes);
  script.resize(7);  // an outside run may stop short of its budget
  const SearchOutcome b = run_search(space, eval, {{"my-method", 1, 0, script}}, st);
  REQUIRE(b.runs.size() == 1);
  CHECK(b.runs[0].evaluations == 7);
  CHECK(b.runs[0].complete);
  CHECK(b.runs[0].anytime == std::vector<double>(a.runs[0].anytime.begin(), a.runs[0].anytime.begin() + 7));
  CHECK_THROWS_AS(run_search(space, eval, {{"ga", 1, 0, script}}, st), InputError);
}

TEST_CASE("anytime.gp: an optimizer's name is a quoted title, never gnuplot code (a name cannot run a command)") {
  const std::string evil = "x' . `touch PWNED` . '\nsystem('touch PWNED2')";
  SearchReport rep;
  rep.best_known = 3;
  rep.optimizers.push_back({});
  rep.optimizers.back().optimizer = evil;
  SearchOutcome out;
  RunRecord run;
  run.optimizer = evil;
  run.anytime = {1, 2, 3};
  out.runs.push_back(run);
  const std::string gp = anytime_gnuplot(rep, out, "tok/s", 3, false);
  CHECK(gp.find("title 'x'' . `touch PWNED` . '' system(''touch PWNED2'')'") != std::string::npos);
  CHECK(gp.find("\nsystem(") == std::string::npos);
  // Plotted by gnuplot itself where it is installed: no file appears.
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("shardsim-gp-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "anytime.gp") << gp;
  const std::string cmd = "cd '" + dir.string() + "' && gnuplot anytime.gp >/dev/null 2>&1";
  CHECK(std::system(cmd.c_str()) == 0);
  CHECK(std::filesystem::exists(dir / "anytime.png"));
  CHECK_FALSE(std::filesystem::exists(dir / "PWNED"));
  CHECK_FALSE(std::filesystem::exists(dir / "PWNED2"));
  std::filesystem::remove_all(dir);
}
