// studies/compare_runner.cpp — prepare, search and score a comparison's scenarios.
#include "studies/compare_runner.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <sstream>

#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include "common/input_error.hpp"
#include "common/text_case.hpp"
#include "optimizers/space/megatron_portfolio.hpp"
#include "optimizers/search/search_driver.hpp"
#include "optimizers/space/serving_evaluator.hpp"
#include "sim/plan/engine.hpp"
#include "sim/plan/plan_check.hpp"
#include "sim/serving/energy.hpp"
#include "studies/sim_inputs.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

namespace {

// A scenario ready to score: its loaded inputs, load, and plan (or why it has none).
struct Prepared {
  const LoadedInputs* in = nullptr;
  std::string cluster_spec;
  LoadChoice load;
  PlanChoice choice;
  std::string engine;
  Plan plan;
  bool feasible = true;
  std::string reason;
  std::string plan_source = "given";
};

// Runs `load` and rethrows its InputError as one naming the scenario source and `key`'s field.
template <class F>
auto named(const CompareSettings& s, const Scenario& sc, const std::string& key, F load) {
  try {
    return load();
  } catch (const InputError& e) {
    if (s.source == "command line") throw InputError("--" + key, e.source(), e.field().empty() ? e.reason() : e.field() + ": " + e.reason());
    throw InputError(s.source, field_of(sc, key), e.what());
  }
}

// The serving options and trace of a scenario's load.
ServingOptions serving_of(const Prepared& p, bool link_traffic) {
  ServingOptions so = p.in->serving;
  so.offline = p.load.kind == LoadChoice::Kind::Offline;
  so.concurrency = p.load.kind == LoadChoice::Kind::Clients ? static_cast<int>(p.load.value) : 0;
  so.link_traffic = link_traffic;
  return so;
}

RequestTrace trace_of(const Prepared& p, const CompareSettings& s) {
  if (p.load.kind != LoadChoice::Kind::Rate) return p.in->trace;
  return at_rate(p.in->trace, p.load.value, s.arrivals == "trace" ? Arrival::Trace : Arrival::Poisson, s.seed);
}

void set_engine(Plan& plan, const std::string& preset, const std::string& source) {
  if (preset.empty()) return;
  const int max_context = plan.engine.max_context;
  plan.engine = engine_preset(preset, source, "engine");
  plan.engine.max_context = max_context;
}

// Makes `p.plan` from a given spec (a parse error throws; infeasibility marks the scenario).
void resolve_given(Prepared& p, const Scenario& sc, const CompareSettings& s) {
  p.plan = named(s, sc, "plan", [&] { return load_plan(p.choice.spec, p.in->model, *p.in->cluster); });
  if (p.choice.spec == "megatron") p.plan_source = "Megatron rule";
  if (!sc.engine.empty() && p.plan.disaggregated()) {
    p.feasible = false;
    p.reason = "an engine preset applies to a colocated plan; set each pool's engine in the plan itself";
    return;
  }
  set_engine(p.plan, sc.engine, s.source);
  const PlanCheck chk = check_plan(p.plan, p.in->model, *p.in->cluster);
  if (!chk.feasible()) {
    p.feasible = false;
    p.reason = chk.violations.front().field + ": " + chk.violations.front().reason;
  } else if (p.plan.disaggregated() && p.load.kind == LoadChoice::Kind::Clients) {
    p.feasible = false;
    p.reason = "closed-loop clients with a disaggregated plan (offer a rate instead)";
  }
}

struct InputsCache {
  std::map<std::string, std::unique_ptr<LoadedInputs>> by_key;
  const LoadedInputs& get(const Scenario& sc, const CompareSettings& s) {
    auto& slot = by_key[sc.model + "\n" + sc.cluster];
    if (slot) return *slot;
    SimInputs in;
    in.model = sc.model;
    in.cluster = sc.cluster;
    in.trace = s.trace;
    in.requests = s.requests;
    in.routing = s.routing;
    in.slo = s.slo;
    in.seed = s.seed;
    in.exact = s.exact;
    // Model and cluster loaded apart, so that an error names the axis it came from.
    ModelSpec model = named(s, sc, "model", [&] { return load_model(sc.model); });
    std::unique_ptr<Cluster> cluster =
        named(s, sc, "cluster", [&] { return std::unique_ptr<Cluster>(new Cluster(load_cluster(sc.cluster))); });
    slot = std::make_unique<LoadedInputs>(load_inputs(in, std::move(model), std::move(cluster)));
    return *slot;
  }
};

std::vector<Prepared> prepare(const std::vector<Scenario>& scenarios, const CompareSettings& s, InputsCache& cache) {
  const auto& names = optimizer_names();
  std::vector<Prepared> out;
  for (const Scenario& sc : scenarios) {
    Prepared p;
    p.in = &cache.get(sc, s);
    p.cluster_spec = sc.cluster;
    const bool cli = s.source == "command line";
    p.load = parse_load_choice(sc.load, cli ? "--load" : s.source, cli ? "" : field_of(sc, "load"));
    p.choice = parse_plan_choice(sc.plan, cli ? "--plan" : s.source, cli ? "" : field_of(sc, "plan"));
    p.engine = sc.engine;
    if (!sc.engine.empty()) named(s, sc, "engine", [&] { return engine_preset(sc.engine, sc.engine, "engine"); });
    if (p.choice.search && std::find(names.begin(), names.end(), p.choice.optimizer) == names.end())
      throw InputError(cli ? "--plan" : s.source, cli ? sc.plan : field_of(sc, "plan"),
                       "unknown optimizer '" + p.choice.optimizer + "' (see 'shardsim search --help')");
    if (!p.choice.search) resolve_given(p, sc, s);
    out.push_back(std::move(p));
  }
  return out;
}

// What the search's and the max-rate's evaluator score `p` on: its inputs, load and `trace`.
EvaluatorInputs evaluator_inputs(const Prepared& p, const CompareSettings& s, const Scorer& scorer,
                                 const RequestTrace& trace, Objective objective) {
  EvaluatorInputs ei;
  ei.model = &p.in->model;
  ei.cluster = p.in->cluster.get();
  ei.cluster_spec = p.cluster_spec;
  ei.trace = &trace;
  ei.population = &p.in->population;
  ei.routing = p.in->routing.get();
  ei.serving = serving_of(p, false);
  ei.tier = scorer.tier();
  ei.runner = scorer.runner();
  ei.samples = scorer.samples();
  ei.objective = objective;
  ei.goal = s.slo_goal;
  ei.arrivals = s.arrivals == "trace" ? Arrival::Trace : Arrival::Poisson;
  ei.seed = s.seed;
  return ei;
}

// The best plan a search finds for `p`'s problem (scored by its capacity under the comparison's SLO
// goal, as `shardsim search` scores by default): the Megatron portfolio, then the optimizer.
void search_plan(Prepared& p, const CompareSettings& s, const Scorer& scorer) {
  const LoadedInputs& L = *p.in;
  Plan base = default_plan(L.model);
  set_engine(base, p.engine, s.source);
  const std::unique_ptr<SearchSpace> space = make_search_space(L.model, *L.cluster, base, SpaceOptions{});
  const std::vector<RuleGenes> rules = portfolio_genes(*space);
  const std::vector<SearchRun> runs = {{"megatron", 1, static_cast<long>(std::max<std::size_t>(1, rules.size())), {}},
                                       {p.choice.optimizer, s.seed, p.choice.budget, {}}};
  OptimizerParams params;
  SearchSettings st;
  st.budget = p.choice.budget;
  st.threads = s.threads;
  for (const auto& r : rules) st.portfolio.push_back(r.genes);
  st.params = &params;
  const RequestTrace trace = trace_of(p, s);
  const ServingEvaluator evaluator(evaluator_inputs(p, s, scorer, trace, Objective::Capacity));
  const SearchOutcome out = run_search(*space, evaluator, runs, st);
  const RunRecord* best = nullptr;
  for (const auto& r : out.runs)
    if (r.has_best && r.best.score.feasible && (!best || better(r.best.score, best->best.score))) best = &r;
  if (!best) {
    p.feasible = false;
    p.reason = "the search found no feasible plan in " + std::to_string(out.evaluations) + " evaluations";
    return;
  }
  p.plan = space->decode(best->best.genes);
  p.plan_source = "search: " + p.choice.optimizer + ", " + std::to_string(p.choice.budget) + " evaluations" +
                  (best->optimizer == "megatron" ? "; a Megatron rule plan won" : "");
}

std::string problem_key(const Prepared& p, const Scenario& sc) {
  return sc.model + "\n" + sc.cluster + "\n" + sc.engine + "\n" + p.load.text() + "\n" + std::to_string(p.choice.budget) + "\n" +
         p.choice.optimizer;
}

// Runs each distinct search once, then hands its plan to every scenario naming it.
void run_searches(std::vector<Prepared>& prepared, const std::vector<Scenario>& scenarios, const CompareSettings& s,
                  const Scorer& scorer) {
  std::map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    Prepared& p = prepared[i];
    if (!p.choice.search) continue;
    const std::string key = problem_key(p, scenarios[i]);
    auto [it, fresh] = first.emplace(key, i);
    if (fresh) {
      search_plan(p, s, scorer);
      continue;
    }
    const Prepared& done = prepared[it->second];
    p.plan = done.plan;
    p.feasible = done.feasible;
    p.reason = done.reason;
    p.plan_source = done.plan_source;
  }
}

