// tools/cli/cmd_search.cpp — `shardsim search`: run optimizers on one model/cluster/trace at equal
// budgets and write the comparison (results.json, anytime.csv, summary.md, anytime.png,
// best-plan.json).
//
// The space and its base plan come from --model/--cluster/--space/--base; the evaluator is the
// serving loop at --fidelity (SimGrid steps in the worker pool, forked before TBB starts). The
// throughput objective replays the trace offline (all requests at t = 0) unless --online.
// megatron and exhaustive are deterministic and run once; the other optimizers run once per seed
// of --seeds (K: seeds 1..K; A..B: seeds A to B, so a later study can add seeds 6..10 to 1..5).
// Reliability (docs/optimizers.md, "Interrupting and resuming a study"): every scored batch is
// journaled in <out>/journal.jsonl (optimizers/search/journal); --resume DIR rebuilds the command from
// the journal's options (options given again must agree, or the resume is refused), replays the
// journaled evaluations and goes on. SIGINT/SIGTERM: a flag polled at batch boundaries; the
// outputs known so far are written, marked incomplete, and the command exits 130/143; a second
// signal exits at once. The outputs are written as a set into a staging folder swapped in whole
// (optimizers/search/study_dir). `search merge DIR… --out OUT` joins studies of one problem
// (studies/search_merge) and resumes the merged journal, which replays every evaluation;
// `search compare ARM…` sets arms of studies of one problem side by side (studies/search_compare).
// Under `mpirun -np K`, rank 0 runs everything above and ranks 1…K−1 only score plans for it
// (tools/cli/mpi_evaluation): the same results, journal and report as one process.
#include <signal.h>
#include <tbb/global_control.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "common/readable_number.hpp"
#include "common/display_text.hpp"
#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "optimizers/search/journal.hpp"
#include "optimizers/space/megatron_portfolio.hpp"
#include "optimizers/search/search_driver.hpp"
#include "optimizers/report/search_report.hpp"
#include "common/embedded.hpp"
#include "optimizers/space/serving_evaluator.hpp"
#include "sim/serving/metrics.hpp"
#include "studies/search_compare.hpp"
#include "studies/search_merge.hpp"
#include "optimizers/search/study_dir.hpp"
#include "common/worker_pool.hpp"
#include "sim/simgrid/scorer.hpp"
#include "topologies/cluster_io.hpp"
#include "studies/scoring_resources.hpp"
#include "tools/cli/commands.hpp"
#include "studies/run_program.hpp"
#include "tools/cli/mpi_evaluation.hpp"
#include "studies/search_runs.hpp"
#include "studies/problem_options.hpp"
#include "tools/cli/option_table_cli.hpp"

namespace shardsim::cli {

namespace {

struct SearchOptions : ProblemSettings {
  SearchOptions() { fidelity = "simgrid"; }  // the command's tier (the evaluator's is analytic)
  SimInputs in;
  Tier tier = Tier::Simgrid;  // `fidelity`, read by check_options
  std::string optimizers = "megatron,random,ga,sa";
  bool log_evals = false;  // anytime.png with evaluations on a log scale
  std::string reference;  // the optimizer the report tests the others against ("" = rl, else the first stochastic)
  std::string params;
  std::string policy_in, policy_out;
  long budget = 100;
  std::string seeds = "3";  // K (seeds 1..K) or A..B
  ScoringResources resources;  // --workers, --threads
  double rank_timeout = 30;  // under mpirun: seconds of silence after which a rank is lost
  bool quiet = false;
  std::string out;
  std::string resume;
};

int cores() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
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
      o << " | " << n << " " << per[n].first << " best " << readable(per[n].second);
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

// ---- stopping on SIGINT / SIGTERM --------------------------------------------------------

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

// Async-signal-safe: records the first signal; a second one exits at once (the journal holds
// every finished batch, so the study can still be resumed).
extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal.exchange(sig) != 0) ::_exit(128 + sig);
}

// Installs the handlers for SIGINT and SIGTERM while it lives (after the worker pool is forked:
// the workers keep the default dispositions and their own process group).
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  static int caught() { return g_stop_signal.load(); }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

// ---- the journal's header and resuming ---------------------------------------------------

