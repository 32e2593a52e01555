// tools/bench_src/bench_main.cpp — shardsim's benchmarks (run by tools/bench): scoring cost per
// plan and plans scored per second, reported as figures, never asserted.
//
// analytic: deepseek-v3 on dgx-h100:8 with the first 1,000 Azure requests and synthetic routing;
// a portfolio of feasible plans (the Megatron rule and attention-DP/EP variants) is scored one
// after the other; the median wall time per plan and plans per second are printed
// (`shardsim_bench N analytic` stops there). Then the same plans scored by the default objective,
// capacity under an SLO (`shardsim_bench capacity` runs only this), then issue 11's larger cases: wide EP on 256 GPUs,
// Mixtral's 36,000-request offline replay, random search on 256 GPUs, simulated annealing on the
// optimizer suite's 256-GPU problem, peak memory, and the same nine plans at the SimGrid tier.
// search: the plan-search driver on mixtral-8x7b / dgx-h100:2 (200 Azure requests offline,
// analytic tier): the same runs with 1 and 2 TBB threads — simulated evaluations per second,
// the speed-up, the cache hit rate and the wall time. `shardsim_bench search` runs only this.
// accuracy: issue 11's reference set, the fast path against the exact one (tools/bench_src/accuracy.hpp).
// objective [PLANS [PROBLEMS [TRUTH_SEEDS]]]: the default objective against ground truth (tools/bench_src/objective.hpp).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tools/bench_src/accuracy.hpp"
#include "tools/bench_src/objective.hpp"
#include "optimizers/space/megatron_portfolio.hpp"
#include "optimizers/search/search_driver.hpp"
#include "optimizers/space/serving_evaluator.hpp"
#include "sim/step/analytic_executor.hpp"
#include "sim/simgrid/fidelity.hpp"
#include "sim/step/lowering.hpp"
#include "sim/simgrid/simgrid_executor.hpp"
#include "common/worker_pool.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"
#include "sim/serving/serving.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

