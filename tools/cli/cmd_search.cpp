// tools/cli/cmd_search.cpp — `shardsim search`: run optimizers on one model/cluster/trace at equal
// budgets and write the comparison (results.json, anytime.csv, summary.md, anytime.png,
// best-plan.json).
//
// The space and its base plan come from --model/--cluster/--space/--base; the evaluator is the
// serving loop at --fidelity (SimGrid steps in the worker pool, forked before TBB starts). The
// throughput objective replays the trace offline (all requests at t = 0) unless --online.
// megatron and exhaustive are deterministic and run once; the other optimizers run --seeds times
// with seeds 1..K. Everything is written only after the search finished.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "optimizers/megatron_portfolio.hpp"
#include "optimizers/search_driver.hpp"
#include "optimizers/search_report.hpp"
#include "optimizers/serving_evaluator.hpp"
#include "sim/simgrid/worker_pool.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/sim_inputs.hpp"

namespace shardsim::cli {

namespace {

// Runs argv[0] (found on PATH) with `dir` as its working directory, output discarded; true when it
// exits 0. posix_spawn, not a shell: nothing in `dir` or the arguments is interpreted.
bool run_quietly_in(const std::string& dir, const std::vector<std::string>& argv) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return false;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}


struct SearchOptions {
  SimInputs in;
  std::string fidelity = "simgrid";
  std::string objective = "throughput";
  std::string optimizers = "megatron,random,ga,sa";
  std::string space = "all";
  std::string base;
  std::string params;
  std::string policy_in, policy_out;
  long budget = 100;
  int seeds = 3;
  int threads = 0;
  int workers = 0;
  int samples = 16;
  bool online = false;
  bool quiet = false;
  std::string out;
};

int cores() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string clock_text(double s) {
  char buf[32];
  long t = std::lround(s);
  std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

// The progress line: evaluations per optimizer, best so far, elapsed, ETA.
class Progress {
 public:
  Progress(const std::vector<SearchRun>& runs, long budget, bool quiet)
      : runs_(runs), used_(runs.size(), 0), best_(runs.size(), 0), quiet_(quiet), tty_(isatty(2) != 0),
        start_(std::chrono::steady_clock::now()) {
    for (const auto& r : runs) total_ += r.budget > 0 ? r.budget : budget;
  }
  void update(std::size_t i, const RunRecord& rec) {
    used_[i] = rec.evaluations;
    best_[i] = rec.has_best && rec.best.score.feasible ? rec.best.score.objective : 0;
    if (quiet_) return;
    double now = elapsed();
    if (now - last_ < (tty_ ? 0.5 : 10.0)) return;
    last_ = now;
    print(false);
  }
  void finish() {
    if (quiet_) return;
    print(true);
  }

 private:
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  void print(bool final) {
    std::map<std::string, std::pair<long, double>> per;
    std::vector<std::string> order;
    long done = 0;
    for (std::size_t i = 0; i < runs_.size(); ++i) {
      if (!per.count(runs_[i].optimizer)) order.push_back(runs_[i].optimizer);
      auto& p = per[runs_[i].optimizer];
      p.first += used_[i];
      p.second = std::max(p.second, best_[i]);
      done += used_[i];
    }
    std::ostringstream o;
    o << "search " << done << "/" << total_;
    for (const auto& n : order) {
      char buf[64];
      std::snprintf(buf, sizeof buf, " | %s %ld best %.4g", n.c_str(), per[n].first, per[n].second);
      o << buf;
    }
    double t = elapsed();
    o << " | " << clock_text(t);
    if (!final && done > 0) o << " ETA " << clock_text(t * static_cast<double>(total_ - done) / static_cast<double>(done));
    std::string line = o.str();
    if (tty_) std::fprintf(stderr, "\r%s\033[K%s", line.c_str(), final ? "\n" : "");
    else std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }

  std::vector<SearchRun> runs_;
  std::vector<long> used_;
  std::vector<double> best_;
  long total_ = 0;
  bool quiet_, tty_;
  std::chrono::steady_clock::time_point start_;
  double last_ = -1e9;
};

void run(const SearchOptions& opt) {
  if (opt.fidelity != "analytic" && opt.fidelity != "simgrid" && opt.fidelity != "full")
    throw InputError("--fidelity", opt.fidelity, "unknown tier (expected analytic, simgrid or full)");
  if (opt.objective != "throughput" && opt.objective != "goodput")
    throw InputError("--objective", opt.objective, "unknown objective (expected throughput or goodput)");
  if (opt.out.empty()) throw InputError("--out", "", "an output directory is required");
  // The worker pool forks its zygote before any thread exists (TBB starts later).
  std::unique_ptr<WorkerPool> pool;
  if (opt.fidelity != "analytic")
    pool = std::make_unique<WorkerPool>(opt.workers > 0 ? opt.workers : cores(), simgrid_worker_handler);
  LoadedInputs L = load_inputs(opt.in);
  ServingOptions so = L.serving;
  so.offline = opt.in.offline || (opt.objective == "throughput" && !opt.online);

  Plan base = default_plan(L.model);
  if (!opt.base.empty()) base = load_plan(opt.base, L.model, *L.cluster);
  SearchSpace space(L.model, *L.cluster, base, parse_space_options(opt.space, "--space"));

  OptimizerParams params = OptimizerParams::parse(opt.params, "--param");
  auto names = split(opt.optimizers);
  if (names.empty()) throw InputError("--optimizers", opt.optimizers, "no optimizer named");
  for (const char* rl : {"rl", "rl-noattn"})
    if (!opt.policy_in.empty() && std::find(names.begin(), names.end(), rl) != names.end()) params.set(rl, "policy_in", opt.policy_in);

  if (!opt.policy_out.empty() && std::find(names.begin(), names.end(), "rl") == names.end() &&
      std::find(names.begin(), names.end(), "rl-noattn") == names.end())
    throw InputError("--policy-out", opt.policy_out, "no optimizer with a policy (rl, rl-noattn) is in --optimizers");
  std::vector<RuleGenes> rules = portfolio_genes(space);
  std::vector<SearchRun> runs;
  for (const auto& n : names) {
    if (n == "megatron") {
      runs.push_back({n, 1, static_cast<long>(std::max<std::size_t>(1, rules.size()))});
    } else if (n == "exhaustive") {
      // Its budget is the whole space; it refuses a space beyond exhaustive.limit itself.
      const double size = space.canonical_size();
      runs.push_back({n, 1, static_cast<long>(std::min(size, 1e15))});
    } else {
      for (int s = 1; s <= opt.seeds; ++s) runs.push_back({n, static_cast<std::uint64_t>(s), 0});
    }
  }
  std::unique_ptr<SimgridRunner> runner;
  if (pool) runner = make_pool_runner(*pool);
  EvaluatorInputs ei;
  ei.model = &L.model;
  ei.cluster = L.cluster.get();
  ei.cluster_spec = opt.in.cluster;
  ei.trace = &L.trace;
  ei.routing = L.routing.get();
  ei.serving = so;
  ei.tier = opt.fidelity;
  ei.runner = runner.get();
  ei.samples = opt.samples;
  ei.objective = opt.objective == "throughput" ? Objective::Throughput : Objective::Goodput;
  ServingEvaluator evaluator(ei);

  SearchSettings settings;
  settings.budget = opt.budget;
  settings.threads = opt.threads > 0 ? opt.threads : cores();
  for (const auto& r : rules) settings.portfolio.push_back(r.genes);
  settings.params = &params;
  Progress progress(runs, opt.budget, opt.quiet);
  SearchOutcome out =
      run_search(space, evaluator, runs, settings, [&](std::size_t i, const RunRecord& rec) { progress.update(i, rec); });
  progress.finish();

  SearchReport rep = summarize_search(out, rules, space);
  std::string title = "shardsim search: " + L.model.name + " on " + L.cluster->name() + " (" +
                      std::to_string(L.cluster->num_gpus()) + " GPUs), " + std::to_string(L.trace.requests.size()) +
                      " requests" + (so.offline ? " offline" : "") + ", " + opt.fidelity + " fidelity";
  std::string md = summary_markdown(rep, out, space, rules, evaluator.objective_unit(), title, opt.budget);
  json inputs = {{"model", opt.in.model},        {"cluster", opt.in.cluster},   {"trace", L.trace_spec},
                 {"requests", L.trace.requests.size()}, {"offline", so.offline}, {"routing", L.routing ? L.routing_spec : ""},
                 {"slo", opt.in.slo},            {"seed", opt.in.seed},         {"fidelity", opt.fidelity},
                 {"objective", opt.objective},   {"optimizers", opt.optimizers}, {"budget", opt.budget},
                 {"seeds", opt.seeds},           {"threads", settings.threads}, {"space", opt.space},
                 {"params", opt.params},         {"base", opt.base}};
  write_search_outputs(opt.out, inputs, rep, out, space, evaluator.objective_unit(), md, opt.budget);
  if (!opt.policy_out.empty()) {
    // The learned policy of the best RL run (rl before rl-noattn on ties).
    const RunRecord* best = nullptr;
    for (const auto& r : out.runs)
      if (!r.state.empty() && (!best || better(r.best.score, best->best.score))) best = &r;
    if (!best) throw InputError("--policy-out", opt.policy_out, "no rl run produced a policy");
    write_file_atomically(opt.policy_out, best->state);
  }
  // The anytime plot, when gnuplot is there (no shell: --out may hold any character).
  bool plotted = run_quietly_in(opt.out, {"gnuplot", "anytime.gp"});
  std::cout << md;
  std::cout << "\nwrote " << opt.out << "/{results.json, anytime.csv, summary.md, anytime.gp"
            << (plotted ? ", anytime.png" : "") << (rep.best_known > 0 ? ", best-plan.json" : "") << "}\n";
  if (!plotted) std::cout << "(no plot: gnuplot is missing or failed; run 'gnuplot anytime.gp' in " << opt.out << ")\n";
}

}  // namespace

void add_search_command(CLI::App& app) {
  auto opt = std::make_shared<SearchOptions>();
  opt->in.requests = 300;
  auto* cmd = app.add_subcommand(
      "search",
      "Search plans (degrees, per-operator sharding, mapping, batching) with several optimizers at\n"
      "equal evaluation budgets and compare them: best plans, anytime curves, ratios to the best\n"
      "Megatron rule plan and (when exhaustive runs) to the optimum.\n\n"
      "Examples:\n"
      "  shardsim search --model mixtral-8x7b --cluster dgx-h100:2 --optimizers megatron,random,ga,sa \\\n"
      "                  --budget 200 --seeds 5 --out results/\n"
      "  shardsim search --model mixtral-8x7b --cluster dgx-h100:2 --space degrees,sharding --fidelity analytic \\\n"
      "                  --optimizers exhaustive,ga,sa --budget 300 --seeds 5 --out small/\n"
      "  shardsim search --model deepseek-v3 --cluster dgx-h100:32 --objective goodput --slo ttft=2000,tpot=100 \\\n"
      "                  --param ga.population=16,sa.batch=2 --out ds/\n"
      "Then: shardsim simulate --model … --cluster … --plan results/best-plan.json");
  add_sim_options(cmd, opt->in);
  cmd->add_option("--fidelity", opt->fidelity, "analytic | simgrid | full (see 'shardsim simulate --help')")->capture_default_str();
  cmd->add_option("--objective", opt->objective, "throughput (output tok/s, offline replay) | goodput (req/s within --slo)")
      ->capture_default_str();
  cmd->add_flag("--online", opt->online, "keep the trace's arrival times for the throughput objective");
  cmd->add_option("--optimizers", opt->optimizers, "comma list of: megatron, random, exhaustive, ga, sa, rl, rl-noattn")
      ->capture_default_str();
  cmd->add_option("--budget", opt->budget, "evaluations per optimizer run")->capture_default_str()->check(CLI::Range(1L, 10'000'000L));
  cmd->add_option("--seeds", opt->seeds, "runs per optimizer, seeds 1..K (megatron, exhaustive: one run)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--threads", opt->threads, "TBB threads (default: one per core)")->check(CLI::Range(1, 1024));
  cmd->add_option("--workers", opt->workers, "SimGrid worker processes (default: one per core)")->check(CLI::Range(1, 1024));
  cmd->add_option("--samples", opt->samples, "steps sampled into SimGrid per evaluation at simgrid fidelity")->capture_default_str();
  cmd->add_option("--space", opt->space, "blocks to search: degrees, sharding, mapping, batching, or all")->capture_default_str();
  cmd->add_option("--base", opt->base, "plan for everything not searched (dtypes, fixed blocks); default: the model's defaults");
  cmd->add_option("--param", opt->params, "optimizer settings, e.g. ga.population=64,sa.restart=0.2 (docs/optimizers.md)");
  cmd->add_option("--policy-in", opt->policy_in, "warm-start rl / rl-noattn from this saved policy");
  cmd->add_option("--policy-out", opt->policy_out, "save the policy of the best rl / rl-noattn run here");
  cmd->add_flag("--quiet,-q", opt->quiet, "no progress line on stderr");
  cmd->add_option("--out,-o", opt->out, "output directory")->required();
  cmd->callback([opt] { run(*opt); });
}

}  // namespace shardsim::cli