// The highest Poisson rate meeting the goal (0 when none does): the plan's capacity under the SLO
// (what evaluate() scores it by), drawn from the whole trace and never above its saturated rate
// (sim/serving/capacity.hpp), and whether it is flat there.
void max_rate_of(const Prepared& p, const CompareSettings& s, const Scorer& scorer, ScenarioOutcome& o) {
  const SloCapacity c = ServingEvaluator(evaluator_inputs(p, s, scorer, p.in->trace, Objective::Capacity)).capacity(p.plan);
  o.max_rate = c.saturated.feasible && c.feasible ? c.rate : 0;
  o.max_rate_flat = o.max_rate > 0 && c.flat();
}

ScenarioOutcome score(const Prepared& p, const Scenario& sc, const CompareSettings& s, const Scorer& scorer) {
  ScenarioOutcome o;
  o.scenario = sc;
  o.gpus = p.in->cluster->num_gpus();
  const Cluster& c = *p.in->cluster;
  o.gpu = c.gpu().name;
  o.gpu_hour_usd = s.prices.of(o.gpu);
  if (c.mixed()) {  // "H100-SXM-80GB+H200-SXM-141GB", at the GPU-weighted mean of their prices (0 if one has none)
    o.gpu.clear();
    double usd = 0;
    for (const GpuSpec& t : c.gpu_types()) o.gpu += (o.gpu.empty() ? "" : "+") + t.name;
    for (int g = 0; g < c.num_gpus(); g += c.gpus_per_node()) {
      const double price = s.prices.of(c.gpu_of(g).name);
      usd = price > 0 && usd >= 0 ? usd + price * c.gpus_per_node() : -1;
    }
    o.gpu_hour_usd = usd > 0 ? usd / c.num_gpus() : 0;
  }
  o.feasible = p.feasible;
  o.reason = p.reason;
  if (!p.feasible) return o;
  o.plan = plan_to_string(p.plan, p.in->model);
  o.plan_source = p.plan_source;
  const ServingOptions so = serving_of(p, true);
  const RequestTrace trace = trace_of(p, s);
  FidelityReport fr;
  const ServingResult r = scorer.serve({p.in->model, *p.in->cluster, p.cluster_spec, p.plan, trace, p.in->routing.get(), so}, fr);
  o.metrics = summarize(r, so, o.gpus);
  o.breakdown = r.breakdown;
  o.energy = run_energy(energy_pools(r, p.plan, c), o.metrics.makespan_s, network_ports(c));
  for (int id = 0; id < p.in->cluster->num_links(); ++id) o.links[static_cast<std::size_t>(p.in->cluster->link(id).cls)]++;
  const Degrees& d = p.plan.disaggregated() ? p.plan.decode().deg : p.plan.deg;
  o.dp = d.dp;
  o.pp = d.pp;
  if (r.disagg.on)
    for (const auto& [pool, plan] : {std::pair{&r.disagg.prefill, p.plan.prefill()}, std::pair{&r.disagg.decode, p.plan.decode()}})
      o.pools.push_back({pool->breakdown, plan.deg.gpus(), plan.deg.dp, plan.deg.pp});
  const auto& w = r.memory.worst();
  o.weights_gb = w.weights / 1e9;
  o.static_gb = (w.weights + w.activations + w.comm_buffers) / 1e9;
  o.kv_capacity_tokens = r.memory.kv_capacity_tokens;
  o.tier = fr.tier;
  o.slowdown = fr.slowdown;
  o.slowdown_ops = fr.ops;
  if (r.rejected_any) {
    o.feasible = false;
    o.reason = r.note;
  }
  if (s.max_rate && o.feasible) {
    max_rate_of(p, s, scorer, o);
  }
  return o;
}

}  // namespace