// SimGrid tier: the nine plans of the analytic table scored at simgrid fidelity with one worker
// (issue 11: median ≤ 0.3 s, max ≤ 1 s), the Megatron plan with two workers, and the throughput of
// SimGrid step evaluations (16 representative-layer decode steps) through each pool.
static void bench_simgrid(WorkerPool& one, WorkerPool& two, const ModelSpec& m, const Cluster& c, const RequestTrace& t,
                          const RoutingSource* routing, const std::vector<std::string>& texts) {
  std::printf("\nsimgrid tier: deepseek-v3 on dgx-h100:8, %zu Azure requests, 1 worker (targets median ≤ 0.3 s, max ≤ 1 s)\n",
              t.requests.size());
  std::printf("%-38s %9s %9s %9s %13s\n", "plan", "wall s", "executed", "SimGrid", "ratio median");
  // Scores `text` through `pool`: wall seconds, and the result and report.
  auto score = [&](WorkerPool& pool, const std::string& text, ServingResult& r, FidelityReport& fr) {
    Plan p = plan_from_string(text, c.num_gpus(), plan_defaults(m));
    auto runner = make_pool_runner(pool);
    auto t0 = std::chrono::steady_clock::now();
    r = serve_at_fidelity(Tier::Simgrid, p, m, c, "dgx-h100:8", t, routing, ServingOptions{}, runner.get(), fr);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> walls;
  for (const auto& text : texts) {
    ServingResult r;
    FidelityReport fr;
    walls.push_back(score(one, text, r, fr));
    std::printf("%-38s %9.3f %9ld %9ld %13.3f\n", text.c_str(), walls.back(), r.breakdown.executed_steps,
                fr.sampled_steps, fr.ratio_median);
  }
  std::sort(walls.begin(), walls.end());
  if (!walls.empty())
    std::printf("median %.3f s, max %.3f s per plan (targets ≤ 0.3 s, ≤ 1 s)\n", walls[walls.size() / 2], walls.back());
  ServingResult r;
  FidelityReport fr;
  const double wall_two = score(two, texts.front(), r, fr);
  std::printf("  %s with %d worker(s): %.3f s (%ld SimGrid steps)\n", texts.front().c_str(), two.size(), wall_two,
              fr.sampled_steps);
  LoweringOptions lo;
  lo.only_layers = {0, 3, 30};
  const Plan p = plan_from_string(texts.front(), c.num_gpus(), plan_defaults(m));
  Lowering low(p, m, c, routing, 0, lo);
  std::vector<StepProgram> programs;
  for (int i = 0; i < 16; ++i) {
    ReplicaBatch b;
    b.groups.resize(1);
    for (int q = 0; q < 32 + 16 * i; ++q)
      b.groups[0].push_back(SeqWork{static_cast<std::uint32_t>(q), 500, 1, 500, true, 0});
    programs.push_back(low.lower(b));
  }
  double rate[2];
  int k = 0;
  for (WorkerPool* pool : {&one, &two}) {
    auto runner = make_pool_runner(*pool);
    runner->run("dgx-h100:8", {programs.front()});  // warm: platform built in each worker once
    runner->run("dgx-h100:8", programs);
    auto t0 = std::chrono::steady_clock::now();
    for (int rep = 0; rep < 3; ++rep) runner->run("dgx-h100:8", programs);
    double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rate[k++] = 3 * 16 / w;
    std::printf("  %d worker(s): %.1f SimGrid step evaluations/s\n", pool->size(), 3 * 16 / w);
  }
  std::printf("  scaling 2 vs 1 workers: %.2f× (target ≥ 1.7×)\n", rate[1] / rate[0]);
}

// One decode step of the ~1.6T MoE on 1,024 GPUs, every layer, in SimGrid (full fidelity), in
// this process: wall time and peak memory. The step program covers one replica (its pp × unit GPUs).
static void bench_full_step(const std::string& plan_text, int seqs) {
  ModelSpec m = load_model("moe-1.6t");
  Cluster c = load_cluster("dgx-h100:128");
  Plan p = plan_from_string(plan_text, c.num_gpus(), plan_defaults(m));
  auto routing = make_routing("synthetic:seed=1", m.routing_shape());
  Lowering low(p, m, c, routing.get());
  ReplicaBatch b;
  b.groups.resize(static_cast<std::size_t>(p.deg.attn_dp));
  for (int q = 0; q < seqs; ++q)
    b.groups[static_cast<std::size_t>(q % p.deg.attn_dp)].push_back(SeqWork{static_cast<std::uint32_t>(q), 1000, 1, 1000, true, 0});
  StepProgram prog = low.lower(b);
  SimgridExecutor ex(c);
  auto t0 = std::chrono::steady_clock::now();
  StepTiming t = ex.run(prog);
  double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  AnalyticExecutor an(c);
  double a = an.run(prog).makespan;
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("  %-40s %6d ranks %8zu ops  %7.2f s wall  step %.1f ms (analytic %.1f ms)  peak RSS %.2f GB\n",
              plan_to_string(p).c_str(), prog.num_ranks(), prog.ops.size(), w, t.makespan * 1e3, a * 1e3,
              static_cast<double>(ru.ru_maxrss) / 1e6);
}

// The machine's own ceiling: a pure-compute loop split over 1 and 2 threads (no shared data).
static double compute_ceiling() {
  auto spin = [](long n) {
    double s = 0;
    for (long k = 0; k < n; ++k) s += static_cast<double>(k) * 1e-9;
    return s;
  };
  const long n = 400'000'000;
  volatile double sink = 0;
  auto t0 = std::chrono::steady_clock::now();
  sink = sink + spin(n);
  double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t0 = std::chrono::steady_clock::now();
  double a = 0;
  std::thread th([&] { a = spin(n / 2); });
  double b = spin(n / 2);
  th.join();
  sink = sink + a + b;
  double two = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return one / two;
}

static double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1e3;
}

