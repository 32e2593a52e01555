// tools/cli/cmd_compare.cpp — `shardsim compare`: what-if scenarios side by side.
//
// Scenarios are the product of the axes given on the command line (--model, --cluster, --engine,
// --load, --plan, each repeatable) or in a scenario file (--scenarios FILE, JSON: see
// sim/whatif/scenario.hpp). studies/compare_runner scores them (searches first, then every
// distinct scenario once, in parallel); sim/whatif/comparison writes the table, the Pareto
// frontier and "why they differ". Output: the Markdown on stdout and, with --out DIR, compare.md,
// compare.csv, compare.json, compare.gp and compare.png (when gnuplot is there), swapped in as
// one set (optimizers/search/study_dir).
#include <algorithm>
#include <iostream>
#include <memory>

#include "common/display_text.hpp"
#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "optimizers/search/study_dir.hpp"
#include "sim/serving/load_sweep.hpp"
#include "common/worker_pool.hpp"
#include "studies/scoring_resources.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/option_table_cli.hpp"
#include "studies/compare_runner.hpp"
#include "studies/run_program.hpp"
#include "studies/sim_inputs.hpp"

namespace shardsim::cli {

namespace {

struct CompareOptions : ScoringResources {
  std::vector<std::string> models, clusters, engines, loads, plans;
  std::string file;
  CompareSettings settings;
  std::string gpu_hour;
  int baseline = 0;  // 0: each scenario against its one-choice neighbour
  std::string out;
};

constexpr std::size_t kMaxScenarios = 1000;

const std::vector<std::string>& compare_members() {
  static const std::vector<std::string> m = {"compare.md", "compare.csv", "compare.json", "compare.gp", "compare.png"};
  return m;
}

// The scenarios, from the file or the command line; the file's settings fill what the command
// line left at its defaults.
std::vector<Scenario> scenarios_from(CompareOptions& opt, CLI::App* cmd) {
  const bool axes_given = !opt.models.empty() || !opt.clusters.empty() || !opt.engines.empty() || !opt.loads.empty() ||
                          !opt.plans.empty();
  std::vector<Scenario> sc;
  if (!opt.file.empty()) {
    if (axes_given)
      throw InputError("--scenarios", opt.file,
                       "give the scenarios in the file or with --model/--cluster/--engine/--load/--plan, not both");
    const ScenarioFile f = read_scenario_file(opt.file);
    CompareSettings& s = opt.settings;
    s.source = opt.file;
    const ScenarioSettings& fs = f.settings;
    auto take = [&](const char* option, auto& field, const auto& value) {
      if (value && cmd->count(option) == 0) field = *value;
    };
    take("--trace", s.trace, fs.trace);
    take("--routing", s.routing, fs.routing);
    take("--slo", s.slo, fs.slo);
    take("--fidelity", s.fidelity, fs.fidelity);
    take("--goal", s.goal, fs.goal);
    take("--requests", s.requests, fs.requests);
    take("--seed", s.seed, fs.seed);
    take("--max-rate", s.max_rate, fs.max_rate);
    take("--gpu-hour", opt.gpu_hour, fs.gpu_hour);
    sc = scenarios_of(f, "offline", "megatron");
  } else {
    ScenarioAxes a{opt.models, opt.clusters, opt.engines, opt.loads, opt.plans};
    if (a.models.empty()) a.models = {"mixtral-8x7b"};
    if (a.clusters.empty()) a.clusters = {"dgx-h100:1"};
    if (a.loads.empty()) a.loads = {"offline"};
    if (a.plans.empty()) a.plans = {"megatron"};
    sc = expand(a);
  }
  if (sc.size() > kMaxScenarios)
    throw InputError(opt.file.empty() ? "command line" : opt.file, "scenarios",
                     std::to_string(sc.size()) + " scenarios; at most " + std::to_string(kMaxScenarios) + " in one comparison");
  label_scenarios(sc);
  return sc;
}

void check_options(CompareOptions& opt, std::size_t scenarios) {
  const std::string src = opt.settings.source == "command line" ? "--fidelity" : opt.settings.source + ": /fidelity";
  opt.settings.tier = parse_tier(opt.settings.fidelity, {Tier::Analytic, Tier::Simgrid}, src, kNoFullTier);
  if (opt.baseline < 0 || static_cast<std::size_t>(opt.baseline) > scenarios)
    throw InputError("--baseline", std::to_string(opt.baseline),
                     "expected a scenario number from 1 to " + std::to_string(scenarios) + " (0: automatic)");
  if (!opt.gpu_hour.empty()) opt.settings.prices = parse_gpu_prices(opt.gpu_hour, "--gpu-hour", opt.gpu_hour);
  ServingOptions slo;
  parse_slo(opt.settings.slo, slo);
  opt.settings.slo_goal = parse_slo_goal(opt.settings.goal, slo.slo_ttft, slo.slo_tpot,
                                         opt.settings.source == "command line" ? "--goal" : opt.settings.source + ": /goal");
  if (opt.settings.arrivals != "poisson" && opt.settings.arrivals != "trace")
    throw InputError("--arrivals", opt.settings.arrivals, "expected poisson or trace");
}

// How the requests arrive, said where the numbers are (simulate replays the trace's arrival times by
// default, compare replays offline; the title said neither).
std::string load_words(const std::string& load) {
  if (load == "offline") return "offline (all requests queued at t = 0)";
  if (load == "trace") return "at the trace's arrival times";
  if (load.rfind("rate=", 0) == 0) return "Poisson arrivals at " + load.substr(5) + " req/s";
  if (load.rfind("clients=", 0) == 0) return "a closed loop of " + load.substr(8) + " clients";
  return load;
}

std::string title_of(const std::vector<ScenarioOutcome>& v, const CompareSettings& s) {
  // The requests replayed: --requests, or the whole trace when it holds fewer (said so).
  int served = 0;
  for (const auto& o : v)
    if (o.feasible) served = std::max(served, o.metrics.requests);
  std::string t = (served > 0 && served < s.requests
                       ? std::to_string(served) + " requests (all the trace holds; --requests asked for " + std::to_string(s.requests) + ")"
                       : std::to_string(s.requests) + " requests") +
                  " of " + s.trace;
  bool one_model = true, one_load = true;
  for (const auto& o : v) {
    one_model = one_model && o.scenario.model == v.front().scenario.model;
    one_load = one_load && o.scenario.load == v.front().scenario.load;
  }
  t += one_load ? ", " + load_words(v.front().scenario.load) : " (each scenario's load in its label)";
  t += ", " + s.fidelity + " fidelity";
  return (one_model ? terminal_safe(v.front().scenario.model) + ": " : "") + t;
}

json inputs_json(const CompareOptions& opt) {
  const CompareSettings& s = opt.settings;
  return {{"source", s.source}, {"trace", s.trace}, {"requests", s.requests}, {"routing", s.routing},
          {"slo", s.slo},       {"seed", s.seed},   {"fidelity", s.fidelity}, {"samples", s.samples},
          {"exact", s.exact},   {"arrivals", s.arrivals}, {"max_rate", s.max_rate}, {"goal", s.goal},
          {"gpu_hour", opt.gpu_hour}};
}

void run(CompareOptions& opt, CLI::App* cmd) {
  std::vector<Scenario> scenarios = scenarios_from(opt, cmd);
  check_options(opt, scenarios.size());
  // A searched plan is chosen by its capacity under the SLO: the table shows that capacity for
  // every row, so that the plan search crowned is compared on what it was crowned for.
  const bool searched = std::any_of(scenarios.begin(), scenarios.end(),
                                    [](const Scenario& sc) { return sc.plan.rfind("search:", 0) == 0; });
  const bool implied_rate = searched && !opt.settings.max_rate;
  if (implied_rate) opt.settings.max_rate = true;
  if (!opt.out.empty()) prepare_study_dir(opt.out, false);  // a folder that cannot be made fails before the work
  opt.settings.threads = opt.threads > 0 ? opt.threads : default_workers();  // one per core
  const Scorer scorer(opt.settings.tier, opt.workers, opt.settings.samples);  // its pool forks before any thread exists
  const std::vector<ScenarioOutcome> outcomes = run_comparison(scenarios, opt.settings, scorer);

  CompareContext ctx;
  ctx.title = title_of(outcomes, opt.settings);
  ctx.baseline = opt.baseline - 1;
  if (opt.settings.max_rate) ctx.goal = opt.settings.slo_goal.describe();
  ctx.goal_for_search = implied_rate;
  std::string md = "# shardsim compare: " + ctx.title + "\n\n" + markdown_table(outcomes, ctx) + "\n";
  md += why_they_differ(outcomes, ctx);
  std::cout << md;
  if (opt.out.empty()) return;
  OutputStaging staging(opt.out, compare_members());
  const std::string d = staging.dir() + "/";
  write_file_atomically(d + "compare.md", md);
  write_file_atomically(d + "compare.csv", compare_csv(outcomes));
  write_file_atomically(d + "compare.json", json_text(compare_json(outcomes, ctx, inputs_json(opt)), 2) + "\n");
  write_file_atomically(d + "compare.gp", compare_gnuplot(outcomes, ctx));
  const bool plotted = plot_png(staging.dir(), "compare.gp", "compare.png");
  staging.publish();
  std::cout << "\nwrote " << opt.out << "/{compare.md, compare.csv, compare.json, compare.gp" << (plotted ? ", compare.png}" : "}")
            << "\n";
  if (!plotted) std::cout << "(no plot: gnuplot is missing or failed, or the image was cut short; run 'gnuplot compare.gp' in " << opt.out << ")\n";
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto opt = std::make_shared<CompareOptions>();
  auto* cmd = app.add_subcommand(
      "compare",
      "What-if scenarios side by side: every combination of the models, clusters, engine presets, loads and plans\n"
      "given (each option repeatable), or the scenarios of a file. One table (tok/s, per GPU and per user,\n"
      "TTFT/TPOT p50/p99, goodput, memory, and max rate and $ per million tokens on request), the Pareto frontier\n"
      "of tok/s per GPU against tok/s per user, and why each scenario differs from the baseline (docs/what-if.md).\n\n"
      "Examples:\n"
      "  shardsim compare --model deepseek-v3 --cluster dgx-h100:8 --cluster dgx-h100:8,oversub=2 \\\n"
      "                   --plan megatron --plan tp=1,attn_dp=64,ep=64\n"
      "  shardsim compare --model deepseek-v3 --cluster dgx-h100:8 --cluster dgx-h200:8 --cluster nvl72:1 \\\n"
      "                   --plan search:200 --gpu-hour H100=2.5,H200=3.5,GB200=6 --out gpus\n"
      "  shardsim compare --scenarios study.json --out study");
  cmd->add_option("--model,-m", opt->models, "model preset or file (repeatable; default mixtral-8x7b)");
  cmd->add_option("--cluster,-c", opt->clusters, "cluster shorthand or JSON (repeatable; default dgx-h100:1)");
  cmd->add_option("--engine", opt->engines, "engine preset replacing the plan's (repeatable; default: the plan's own)");
  cmd->add_option("--load", opt->loads, "offline | trace | rate=REQ_PER_S | clients=N (repeatable; default offline)");
  cmd->add_option("--plan,-p", opt->plans,
                  "plan file, compact string, megatron, or search:B[:OPTIMIZER] (the Megatron portfolio and OPTIMIZER, "
                  "default sa, with B evaluations) (repeatable; default megatron)");
  cmd->add_option("--scenarios", opt->file, "a scenario file (JSON; docs/what-if.md) instead of the axes above");
  CompareSettings& s = opt->settings;
  cmd->add_option("--trace,-t", s.trace, "request trace: azure-conv, a CSV/JSONL path, or synthetic:…")->capture_default_str();
  cmd->add_option("--requests,-n", s.requests, "use the first N requests of the trace")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000'000));
  cmd->add_option("--arrivals", s.arrivals, "rate loads: poisson | trace (the trace's own gaps, rescaled)")->capture_default_str();
  cmd->add_option("--routing,-r", s.routing, "expert routing: an SSRT file, uniform, or synthetic:zipf=1.2,…")->capture_default_str();
  cmd->add_option("--slo", s.slo, "latency objectives in ms for goodput: ttft=MS,tpot=MS")->capture_default_str();
  cmd->add_option("--seed", s.seed, "seed of every random choice (traces, routing, searches)")->capture_default_str();
  cmd->add_flag("--exact", s.exact, "score on the exact path (slow; docs/performance.md)");
  cmd->add_option("--fidelity", s.fidelity, "analytic | simgrid")->capture_default_str();
  const auto samples = scoring_resource_decls(kSamples, "scenarios", "per scenario").front();  // its help and check
  cmd->add_option("--samples", s.samples, samples.help)->capture_default_str()->check(declared_validator(samples.check));
  cmd->add_flag("--max-rate", s.max_rate, "also find each plan's highest Poisson rate meeting --goal (about 8 runs each)");
  cmd->add_option("--goal", s.goal, "what meets the --slo for --max-rate: p99 | p90 | p50 | attain=F")->capture_default_str();
  cmd->add_option("--gpu-hour", opt->gpu_hour, "USD per GPU-hour, one price or GPU=USD items (H100=2.5,GB200=6): adds $ per million tokens");
  cmd->add_option("--baseline", opt->baseline,
                  "the scenario (table row) 'why they differ' compares every other against; 0: each against the first "
                  "earlier one that differs in one choice only")
      ->capture_default_str();
  // --samples is a setting a scenario file may give too (CompareSettings), declared with the settings above.
  add_declared(cmd, static_cast<ScoringResources&>(*opt), scoring_resource_decls(kWorkers | kThreads, "scenarios"));
  cmd->add_option("--out", opt->out, "write compare.md, compare.csv, compare.json, compare.gp and compare.png into this folder");
  cmd->callback([opt, cmd] { run(*opt, cmd); });
}

}  // namespace shardsim::cli