double GpuPrices::of(const std::string& gpu) const {
  const std::string name = lowercase(gpu);
  for (const auto& [key, price] : by_name)
    if (name.find(lowercase(key)) != std::string::npos) return price;
  return all;
}

GpuPrices parse_gpu_prices(const std::string& text, const std::string& source, const std::string& field) {
  GpuPrices p;
  double v = 0;
  if (parse_double(text, v)) {
    if (!(v > 0) || v > 1e6) throw InputError(source, field, "a price per GPU-hour must be > 0 and ≤ 1,000,000 USD");
    p.all = v;
    return p;
  }
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || !parse_double(item.substr(eq + 1), v) || !(v > 0) || v > 1e6)
      throw InputError(source, field, "'" + item + "': expected USD per GPU-hour, or GPU=USD items such as H100=2.5,GB200=6");
    p.by_name.push_back({item.substr(0, eq), v});
  }
  if (p.by_name.empty()) throw InputError(source, field, "no price given");
  return p;
}

std::vector<ScenarioOutcome> run_comparison(const std::vector<Scenario>& scenarios, const CompareSettings& s,
                                            const Scorer& scorer) {
  InputsCache cache;
  std::vector<Prepared> prepared = prepare(scenarios, s, cache);
  run_searches(prepared, scenarios, s, scorer);
  // Identical scenarios (the same inputs, load and plan) are scored once.
  std::map<std::string, std::size_t> slot_of;
  std::vector<std::size_t> job_of(prepared.size()), jobs;
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    const Prepared& p = prepared[i];
    const std::string key = scenarios[i].model + "\n" + scenarios[i].cluster + "\n" + p.load.text() + "\n" +
                            (p.feasible ? plan_to_string(p.plan) : "infeasible " + p.reason);
    auto [it, fresh] = slot_of.emplace(key, jobs.size());
    if (fresh) jobs.push_back(i);
    job_of[i] = it->second;
  }
  std::vector<ScenarioOutcome> done(jobs.size());
  tbb::task_arena arena(std::max(1, s.threads));
  arena.execute([&] {
    tbb::parallel_for(std::size_t{0}, jobs.size(), [&](std::size_t j) {
      done[j] = score(prepared[jobs[j]], scenarios[jobs[j]], s, scorer);
    });
  });
  std::vector<ScenarioOutcome> out;
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    ScenarioOutcome o = done[job_of[i]];
    o.scenario = scenarios[i];
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace shardsim