// Scores each plan once at the analytic tier and prints wall time, steps and how they were made.
static std::vector<double> score_plans(const ModelSpec& m, const Cluster& c, const RequestTrace& t,
                                       const RoutingSource* routing, const std::vector<std::string>& texts, bool offline) {
  AnalyticExecutor ex(c);
  std::vector<double> ms;
  if (routing != nullptr) {  // once per routing source, shared by every plan scored with it: timed apart
    auto t0 = std::chrono::steady_clock::now();
    routing->pick_shares();
    std::printf("routing source's population shares (RoutingSource::pick_shares, once per source): %.1f ms\n",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("%-38s %9s %9s %9s %9s %10s %13s\n", "plan", "wall ms", "steps", "executed", "w/chunks", "forwarded",
              "output tok/s");
  for (const auto& text : texts) {
    Plan p = plan_from_string(text, c.num_gpus(), plan_defaults(m));
    if (!check_plan(p, m, c).feasible()) {
      std::printf("%-38s infeasible, skipped\n", text.c_str());
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    ServingOptions o;
    o.offline = offline;
    ServingResult r = serve(p, m, c, t, routing, ex, o);
    Metrics mt = summarize(r, o, c.num_gpus());
    double w = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ms.push_back(w);
    std::printf("%-38s %9.1f %9ld %9ld %9ld %10ld %13.0f\n", text.c_str(), w, r.breakdown.steps, r.breakdown.executed_steps,
                r.breakdown.executed_chunk_steps, r.breakdown.forwarded_steps, mt.output_tok_s);
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

// The default objective's cost (issue 39: median ≤ 50 ms, max ≤ 200 ms): the nine plans scored by
// their capacity under p99 TTFT ≤ 2 s and p99 TPOT ≤ 200 ms at the analytic tier, one thread,
// with the serving runs each evaluation cost (capacity.hpp).
static void bench_capacity(const ModelSpec& m, const Cluster& c, const RequestTrace& t, const RoutingSource* routing,
                           const std::vector<std::string>& texts) {
  const RequestTrace azure = load_request_trace("azure-conv");
  EvaluatorInputs in;
  in.model = &m;
  in.cluster = &c;
  in.cluster_spec = "dgx-h100:8";
  in.trace = &t;
  in.population = &azure;
  in.routing = routing;
  in.goal = parse_slo_goal("p99", 2.0, 0.2, "bench");
  in.objective = Objective::Capacity;
  const ServingEvaluator eval(in);
  std::printf("\nthe default objective (capacity under %s, the whole Azure trace), analytic tier, one thread\n"
              "(targets median ≤ 50 ms, max ≤ 200 ms)\n", in.goal.describe().c_str());
  std::printf("%-38s %9s %9s %6s %8s %8s %10s %10s %9s\n", "plan", "wall ms", "req/s", "runs", "stopped", "probe n", "saturated n",
              "simulated", "executed");
  std::vector<double> ms;
  long totals[3] = {0, 0, 0};
  for (const auto& text : texts) {
    Plan p = plan_from_string(text, c.num_gpus(), plan_defaults(m));
    if (!check_plan(p, m, c).feasible()) continue;
    auto t0 = std::chrono::steady_clock::now();
    const SloCapacity cap = eval.capacity(p);
    const double w = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ms.push_back(w);
    std::printf("%-38s %9.0f %9.1f %6d %8d %8ld %10ld %10ld %9ld\n", text.c_str(), w, cap.rate, cap.runs(), cap.stopped_probes(),
                cap.probe_requests, cap.saturated.requests, cap.simulated_requests + cap.saturated.simulated_requests,
                cap.executed_steps + cap.saturated.executed_steps);
    // Where its simulated requests went: the backlog runs, the probes that met the goal (each runs
    // whole) and those that missed it (most stop as soon as their misses decide it); then the probes
    // in order: rate, + met / e met with too few turnovers, replayed longer / x stopped / - missed at
    // the end, the requests each admitted, and for
    // one that met, the share of the goal it used (how far the bisection still had to climb).
    long met = 0, missed = 0;
    for (const auto& pr : cap.probe_log) (pr.met || pr.extended ? met : missed) += pr.simulated;
    std::printf("    simulated: %ld in %d backlog runs, %ld in probes that met, %ld in probes that missed; probes:",
                cap.saturated.simulated_requests, cap.saturated.runs, met, missed);
    for (const auto& pr : cap.probe_log) {
      std::printf(" %.1f%s%ld", pr.rate, pr.met ? "+" : pr.extended ? "e" : pr.stopped ? "x" : "-", pr.simulated);
      if (pr.met || pr.extended) std::printf("(%.2f)", pr.load);
    }
    std::printf("\n");
    totals[0] += cap.saturated.simulated_requests;
    totals[1] += met;
    totals[2] += missed;
  }
  std::sort(ms.begin(), ms.end());
  if (!ms.empty()) std::printf("median %.0f ms, max %.0f ms per plan\n", ms[ms.size() / 2], ms.back());
  const double all = static_cast<double>(totals[0] + totals[1] + totals[2]);
  if (all > 0)
    std::printf("of the requests simulated: %.0f%% in backlog runs, %.0f%% in probes that met the goal, %.0f%% in probes that missed it\n",
                100.0 * static_cast<double>(totals[0]) / all, 100.0 * static_cast<double>(totals[1]) / all,
                100.0 * static_cast<double>(totals[2]) / all);
  std::printf("(simulated: requests the runs admitted — one replica's share where one stands for its alike ones, a\n"
              " stopped probe's up to its stop; executed: steps lowered and run, the rest memoised, fitted or fast-forwarded)\n");
}

// deepseek-v3 on 256 GPUs (wide EP), Mixtral's long offline replay, and search on 256 GPUs.
static void bench_large() {
  ModelSpec ds = load_model("deepseek-v3");
  Cluster c256 = load_cluster("dgx-h100:32");
  RequestTrace azure = head(load_request_trace("azure-conv"), 1000);
  auto routing = make_routing("synthetic:seed=1", ds.routing_shape());
  std::printf("\nanalytic scoring: deepseek-v3 on dgx-h100:32 (256 GPUs), 1,000 Azure requests, wide EP (target ≤ 200 ms)\n");
  auto ms = score_plans(ds, c256, azure, routing.get(),
                        {"tp=1,attn_dp=64,ep=64,dp=4", "tp=1,attn_dp=128,ep=128,dp=2", "tp=1,attn_dp=32,ep=32,pp=2,dp=4"}, false);
  if (!ms.empty()) std::printf("max %.1f ms\n", ms.back());

  ModelSpec mx = load_model("mixtral-8x7b");
  Cluster c8 = load_cluster("dgx-h100:1");
  RequestTrace big = load_request_trace("synthetic:n=36000,prompt=lognormal:222:0.6,output=lognormal:290:0.5,seed=1");
  auto mrouting = make_routing("synthetic:seed=1", mx.routing_shape());
  std::printf("\nanalytic scoring: mixtral-8x7b on 8 GPUs, 36,000 requests offline (target ≤ 300 ms)\n");
  score_plans(mx, c8, big, mrouting.get(), {"tp=2,dp=4", "tp=8"}, true);

  EvaluatorInputs in;
  in.model = &ds;
  in.cluster = &c256;
  in.cluster_spec = "dgx-h100:32";
  RequestTrace t200 = head(load_request_trace("azure-conv"), 200);
  in.trace = &t200;
  in.routing = routing.get();
  in.objective = Objective::Drain;  // scoring speed, on the objective its earlier figures used
  ServingEvaluator eval(in);
  Plan base = default_plan(ds);
  PoolSpace space(ds, c256, base);
  SearchSettings st;
  st.budget = 60;
  st.threads = 1;
  auto t0 = std::chrono::steady_clock::now();
  SearchOutcome out = run_search(space, eval, {{"random", 1, 0}}, st);
  double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\nsearch: random, deepseek-v3 on 256 GPUs, 200 Azure requests, analytic, 1 thread: %ld simulated in %.1f s "
              "= %.1f evaluations/s (target ≥ 30)\n",
              out.computed, w, static_cast<double>(out.computed) / w);

  // What bounds the optimizer suite (tools/bench-optimizers, docs/rl.md): a search that climbs to
  // good plans — large batches, so every executed step routes hundreds of tokens — on the suite's
  // 256-GPU problem (300 Azure requests offline).
  RequestTrace t300 = head(load_request_trace("azure-conv"), 300);
  in.trace = &t300;
  in.serving.offline = true;
  ServingEvaluator suite_eval(in);
  st.budget = 30;
  t0 = std::chrono::steady_clock::now();
  out = run_search(space, suite_eval, {{"sa", 1, 0}}, st);
  w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("search: sa, deepseek-v3 on 256 GPUs, 300 Azure requests offline (the suite's ds256), 1 thread: %ld simulated "
              "in %.1f s = %.1f evaluations/s\n",
              out.computed, w, static_cast<double>(out.computed) / w);
  std::printf("peak memory of this process so far: %.0f MB (target ≤ 500 MB)\n", peak_rss_mb());
}

static void bench_search() {
  ModelSpec m = load_model("mixtral-8x7b");
  Cluster c = load_cluster("dgx-h100:2");
  RequestTrace t = head(load_request_trace("azure-conv"), 200);
  auto routing = make_routing("synthetic:seed=1", m.routing_shape());
  EvaluatorInputs in;
  in.model = &m;
  in.cluster = &c;
  in.cluster_spec = "dgx-h100:2";
  in.trace = &t;
  in.routing = routing.get();
  in.serving.offline = true;
  in.objective = Objective::Drain;  // the driver's speed, on the objective its earlier figures used
  ServingEvaluator eval(in);
  Plan base = default_plan(m);
  PoolSpace space(m, c, base);
  auto rules = portfolio_genes(space);
  SearchSettings st;
  st.budget = 60;
  for (const auto& r : rules) st.portfolio.push_back(r.genes);
  std::vector<SearchRun> runs;
  for (const auto& name : optimizer_names())
    if (name != "exhaustive" && name != "megatron")
      for (std::uint64_t seed = 1; seed <= 2; ++seed) runs.push_back({name, seed, 0, {}});
  std::printf("\nsearch driver: mixtral-8x7b on dgx-h100:2, 200 requests offline, analytic tier, %zu runs × %ld evaluations\n",
              runs.size(), st.budget);
  std::printf("%8s %10s %12s %12s %14s %10s\n", "threads", "wall s", "evaluations", "simulated", "simulated/s", "cache hit");
  const double ceiling = compute_ceiling();  // before TBB's workers exist (they spin when idle)
  double rate1 = 0;
  for (int threads : {1, 2}) {
    st.threads = threads;
    auto t0 = std::chrono::steady_clock::now();
    SearchOutcome out = run_search(space, eval, runs, st);
    double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double rate = static_cast<double>(out.computed) / w;
    if (threads == 1) rate1 = rate;
    std::printf("%8d %10.2f %12ld %12ld %14.1f %9.1f%%\n", threads, w, out.evaluations, out.computed, rate,
                100.0 * static_cast<double>(out.cache_hits) / static_cast<double>(out.evaluations));
    if (threads == 2)
      std::printf("speed-up with 2 threads: %.2f× (target ≥ 1.7×); this machine's ceiling (pure compute, 2 threads): %.2f×\n",
                  rate / rate1, ceiling);
  }
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "accuracy") {
    bench_accuracy(argc > 2 ? argv[2] : "", argc > 3 ? std::atoi(argv[3]) : 1);
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "search") {
    bench_search();
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "objective") {  // objective [PLANS [PROBLEMS [TRUTH_SEEDS]]]
    bench_objective(argc > 2 ? std::atoi(argv[2]) : 50, argc > 3 ? argv[3] : "3", argc > 4 ? std::atoi(argv[4]) : 3);
    return 0;
  }
  // Worker pools fork their zygotes first, before any thread exists.
  WorkerPool one(1, simgrid_worker_handler), two(2, simgrid_worker_handler);
  // [N [analytic]] or analytic: N requests (1,000), only the 9-plan table with "analytic".
  const std::string first = argc > 1 ? argv[1] : "";
  const bool only_analytic = first == "analytic" || (argc > 2 && std::string(argv[2]) == "analytic");
  const bool only_capacity = first == "capacity";
  if (!first.empty() && first != "analytic" && first != "capacity" && first.find_first_not_of("0123456789") != std::string::npos) {
    std::fprintf(stderr, "usage: shardsim_bench [N [analytic]] | analytic | capacity [FILTER [ITEMS]] | accuracy [FILTER] | search | objective [PLANS [PROBLEMS]]\n");
    return 2;
  }
  int requests = !first.empty() && first != "analytic" && first != "capacity" ? std::atoi(first.c_str()) : 1000;
  ModelSpec m = load_model("deepseek-v3");
  Cluster c = load_cluster("dgx-h100:8");
  RequestTrace t = head(load_request_trace("azure-conv"), static_cast<std::size_t>(requests));
  auto routing = make_routing("synthetic:seed=1", m.routing_shape());
  std::vector<std::string> texts = {"tp=8,pp=2,ep=8,dp=4",         "tp=8,ep=8,pp=4,dp=2",   "tp=1,attn_dp=8,ep=8,pp=2,dp=4",
                                    "tp=1,attn_dp=16,ep=16,dp=4",  "tp=1,attn_dp=32,ep=32,dp=2", "tp=2,attn_dp=8,ep=16,dp=4",
                                    "tp=4,attn_dp=4,ep=16,dp=4",   "tp=1,attn_dp=64,ep=64",       "tp=8,ep=8,pp=8"};
  if (only_capacity && argc > 2)  // capacity FILTER: only the plans whose text holds FILTER
    std::erase_if(texts, [&](const std::string& x) { return x.find(argv[2]) == std::string::npos; });
  if (only_capacity && argc > 3)  // capacity FILTER ITEMS: ITEMS (",limits=rank") added to each plan
    for (auto& x : texts) x += argv[3];
  std::printf("analytic scoring: deepseek-v3 on dgx-h100:8, %d Azure requests, synthetic routing\n", requests);
  std::vector<double> ms = score_plans(m, c, t, routing.get(), texts, false);
  double total = 0;
  for (double x : ms) total += x;
  if (!ms.empty())
    std::printf("\nmedian %.1f ms, max %.1f ms per plan (targets ≤ 20 ms, ≤ 100 ms), %.2f plans/s on one core; peak memory %.0f MB\n",
                ms[ms.size() / 2], ms.back(), 1000.0 * static_cast<double>(ms.size()) / total, peak_rss_mb());
  if (only_capacity) {
    bench_capacity(m, c, t, routing.get(), texts);
    return 0;
  }
  if (only_analytic) return 0;
  bench_capacity(m, c, t, routing.get(), texts);
  bench_large();
  bench_simgrid(one, two, m, c, t, routing.get(), texts);
  std::printf("\nfull fidelity: one decode step of moe-1.6t on dgx-h100:128 (target ≤ 10 s, ≤ 2 GB)\n");
  bench_full_step("tp=8,ep=8,pp=4,dp=32", 256);
  bench_full_step("tp=1,attn_dp=64,ep=64,pp=2,dp=8,kv=fp8", 1024);
  bench_search();
  return 0;
}