// Options that do not change results: neither journaled nor compared on resume.
const std::set<std::string> kSessionOptions = {"--threads", "--workers", "--quiet", "--out", "--resume", "--help", "--rank-timeout"};
// Journaled and restored on resume, but may be given anew (where an output goes).
const std::set<std::string> kOutputOptions = {"--policy-out", "--reference", "--log-evals"};

// The study options given on the command line, as CLI11 parsed them: {"--budget": ["20"], …}.
json given_args(CLI::App* cmd) {
  json args = json::object();
  for (const CLI::Option* o : cmd->get_options()) {
    const std::string name = o->get_name();
    if (name.empty() || o->count() == 0 || kSessionOptions.count(name)) continue;
    args[name] = o->results();
  }
  return args;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// Journaled options that name a path written outside the study folder: never taken from a journal
// (a study folder received from someone else must not decide where this command writes).
const std::set<std::string> kOutsidePathOptions = {"--policy-out"};

// Options the study was started with and this command does not give are set from the journal;
// ones given with another value are refused, naming the option. Paths written outside the folder
// are not adopted: the command says so, and they are given again if wanted.
void adopt_journal_args(CLI::App* cmd, const json& args, const std::string& path) {
  for (auto it = args.begin(); it != args.end(); ++it) {
    CLI::Option* o = cmd->get_option_no_throw(it.key());
    if (!o || !it->is_array()) throw InputError(path, "line 1: /args/" + it.key(), "not an option of this shardsim search");
    const auto values = it->get<std::vector<std::string>>();
    if (kOutsidePathOptions.count(it.key())) {
      if (o->count() == 0)
        std::fprintf(stderr, "shardsim search: the study was started with %s %s; a resumed study does not write outside its "
                             "folder unless told again (give %s to write it)\n",
                     it.key().c_str(), terminal_safe(joined(values)).c_str(), it.key().c_str());
      continue;
    }
    if (o->count() == 0) {
      o->add_result(values);
      o->run_callback();
    } else if (o->results() != values && !kOutputOptions.count(it.key())) {
      throw InputError(path, it.key(),
                       "the study was started with " + joined(values) + ", this command gives " + joined(o->results()) +
                           " (a resumed study keeps its inputs)");
    }
  }
}

std::filesystem::path same_path(const std::string& p) {
  auto q = std::filesystem::weakly_canonical(std::filesystem::absolute(p));
  return q.filename().empty() ? q.parent_path() : q;
}

// --resume DIR: reads DIR's journal and completes the options from it.
JournalContents open_resume(SearchOptions& opt, CLI::App* cmd) {
  if (!std::filesystem::is_directory(opt.resume)) throw InputError(opt.resume, "--resume", "not a directory");
  if (!opt.out.empty() && same_path(opt.out) != same_path(opt.resume))
    throw InputError("--out", opt.out, "differs from --resume " + opt.resume + " (a study resumes in its own folder)");
  opt.out = opt.resume;
  const std::string path = (std::filesystem::path(opt.resume) / kJournalName).string();
  JournalContents c = read_journal(path);
  adopt_journal_args(cmd, c.header["args"], path);
  return c;
}

std::string digest(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string trace_text(const RequestTrace& t) {
  std::string s;
  char buf[96];
  for (const auto& r : t.requests) {
    std::snprintf(buf, sizeof buf, "%a,%d,%d;", r.arrival_s, r.prompt_tokens, r.output_tokens);
    s += buf;
  }
  return s;
}

std::string file_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A study resumes from the options its journal recorded as JSON text; a value that is not UTF-8 (a
// file name may hold any bytes on Linux) would come back as another name and never resume, so it is
// refused before the study starts, naming the option.
void refuse_unrecordable(const json& args) {
  for (auto it = args.begin(); it != args.end(); ++it)
    for (const auto& v : *it)
      if (v.is_string() && !valid_utf8(v.get_ref<const std::string&>()))
        throw InputError(it.key(), v.get<std::string>(),
                         "not UTF-8: a study's journal records its options as JSON text and could not resume from this "
                         "name (rename the file, or link to it under a UTF-8 name)");
}

// The journal's line 1: options as given, inputs that determine results (threads excluded) with
// digests of what files could change behind a name, and the runs.
json journal_header(CLI::App* cmd, json inputs, const LoadedInputs& L, const Plan& base, const SearchOptions& opt,
                    const std::vector<SearchRun>& runs) {
  inputs.erase("threads");
  refuse_unrecordable(given_args(cmd));
  inputs["model_digest"] = digest(json_text(model_to_json(L.model)));
  inputs["cluster_digest"] = digest(json_text(cluster_to_json(*L.cluster)));
  inputs["trace_digest"] = digest(trace_text(L.trace));
  inputs["base_plan"] = plan_to_string(base);
  inputs["policy_in_digest"] = opt.policy_in.empty() ? "" : digest(file_text(opt.policy_in));
  json r = json::array();
  for (const auto& x : runs) r.push_back({{"optimizer", x.optimizer}, {"seed", x.seed}, {"budget", x.budget}});
  return {{"schema", kJournalSchema}, {"args", given_args(cmd)}, {"inputs", inputs}, {"runs", r}};
}

// ---- the study ---------------------------------------------------------------------------

void check_options(SearchOptions& opt) {
  opt.tier = parse_tier(opt.fidelity, "--fidelity");
  const Objective objective = parse_objective(opt.objective, "--objective");
  if (objective_sets_load(objective) && (opt.in.rate > 0 || opt.in.concurrency > 0 || opt.in.offline))
    throw InputError("--objective", opt.objective,
                     std::string(objective_name(objective)) + " chooses the load itself: drop --rate, --concurrency and --offline");
  (void)parse_seeds(opt.seeds);
  if (opt.out.empty()) throw InputError("--out", "", "an output directory is required (or --resume DIR)");
  std::error_code ec;
  if (std::filesystem::exists(opt.out, ec) && !std::filesystem::is_directory(opt.out, ec))
    throw InputError(opt.out, "--out", "exists and is not a directory");
}

OptimizerParams make_params(const SearchOptions& opt, const std::vector<std::string>& names) {
  OptimizerParams params = OptimizerParams::parse(opt.params, "--param");
  auto has = [&](const char* n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  for (const char* rl : {"rl", "rl-noattn"})
    if (!opt.policy_in.empty() && has(rl)) params.set(rl, "policy_in", opt.policy_in);
  if (!opt.policy_out.empty() && !has("rl") && !has("rl-noattn"))
    throw InputError("--policy-out", opt.policy_out, "no optimizer with a policy (rl, rl-noattn) is in --optimizers");
  return params;
}

// What results.json records as the inputs (the journal adds digests and drops threads).
json study_inputs(const SearchOptions& opt, const LoadedInputs& L, const ServingOptions& so, int threads) {
  json j = {{"model", opt.in.model},        {"cluster", opt.in.cluster},    {"trace", L.trace_spec},
          {"requests", L.trace.requests.size()}, {"offline", so.offline}, {"routing", L.routing ? L.routing_spec : ""},
          {"slo", opt.in.slo},            {"seed", opt.in.seed},          {"fidelity", opt.fidelity},
          {"objective", opt.objective},   {"optimizers", opt.optimizers}, {"budget", opt.budget},
          {"seeds", seeds_json(opt.seeds)},           {"threads", threads},           {"space", opt.space},
          {"params", opt.params},         {"base", opt.base},             {"samples", opt.samples},
          {"exact", opt.in.exact},        {"policy_in", opt.policy_in}};
  // Keys added with load control are absent unless used, so older journals still resume.
  if (load_given(opt.in)) j["load"] = load_to_json(opt.in);
  if (opt.in.routed_tokens >= 0) j["routed_tokens"] = opt.in.routed_tokens;
  if (objective_uses_goal(parse_objective(opt.objective, "--objective"))) j["goal"] = opt.goal;
  return j;
}

// The journal: a new one (removing the old study's files) or the resumed one, continued.
std::unique_ptr<JournalWriter> start_journal(const SearchOptions& opt, const json& header,
                                             const std::optional<JournalContents>& resumed) {
  prepare_study_dir(opt.out, !resumed);
  const std::string path = (std::filesystem::path(opt.out) / kJournalName).string();
  if (resumed) return std::make_unique<JournalWriter>(path, resumed->valid_bytes);
  return std::make_unique<JournalWriter>(path, header);
}

long total_budget(const std::vector<SearchRun>& runs, long budget) {
  long t = 0;
  for (const auto& r : runs) t += r.budget > 0 ? r.budget : budget;
  return t;
}

std::string signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

// What a saved policy was trained on ("trained_on" of a policy file), or null.
json trained_on_of(const std::string& policy_file) {
  try {
    const json j = json::parse(read_text_file(policy_file));
    return j.contains("trained_on") ? j["trained_on"] : json(nullptr);
  } catch (const std::exception&) {
    return nullptr;  // the optimizer reads (and refuses) a bad file itself
  }
}

void write_policy(const SearchOptions& opt, const SearchOutcome& out, const json& inputs) {
  if (opt.policy_out.empty()) return;
  // The learned policy of the best RL run (rl before rl-noattn on ties).
  const RunRecord* best = nullptr;
  for (const auto& r : out.runs)
    if (!r.state.empty() && (!best || better(r.best.score, best->best.score))) best = &r;
  if (!best && !out.complete) return;
  if (!best) throw InputError("--policy-out", opt.policy_out, "no rl run produced a policy");
  // The file carries what it learned from, so a warm start can say what it starts from.
  json policy = json::parse(best->state);
  json trained = {{"optimizer", best->optimizer},
                  {"seed", best->seed},
                  {"budget", opt.budget},
                  {"evaluations", best->evaluations},
                  {"best_objective", best->best.score.feasible ? best->best.score.objective : 0.0},
                  {"complete", best->complete},
                  {"inputs", inputs}};
  if (!opt.policy_in.empty()) trained["warm_start"] = {{"policy_in", opt.policy_in}, {"trained_on", trained_on_of(opt.policy_in)}};
  policy["trained_on"] = trained;
  write_file_atomically(opt.policy_out, json_text(policy, 1) + "\n");
}

// One line for summary.md when rl started from a saved policy: what that policy was trained on.
std::string warm_start_markdown(const SearchOptions& opt) {
  if (opt.policy_in.empty()) return "";
  const json t = trained_on_of(opt.policy_in);
  std::string s = "\nWarm start: rl started from `" + opt.policy_in + "`";
  if (t.is_object() && t.contains("inputs")) {
    const json& in = t["inputs"];
    s += ", trained on " + in.value("model", std::string("?")) + " on " + in.value("cluster", std::string("?")) +
         " with a budget of " + std::to_string(t.value("budget", 0L)) + " evaluations (" + t.value("optimizer", std::string("rl")) +
         ", seed " + std::to_string(t.value("seed", 0ULL)) + ")";
  } else {
    s += " (the file does not record what it was trained on)";
  }
  return s + ".\n";
}

void print_done(const SearchOptions& opt, const std::string& md, const SearchReport& rep, bool plotted) {
  std::cout << md;
  std::cout << "\nwrote " << opt.out << "/{results.json, anytime.csv, summary.md, anytime.gp"
            << (plotted ? ", anytime.png" : "") << (rep.best_known > 0 ? ", best-plan.json" : "") << ", " << kJournalName
            << "}\n";
  if (!plotted) std::cout << "(no plot: gnuplot is missing or failed, or the image was cut short; run 'gnuplot anytime.gp' in " << opt.out << ")\n";
}

EvaluatorInputs evaluator_inputs(const SearchOptions& opt, const LoadedInputs& L, const ServingOptions& so,
                                 SimgridRunner* runner, std::optional<Tier> tier = std::nullopt) {
  return search_evaluator_inputs(opt.in, L, so, tier ? *tier : opt.tier, opt.objective, opt.goal,
                                 opt.samples, runner, "--goal");
}

// What was scored, in words: for the capacity measures, how they were measured; for a drain, whether
// the best plan's run had a saturated window — otherwise its score is the output over the whole run,
// how fast this batch of requests drains (the best plan is replayed once, analytic tier, to say).
std::string objective_note_markdown(const SearchOptions& opt, const LoadedInputs& L, const ServingOptions& so,
                                    const SearchReport& rep, const SearchOutcome& out, const SearchSpace& space) {
  const Objective o = parse_objective(opt.objective, "--objective");
  const std::string drawn = "drawn from the whole trace " + L.trace_spec + " (" + std::to_string(L.population.requests.size()) +
                            " requests; the first backlog holds all of them, so --requests does not move the figure), seed " +
                            std::to_string(opt.in.seed) + "; sim/serving/capacity.hpp, docs/optimizers.md";
  if (o == Objective::Capacity) {
    std::string s = "\nWhat was scored: each plan's capacity under " +
                    parse_slo_goal(opt.goal, so.slo_ttft, so.slo_tpot, "--goal").describe() + " — the highest " +
                    (opt.in.arrivals == "trace" ? std::string("rate (the trace's arrival shape)") : std::string("Poisson rate")) +
                    " whose replay meets it, at most the plan's saturated rate, " + drawn + ".\n";
    // A best plan whose capacity is flat is best by less than its figure's own uncertainty.
    if (rep.best_known > 0) {
      const SloCapacity c = ServingEvaluator(evaluator_inputs(opt, L, so, nullptr, Tier::Analytic))
                                .capacity(space.decode(out.runs[rep.best_run].best.genes));
      if (c.flat())
        s += "\nThe best plan's capacity (replayed once, analytic tier) is " + c.flatness() +
             ": plans scored within that of it may serve as much; compare them at several --seed values.\n";
    }
    return s;
  }
  if (o == Objective::Saturated)
    return "\nWhat was scored: each plan's saturated output tok/s — a backlog that keeps every batch full, measured once "
           "its window holds 3 batch turnovers and its rate's 95% interval is within ±2%, " + drawn + ".\n";
  if (o == Objective::TokensPerJoule)
    return "\nWhat was scored: each plan's generated tokens per joule in the saturated measure's last backlog run (GPU "
           "boards and network optics, docs/energy.md), feasible only with TPOT within " +
           parse_slo_goal(opt.goal, so.slo_ttft, so.slo_tpot, "--goal").describe() + ", " + drawn + ".\n";
  if (rep.best_known <= 0 || (o != Objective::Drain && o != Objective::DrainTpot)) return "";
  Metrics m;
  ServingEvaluator(evaluator_inputs(opt, L, so, nullptr, Tier::Analytic))
      .evaluate_reporting(space.decode(out.runs[rep.best_run].best.genes), &m);
  if (m.steady_trusted) return "";
  return "\nObjective note: in the best plan's run, " +
         (m.steady_note.empty() ? std::string("no saturated window was found") : m.steady_note) +
         "; so the objective is its output over the whole run of " + std::to_string(L.trace.requests.size()) +
         " requests: how fast this batch drains, which its longest requests decide as much as the plan's capacity. "
         "For what a plan sustains use --objective capacity (the default) or saturated.\n";
}

// Reports and writes what the search found; returns 0, or 128 + the signal that stopped it.
int finish(const SearchOptions& opt, SearchOutcome& out, const std::vector<SearchRun>& runs,
           const std::vector<RuleGenes>& rules, const SearchSpace& space, const LoadedInputs& L, const ServingOptions& so,
           const std::string& unit, const json& inputs) {
  const int sig = out.complete ? 0 : StopSignals::caught();
  if (!out.complete)
    out.note = "interrupted by " + signal_name(sig) + " after " + std::to_string(out.evaluations) + " of " +
               std::to_string(total_budget(runs, opt.budget)) + " evaluations; resume with: shardsim search --resume " + opt.out;
  SearchReport rep = summarize_search(out, rules, space, opt.reference, opt.in.seed);
  std::string title = "shardsim search: " + L.model.name + " on " + L.cluster->name() + " (" +
                      std::to_string(L.cluster->num_gpus()) + " GPUs), " + std::to_string(L.trace.requests.size()) +
                      " requests" + (so.offline ? " offline" : load_given(opt.in) ? "; " + describe_load(opt.in) : "") + ", " +
                      opt.fidelity + " fidelity";
  std::string md = summary_markdown(rep, out, space, rules, unit, title, opt.budget) + warm_start_markdown(opt) +
                   objective_note_markdown(opt, L, so, rep, out, space);
  bool plotted = write_study_outputs(opt.out, inputs, rep, out, space, unit, md, opt.budget, opt.log_evals);
  write_policy(opt, out, inputs);
  print_done(opt, md, rep, plotted);
  if (sig == 0) return 0;
  std::cerr << "search " << out.note << " (outputs marked incomplete in " << opt.out << ")\n";
  return 128 + sig;
}

SearchSettings make_settings(const SearchOptions& opt, const std::vector<RuleGenes>& rules, const OptimizerParams& params) {
  SearchSettings settings;
  settings.budget = opt.budget;
  settings.threads = opt.resources.threads > 0 ? opt.resources.threads : cores();
  for (const auto& r : rules) settings.portfolio.push_back(r.genes);
  settings.params = &params;
  return settings;
}

// A resumed study: same inputs and runs as its journal, whose evaluations are replayed.
void replay_from(const JournalContents& resumed, const json& header, const SearchOptions& opt, SearchSettings& settings) {
  const std::string path = (std::filesystem::path(opt.out) / kJournalName).string();
  check_same_study(resumed.header, header, path);
  settings.replay = &resumed.runs;
  settings.replay_source = path;
  if (!opt.quiet)
    std::cerr << "resuming " << opt.out << ": " << resumed.evaluations << " evaluations journaled"
              << (resumed.torn ? " (a torn last line ignored)" : "") << "\n";
}

// Returns the exit status: 0, or 128 + the signal that stopped the search.
int run(SearchOptions& opt, CLI::App* cmd) {
  std::optional<JournalContents> resumed;
  if (!opt.resume.empty()) resumed = open_resume(opt, cmd);
  check_options(opt);
  // The worker pool forks its zygote before any thread exists (TBB starts later).
  const Scorer tier_scorer(opt.tier, opt.resources.workers > 0 ? opt.resources.workers : cores(), opt.samples);
  // MPI after the pool's fork, before any thread.
  std::unique_ptr<MpiSession> mpi;
  if (launched_by_mpirun()) mpi = std::make_unique<MpiSession>();
  LoadedInputs L = load_inputs(opt.in);
  ServingOptions so = L.serving;
  // The throughput objectives replay offline unless the user chose the arrivals (or --online).
  so.offline = search_replays_offline(opt.in, opt.objective, opt.online);

  Plan base = default_plan(L.model);
  if (!opt.base.empty()) base = load_plan(opt.base, L.model, *L.cluster);
  const std::unique_ptr<SearchSpace> space_owner = make_search_space(L.model, *L.cluster, base, parse_space_options(opt.space, "--space"));
  const SearchSpace& space = *space_owner;

  auto names = split_list(opt.optimizers);
  if (names.empty()) throw InputError("--optimizers", opt.optimizers, "no optimizer named");
  OptimizerParams params = make_params(opt, names);
  if (!opt.reference.empty() && (std::find(names.begin(), names.end(), opt.reference) == names.end() ||
                                 runs_once(opt.reference)))
    throw InputError("--reference", opt.reference, "expected one of the stochastic optimizers in --optimizers (" + opt.optimizers + ")");
  std::vector<RuleGenes> rules = portfolio_genes(space);
  std::vector<SearchRun> runs = make_runs(names, rules, space, parse_seeds(opt.seeds));
  ServingEvaluator evaluator(evaluator_inputs(opt, L, so, tier_scorer.runner()));
  // Under mpirun, ranks ≥ 1 only score plans for rank 0 (tools/cli/mpi_evaluation).
  if (mpi && mpi->rank() > 0) {
    if (!serve_mpi_evaluations(evaluator, L.model, *L.cluster, opt.resources.threads > 0 ? opt.resources.threads : cores(), opt.rank_timeout))
      MpiSession::exit_without_finalize(0);
    return 0;
  }
  std::unique_ptr<MpiEvaluator> remote;
  if (mpi && mpi->size() > 1) remote = std::make_unique<MpiEvaluator>(evaluator, mpi->size(), opt.rank_timeout);
  const Evaluator& scorer = remote ? static_cast<const Evaluator&>(*remote) : evaluator;

  SearchSettings settings = make_settings(opt, rules, params);
  // Enough driver threads to keep every rank's slots busy (each waits for its remote score).
  if (remote && opt.resources.threads == 0) settings.threads = cores() + remote->remote_slots();
  // … even when mpirun bound this rank to fewer cores (TBB would then start no worker threads).
  std::unique_ptr<tbb::global_control> parallelism;
  if (remote)
    parallelism = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                        static_cast<std::size_t>(settings.threads));
  const json inputs = study_inputs(opt, L, so, settings.threads);
  const json header = journal_header(cmd, inputs, L, base, opt, runs);
  if (resumed) replay_from(*resumed, header, opt, settings);
  std::unique_ptr<JournalWriter> journal;
  settings.on_start = [&] { journal = start_journal(opt, header, resumed); };
  settings.on_batch = [&](const std::vector<ScoredEval>& batch) { journal->write(batch, runs); };
  StopSignals signals;
  settings.stop = [] { return StopSignals::caught() != 0; };
  Progress progress(runs, opt.budget, opt.quiet);
  SearchOutcome out =
      run_search(space, scorer, runs, settings, [&](std::size_t i, const RunRecord& rec) { progress.update(i, rec); });
  progress.finish();
  if (tier_scorer.runner()) out.faults.worker_restarts = static_cast<long>(tier_scorer.runner()->restarts());
  std::vector<int> lost;
  if (remote) {
    lost = remote->lost_ranks();
    if (!opt.quiet) {
      std::cerr << "evaluations scored per MPI rank:";
      for (long n : remote->scored_per_rank()) std::cerr << " " << n;
      std::cerr << "\n";
    }
    for (int r : lost) std::cerr << "MPI rank " << r << " was lost; its evaluations in flight are reported failed\n";
    remote.reset();  // STOP to the ranks left
  }
  const int status = finish(opt, out, runs, rules, space, L, so, evaluator.objective_unit(), inputs);
  if (!lost.empty()) MpiSession::exit_without_finalize(status);  // MPI_Finalize would wait for the lost rank
  return status;
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
      "  shardsim search --model deepseek-v3 --cluster dgx-h100:8 --space all,pools --rate 6 --objective goodput \\\n"
      "                  --out pd/            # prefill/decode pools: the split (xPyD) and each pool's plan\n"
      "  shardsim search --resume ds/        # continue a killed or interrupted study\n"
      "Then: shardsim simulate --model … --cluster … --plan results/best-plan.json\n\n"
      "Every finished evaluation is journaled in <out>/journal.jsonl. Ctrl-C (SIGINT) or SIGTERM stops at the\n"
      "next batch, writes the outputs so far marked incomplete (\"complete\": false) and exits 130 / 143; a\n"
      "second signal exits at once. --resume DIR replays the journal without re-simulating and goes on to\n"
      "the results an uninterrupted run gives; options not given are taken from the journal, options\n"
      "given must match it (--threads, --workers, --quiet, --policy-out may change). A new search into an\n"
      "existing --out replaces that study's files (journal included).");
  add_sim_options(cmd, opt->in);
  // --objective max-rate draws its own rates: --arrivals applies there without --rate.
  cmd->get_option("--arrivals")->remove_needs(cmd->get_option("--rate"));
  add_declared(cmd, static_cast<ProblemSettings&>(*opt), problem_option_decls());
  cmd->add_option("--optimizers", opt->optimizers, "comma list of: megatron, random, exhaustive, ga, sa, rl, rl-noattn")
      ->capture_default_str();
  cmd->add_option("--budget", opt->budget, "evaluations per optimizer run")->capture_default_str()->check(CLI::Range(1L, 10'000'000L));
  cmd->add_flag("--log-evals", opt->log_evals, "draw anytime.png with evaluations on a log scale");
  cmd->add_option("--reference", opt->reference,
                  "the optimizer summary.md tests the others against (Mann–Whitney U, Holm, A12); default rl when it runs, "
                  "else the first stochastic optimizer");
  cmd->add_option("--seeds", opt->seeds,
                  "runs per optimizer: K (seeds 1..K) or a range A..B (megatron, exhaustive: one run)")
      ->capture_default_str();
  add_declared(cmd, opt->resources, scoring_resource_decls(kWorkers | kThreads, "plans"));  // --samples: problem_option_decls
  cmd->add_option("--param", opt->params, "optimizer settings, e.g. ga.population=64,sa.restart=0.2 (docs/optimizers.md)");
  cmd->add_option("--policy-in", opt->policy_in, "warm-start rl / rl-noattn from this saved policy");
  cmd->add_option("--policy-out", opt->policy_out, "save the policy of the best rl / rl-noattn run here");
  cmd->add_option("--rank-timeout", opt->rank_timeout,
                  "under mpirun: seconds without a word from a rank after which it counts as lost (its evaluations in flight "
                  "fail; docs/open-evaluator.md)")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 1e6));
  cmd->add_flag("--quiet,-q", opt->quiet, "no progress line on stderr");
  cmd->add_option("--out,-o", opt->out, "output directory (a study folder; required unless --resume)");
  cmd->add_option("--resume", opt->resume, "continue the study in this folder from its journal (see above)");
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto merged_out = std::make_shared<std::string>();
  CLI::App* merge = cmd->add_subcommand(
      "merge",
      "Combine studies of one problem (the same model, cluster, trace, budget, …; other optimizers or seeds) into\n"
      "one, as if their runs had been one search: the report's statistics over all their seeds. Nothing is\n"
      "simulated again: the merged journal is replayed. The result does not depend on the order of the folders.\n\n"
      "Example:\n"
      "  shardsim search merge study-seeds-1-5 study-seeds-6-10 --out study-1-10");
  merge->add_option("dirs", *dirs, "study folders (each with its journal.jsonl)")->required()->expected(2, 1000);
  merge->add_option("--out", *merged_out, "the merged study's folder")->required();
  merge->fallthrough();  // the search's own options (--quiet, --threads) may follow the folders
  merge->callback([opt, cmd, dirs, merged_out] {
    write_merged_journal(*dirs, *merged_out);
    opt->resume = *merged_out;  // replays every merged evaluation and writes the report
    opt->quiet = true;
    const int status = run(*opt, cmd);
    if (status != 0) std::exit(status);
  });
  auto arms = std::make_shared<std::vector<std::string>>();
  auto compare_budget = std::make_shared<long>(0);
  auto compare_out = std::make_shared<std::string>();
  CLI::App* compare = cmd->add_subcommand(
      "compare",
      "Compare arms of studies of one problem at one budget: a warm start with a cold one, a setting with its default,\n"
      "an optimizer of one study with another's. DIR:OPTIMIZER is one arm; DIR alone, one per stochastic optimizer in it.\n"
      "Per arm: median best with a 95% bootstrap interval, runs reaching 99% of the best known and their evaluations,\n"
      "and against the first arm Mann–Whitney U (Holm) and A12 on the best values and on the evaluations to 99%.\n"
      "Reads the journals; nothing is simulated.\n\n"
      "Example:\n"
      "  shardsim search compare slownic:rl slownic-warm:rl slownic:ga --out warm-vs-cold.md");
  compare->add_option("arms", *arms, "DIR:OPTIMIZER or DIR (its stochastic optimizers), the first arm the reference")
      ->required()
      ->expected(1, 1000);
  compare->add_option("--budget", *compare_budget, "cut every run to this many evaluations (default: the smallest budget)")
      ->check(CLI::Range(1L, 1000000000L));
  compare->add_option("--out", *compare_out, "also write the table (Markdown) to this file");
  compare->callback([arms, compare_budget, compare_out] {
    if (!compare_out->empty()) check_output_path(*compare_out);
    const std::string md = compare_studies(*arms, *compare_budget);
    if (!compare_out->empty()) write_file_atomically(*compare_out, md);
    std::cout << md;
  });
  cmd->callback([opt, cmd, merge, compare] {
    if (merge->parsed() || compare->parsed()) return;  // `search merge` / `search compare` did the work
    const int status = run(*opt, cmd);
    if (status != 0) {
      std::cout.flush();
      std::exit(status);
    }
  });
}

}  // namespace shardsim::cli
