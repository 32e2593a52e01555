// tests/optimizers/search_resume_test.cpp — resumable studies: a study stopped part-way, or killed with its
// journal cut (torn last line included), resumes to the results of an uninterrupted run; a resume
// with other inputs is refused; a rerun leaves no stale files; an interrupted study is marked
// incomplete (in process and on a real SIGINT); faults of the evaluator are counted.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "common/input_error.hpp"
#include "optimizers/search/journal.hpp"
#include "optimizers/space/megatron_portfolio.hpp"
#include "optimizers/search/search_driver.hpp"
#include "optimizers/report/search_report.hpp"
#include "optimizers/space/serving_evaluator.hpp"
#include "tests/cli_runner.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;
namespace fs = std::filesystem;

namespace {

// Counts the plans it scores; scoring is delegated.
class CountingEvaluator : public Evaluator {
 public:
  explicit CountingEvaluator(const Evaluator& inner) : inner_(inner) {}
  Score evaluate(const Plan& p) const override { return evaluate_detailed(p).score; }
  Evaluation evaluate_detailed(const Plan& p) const override {
    ++calls;
    return inner_.evaluate_detailed(p);
  }
  ThreadSafety thread_safety() const override { return inner_.thread_safety(); }
  std::string objective_unit() const override { return inner_.objective_unit(); }
  mutable std::atomic<long> calls{0};

 private:
  const Evaluator& inner_;
};

// A small real study: Mixtral-8x7B on one DGX-H100, 30 requests, analytic tier; megatron,
// random ×2, ga and rl at a budget of 20 (small batches so runs span several of them).
struct Study {
  Study()
      : model(load_model("mixtral-8x7b")), cluster(load_cluster("dgx-h100:1")),
        trace(head(load_request_trace("azure-conv"), 30)), routing(make_routing("synthetic:seed=3", model.routing_shape())),
        space(model, cluster, default_plan(model)), rules(portfolio_genes(space)),
        params(OptimizerParams::parse("ga.population=6,rl.batch=4,random.batch=5", "--param")) {
    EvaluatorInputs in;
    in.model = &model, in.cluster = &cluster, in.cluster_spec = "dgx-h100:1";
    in.trace = &trace, in.routing = routing.get();
    in.serving.offline = true;
    in.objective = Objective::Drain;  // resuming is the subject: the cheap objective
    eval = std::make_unique<ServingEvaluator>(in);
    runs = {{"megatron", 1, static_cast<long>(rules.size())}, {"random", 1, 0}, {"random", 2, 0}, {"ga", 1, 0}, {"rl", 1, 0}};
  }
  SearchSettings settings(int threads) const {
    SearchSettings s;
    s.budget = 20;
    s.threads = threads;
    for (const auto& r : rules) s.portfolio.push_back(r.genes);
    s.params = &params;
    return s;
  }
  json header(const json& inputs = {{"budget", 20}}) const {
    json r = json::array();
    for (const auto& x : runs) r.push_back({{"optimizer", x.optimizer}, {"seed", x.seed}, {"budget", x.budget}});
    return {{"schema", kJournalSchema}, {"args", json::object()}, {"inputs", inputs}, {"runs", r}};
  }
  void write(const fs::path& dir, const SearchOutcome& out) const {
    SearchReport rep = summarize_search(out, rules, space);
    std::string md = summary_markdown(rep, out, space, rules, eval->objective_unit(), "resume test", 20);
    write_search_outputs(dir.string(), json{{"budget", 20}}, rep, out, space, eval->objective_unit(), md, 20);
  }
  ModelSpec model;
  Cluster cluster;
  RequestTrace trace;
  std::unique_ptr<RoutingSource> routing;
  PoolSpace space;
  std::vector<RuleGenes> rules;
  OptimizerParams params;
  std::unique_ptr<ServingEvaluator> eval;
  std::vector<SearchRun> runs;
};

struct Session {
  SearchOutcome out;
  long calls = 0;  // plans the evaluator scored in this session
};

// One session of a study in `dir`: fresh or resumed from dir's journal; stopped once `stop_after`
// evaluations were journaled (−1: never). Writes the outputs into `dir`.
Session run_session(const Study& st, const fs::path& dir, bool resume, long stop_after = -1, int threads = 2) {
  fs::create_directories(dir);
  const std::string path = (dir / kJournalName).string();
  std::optional<JournalContents> c;
  if (resume) c = read_journal(path);
  CountingEvaluator eval(*st.eval);
  SearchSettings s = st.settings(threads);
  std::unique_ptr<JournalWriter> w;
  std::atomic<long> journaled{0};
  s.on_start = [&] {
    w = c ? std::make_unique<JournalWriter>(path, c->valid_bytes) : std::make_unique<JournalWriter>(path, st.header());
  };
  s.on_batch = [&](const std::vector<ScoredEval>& b) {
    w->write(b, st.runs);
    journaled += static_cast<long>(b.size());
  };
  if (stop_after >= 0) s.stop = [&] { return journaled.load() >= stop_after; };
  if (c) s.replay = &c->runs, s.replay_source = path;
  Session r{run_search(st.space, eval, st.runs, s), 0};
  r.calls = eval.calls.load();
  st.write(dir, r.out);
  return r;
}

// results.json without what depends on timing: wall times and the per-run split of cache hits.
json stable_results(const fs::path& dir) {
  json j = json::parse(std::ifstream(dir / "results.json"));
  j.erase("wall_s");
  j["inputs"].erase("threads");
  for (auto& o : j["optimizers"]) o.erase("median_wall_s");
  for (auto& r : j["runs"]) r.erase("wall_s"), r.erase("cache_hits");
  return j;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The first `lines` lines of `from` plus half of the next one (a write torn by kill -9).
void cut_journal(const fs::path& from, const fs::path& to, int lines) {
  std::istringstream in(read_text(from));
  std::string text, line;
  for (int i = 0; i < lines && std::getline(in, line); ++i) text += line + "\n";
  if (std::getline(in, line)) text += line.substr(0, line.size() / 2);
  fs::create_directories(to.parent_path());
  std::ofstream(to, std::ios::binary) << text;
}

fs::path scratch_root() { return fs::temp_directory_path() / ("shardsim-resume-" + std::to_string(::getpid())); }

fs::path scratch(const std::string& name) {
  fs::path p = scratch_root() / name;
  fs::remove_all(p);
  return p;
}

// Removes the test's scratch folders however the test ends.
struct ScratchGuard {
  ~ScratchGuard() {
    std::error_code ec;
    fs::remove_all(scratch_root(), ec);
  }
};

std::string tiny_search(const std::string& extra) {
  return "search --objective drain --model mixtral-8x7b --cluster dgx-h100:1 --fidelity analytic --requests 30 "
         "--optimizers megatron,random,ga --param ga.population=6 --budget 12 --seeds 2 --threads 2 --quiet " + extra;
}

long count_lines(const fs::path& p) {
  std::ifstream f(p);
  long n = 0;
  for (std::string line; std::getline(f, line);) ++n;
  return n;
}

// Starts `shardsim <args>` (space-separated, no quoting) with stdout and stderr to files.
pid_t spawn_cli(const std::string& args, const fs::path& out, const fs::path& err) {
  std::vector<std::string> argv = {SHARDSIM_BINARY};
  std::istringstream ss(args);
  for (std::string a; ss >> a;) argv.push_back(a);
  std::vector<char*> cargs;
  for (auto& a : argv) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  if (posix_spawn(&pid, cargs[0], &fa, nullptr, cargs.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Waits for `pid` up to `seconds`; its exit code, 128 + signal when killed, −1 on timeout.
int wait_exit(pid_t pid, int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

}  // namespace

TEST_CASE("resume: a study stopped after K evaluations resumes to the uninterrupted results (random, ga, rl — 2 threads)") {
  ScratchGuard guard;
  Study st;
  const fs::path full = scratch("full"), part = scratch("part");
  Session a = run_session(st, full, false);
  REQUIRE(a.out.complete);
  REQUIRE(a.out.evaluations > 60);  // the rule plans + 4 runs × 20
  Session b = run_session(st, part, false, 23);
  // The interrupted outputs say so (d), and keep what was told.
  CHECK_FALSE(b.out.complete);
  CHECK(b.out.evaluations < a.out.evaluations);
  json rb = json::parse(std::ifstream(part / "results.json"));
  CHECK(rb["complete"] == false);
  CHECK(rb.contains("note"));
  CHECK(read_text(part / "summary.md").find("**Incomplete**") != std::string::npos);
  // Resumed: same results, the journaled plans were not scored again.
  Session c = run_session(st, part, true);
  CHECK(c.out.complete);
  CHECK(c.out.replayed == b.out.evaluations);
  CHECK(c.calls < a.calls);
  CHECK(stable_results(part) == stable_results(full));
  CHECK(read_text(part / "anytime.csv") == read_text(full / "anytime.csv"));
  for (std::size_t i = 0; i < st.runs.size(); ++i) CHECK(c.out.runs[i].state == a.out.runs[i].state);
  // The journal now holds the whole study: resuming it again scores nothing.
  CHECK(read_journal((part / kJournalName).string()).evaluations == a.out.evaluations);
  Session d = run_session(st, part, true, -1, 1);
  CHECK(d.calls == 0);
  CHECK(stable_results(part) == stable_results(full));
}

TEST_CASE("resume: a killed study (journal cut after K lines, torn last line) resumes to the same results") {
  ScratchGuard guard;
  Study st;
  const fs::path full = scratch("full"), killed = scratch("killed");
  Session a = run_session(st, full, false);
  for (int k : {1, 37}) {
    fs::remove_all(killed);
    cut_journal(full / kJournalName, killed / kJournalName, k + 1);
    JournalContents c = read_journal((killed / kJournalName).string());
    CHECK(c.torn);
    CHECK(c.evaluations == k);
    Session r = run_session(st, killed, true);
    CHECK(r.out.replayed == k);
    CHECK(stable_results(killed) == stable_results(full));
    // The torn line was cut off before appending: the journal reads whole again.
    JournalContents after = read_journal((killed / kJournalName).string());
    CHECK_FALSE(after.torn);
    CHECK(after.evaluations == a.out.evaluations);
  }
}

TEST_CASE("resume: journal lines keep scores exactly — damage and divergence are refused with the line named") {
  ScratchGuard guard;
  const fs::path dir = scratch("lines");
  fs::create_directories(dir);
  const std::string path = (dir / kJournalName).string();
  std::vector<SearchRun> runs = {{"random", 7, 3}};
  json header = {{"schema", kJournalSchema}, {"args", json::object()}, {"inputs", {{"budget", 3}}}, {"runs", {{{"optimizer", "random"}, {"seed", 7}, {"budget", 3}}}}};
  const std::vector<double> values = {0.1, 1.0 / 3, 12345.678901234567, 4.9e-324, 1e300};
  {
    JournalWriter w(path, header);
    for (std::size_t i = 0; i < values.size(); ++i) {
      ScoredEval e{0, static_cast<long>(i) + 1, Genes{1, 2}, "k" + std::to_string(i), {}};
      e.eval.score.feasible = i % 2 == 0;
      e.eval.score.objective = values[i];
      e.eval.score.violation = values[i] / 7;
      e.eval.score.reason = "quote \" and\nnewline";
      e.eval.faults = {16, static_cast<long>(i), "worker died"};
      w.write({e}, runs);
    }
  }
  JournalContents c = read_journal(path);
  REQUIRE(c.runs.size() == 1);
  REQUIRE(c.runs[0].size() == values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    CHECK(c.runs[0][i].eval.score.objective == values[i]);  // bit-exact
    CHECK(c.runs[0][i].eval.score.violation == values[i] / 7);
    CHECK(c.runs[0][i].eval.faults.failed == static_cast<long>(i));
    CHECK(c.runs[0][i].eval.score.reason == "quote \" and\nnewline");
  }
  // A damaged line before the last is refused, naming it.
  std::string text = read_text(path);
  std::string damaged = text;
  damaged.replace(damaged.find("\"eval\":2"), 8, "\"eval\":9");
  std::ofstream(path, std::ios::binary) << damaged;
  CHECK_THROWS_WITH_AS(read_journal(path), doctest::Contains("line 3"), InputError);
  std::ofstream(path, std::ios::binary) << "{\"schema\":\"something else\"}\n";
  CHECK_THROWS_WITH_AS(read_journal(path), doctest::Contains("line 1: not a search journal"), InputError);
  CHECK_THROWS_WITH_AS(read_journal((dir / "nothing.jsonl").string()), doctest::Contains("not a study"), InputError);
  // A journal whose plans differ from what the optimizer proposes is refused, naming the line.
  Study st;
  const fs::path full = scratch("full");
  run_session(st, full, false);
  std::string j = read_text(full / kJournalName);
  const std::size_t at = j.find("\"key\":\"", j.find('\n')) + 7;
  j.insert(at, "x");
  std::ofstream(full / kJournalName, std::ios::binary) << j;
  CHECK_THROWS_WITH_AS(run_session(st, full, true), doctest::Contains("line 2"), InputError);
}

TEST_CASE("resume: other inputs are refused with one line naming the field (exit 2)") {
  ScratchGuard guard;
  json a = {{"schema", kJournalSchema}, {"inputs", {{"budget", 20}, {"model", "mixtral-8x7b"}}}, {"runs", json::array()}};
  json b = a;
  b["inputs"]["budget"] = 30;
  CHECK_THROWS_WITH_AS(check_same_study(a, b, "s/journal.jsonl"), doctest::Contains("/inputs/budget: the study was started with 20"),
                       InputError);
  CHECK_NOTHROW(check_same_study(a, a, "s/journal.jsonl"));
  const fs::path dir = scratch("cli-refuse");
  test::CliResult r = test::run_cli(tiny_search("--out " + dir.string()));
  REQUIRE(r.exit_code == 0);
  // Given on the command line with another value than the study's …
  r = test::run_cli("search --resume " + dir.string() + " --budget 13");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("error: " + dir.string() + "/journal.jsonl: --budget: the study was started with 12") == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // … or not given when the study started (a default), compared on the effective inputs.
  r = test::run_cli("search --resume " + dir.string() + " --samples 8");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("/inputs/samples: the study was started with 16, this command gives 8") != std::string::npos);
  // Not a study.
  fs::create_directories(dir / "empty");
  r = test::run_cli("search --resume " + (dir / "empty").string());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("journal.jsonl: cannot read the journal") != std::string::npos);
}

TEST_CASE("resume: the command line resumes a killed study to the results of an uninterrupted one") {
  ScratchGuard guard;
  const fs::path full = scratch("cli-full"), killed = scratch("cli-killed");
  test::CliResult r = test::run_cli(tiny_search("--out " + full.string()));
  REQUIRE(r.exit_code == 0);
  cut_journal(full / kJournalName, killed / kJournalName, 20);
  r = test::run_cli("search --resume " + killed.string() + " --quiet --threads 2");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(stable_results(killed) == stable_results(full));
  CHECK(count_lines(killed / kJournalName) == count_lines(full / kJournalName));
}

TEST_CASE("resume: a journal whose runs lack an optimizer, seed or budget is refused naming the field (exit 2)") {
  ScratchGuard guard;
  const fs::path dir = scratch("bad-runs");
  fs::create_directories(dir);
  const std::string head = std::string("{\"schema\": \"") + kJournalSchema + "\", \"args\": {}, \"inputs\": {\"budget\": 3}, \"runs\": ";
  for (const auto& [runs, field] : std::vector<std::pair<std::string, std::string>>{
           {"[{\"seed\": 1, \"budget\": 3}]", "/runs/0/optimizer"},
           {"[{\"optimizer\": 7, \"seed\": 1, \"budget\": 3}]", "/runs/0/optimizer"},
           {"[{\"optimizer\": \"sa\", \"budget\": 3}]", "/runs/0/seed"},
           {"[{\"optimizer\": \"sa\", \"seed\": 1}, 5]", "/runs/0/budget"},
           {"[{\"optimizer\": \"sa\", \"seed\": 1, \"budget\": 3}, 5]", "/runs/1"}}) {
    CAPTURE(runs);
    std::ofstream(dir / kJournalName) << head << runs << "}\n";
    try {
      (void)read_journal((dir / kJournalName).string());
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.field() == "line 1: " + field);
    }
    const test::CliResult r = test::run_cli("search compare " + dir.string());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(field) != std::string::npos);
  }
  // A FIFO where the journal should be: refused at once (opening it waited for a writer forever).
  fs::remove(dir / kJournalName);
  REQUIRE(::mkfifo((dir / kJournalName).c_str(), 0600) == 0);
  for (const std::string& cmd : {"search compare " + dir.string(), "search --resume " + dir.string()}) {
    const fs::path err = dir / "err.txt";
    const std::string line = "timeout 20 " + std::string(SHARDSIM_BINARY) + " " + cmd + " >/dev/null 2>" + err.string();
    const int status = std::system(line.c_str());
    CAPTURE(cmd);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 2);  // timeout's 124 was a hang
    CHECK(read_text(err).find("is not a regular file") != std::string::npos);
  }
}

TEST_CASE("resume: a journal's --policy-out is not followed (a study folder cannot write outside itself)") {
  ScratchGuard guard;
  const fs::path dir = scratch("policy");
  const fs::path outside = dir.parent_path() / "policy-outside.json";
  fs::create_directories(dir.parent_path());
  test::CliResult r = test::run_cli("search --objective drain --model mixtral-8x7b --cluster dgx-h100:1 --requests 20 "
                                    "--optimizers rl --budget 4 --seeds 1 --quiet --policy-out " + outside.string() +
                                    " --out " + dir.string());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(fs::exists(outside));  // written when the user asked for it
  fs::remove(outside);
  r = test::run_cli("search --resume " + dir.string() + " --quiet");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(fs::exists(outside));  // the journal named it; the command did not
  CHECK(r.err.find("--policy-out") != std::string::npos);
  r = test::run_cli("search --resume " + dir.string() + " --quiet --policy-out " + outside.string());
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(outside));  // given again, it is written
  fs::remove(outside);
}

TEST_CASE("search: a file name that is not UTF-8 is refused before the study starts — simulate writes its JSON") {
  ScratchGuard guard;
  const fs::path dir = scratch("utf8");
  const fs::path model = dir / "mix\xff.json";  // legal on Linux, not JSON text
  fs::create_directories(dir);
  fs::copy_file(fs::path(SHARDSIM_SOURCE_DIR) / "tests/data/hf-mixtral-8x7b.json", model);
  test::CliResult r = test::run_cli("search --objective drain --model '" + model.string() +
                                    "' --cluster dgx-h100:1 --requests 20 --optimizers random --budget 2 --seeds 1 --quiet --out " +
                                    (dir / "study").string());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--model") != std::string::npos);
  CHECK(r.err.find("not UTF-8") != std::string::npos);
  CHECK(r.err.find("\xff") == std::string::npos);  // the byte itself never reaches the terminal
  CHECK_FALSE(fs::exists(dir / "study"));
  r = test::run_cli("simulate --model '" + model.string() + "' --cluster dgx-h100:1 --requests 10 --json " + (dir / "s.json").string());
  CHECK(r.exit_code == 0);  // was an internal error at the end, after the whole run
  CHECK(json::parse(std::ifstream(dir / "s.json")).contains("inputs"));
}

TEST_CASE("search: a rerun into the same --out leaves no stale best-plan.json and keeps the user's files") {
  ScratchGuard guard;
  const fs::path dir = scratch("rerun");
  test::CliResult r = test::run_cli(tiny_search("--out " + dir.string()));
  REQUIRE(r.exit_code == 0);
  REQUIRE(fs::exists(dir / "best-plan.json"));
  std::ofstream(dir / "notes.txt") << "mine\n";
  // dp=8 (Mixtral in BF16 on each GPU) overflows HBM whatever the batching: nothing is feasible.
  r = test::run_cli("search --objective drain --model mixtral-8x7b --cluster dgx-h100:1 --fidelity analytic --requests 30 --space batching "
                    "--base dp=8 --optimizers random --budget 3 --seeds 1 --quiet --out " + dir.string());
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(json::parse(std::ifstream(dir / "results.json"))["best_known"] == 0);
  CHECK_FALSE(fs::exists(dir / "best-plan.json"));
  CHECK(read_text(dir / "notes.txt") == "mine\n");
  CHECK(count_lines(dir / kJournalName) == 1 + 3);  // the new study's journal only
  for (const auto& e : fs::directory_iterator(dir.parent_path()))
    CHECK(e.path().filename().string().find(".staging-") == std::string::npos);
}

TEST_CASE("search: --out naming a link to a folder writes into that folder — the link stays a link") {
  ScratchGuard guard;
  const fs::path real = scratch("real"), link = scratch("link");
  fs::create_directories(real);
  std::ofstream(real / "notes.txt") << "mine\n";
  fs::create_directory_symlink(real, link);
  const test::CliResult r = test::run_cli(tiny_search("--out " + link.string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::is_symlink(link));  // was exchanged with the staging folder and became a folder
  CHECK(read_text(real / "notes.txt") == "mine\n");
  CHECK(fs::exists(real / "results.json"));
  CHECK(fs::exists(real / kJournalName));
}

TEST_CASE("search: a run killed while moving the user's files back loses none of them — the next run puts them back") {
  ScratchGuard guard;
  const fs::path dir = scratch("killed-carry");
  fs::create_directories(dir);
  std::ofstream(dir / "notes.txt") << "kept\n";
  // A finished process's pid: the one whose swapped-out folder (renameat2 left it at the staging
  // name) still holds user files that it had not carried over when it died.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);
  const fs::path left = dir.parent_path() / (".killed-carry.staging-" + std::to_string(child));
  fs::create_directories(left / "sub");
  for (int k = 0; k < 50; ++k) std::ofstream(left / ("user-" + std::to_string(k) + ".txt")) << k << "\n";
  std::ofstream(left / "sub" / "deep.txt") << "deep\n";
  std::ofstream(left / "notes.txt") << "clashes\n";   // same name as a file in the folder: kept where it is
  std::ofstream(left / "summary.md") << "old output\n";  // the program's own: removed
  test::CliResult r = test::run_cli(tiny_search("--out " + dir.string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (int k = 0; k < 50; ++k) CHECK(read_text(dir / ("user-" + std::to_string(k) + ".txt")) == std::to_string(k) + "\n");
  CHECK(read_text(dir / "sub" / "deep.txt") == "deep\n");
  CHECK(read_text(dir / "notes.txt") == "kept\n");
  // The clashing file is not deleted: the leftover folder stays, holding only it, and stderr says so.
  CHECK(read_text(left / "notes.txt") == "clashes\n");
  CHECK_FALSE(fs::exists(left / "summary.md"));
  CHECK(r.err.find("moved 51 of your files back") != std::string::npos);
  CHECK(r.err.find("kept " + left.string()) != std::string::npos);
}

TEST_CASE("search: summary.md says when the throughput objective had no saturated window to measure") {
  ScratchGuard guard;
  // 40 requests on 8 GPUs end before their batches turn over: the objective is the whole run's output.
  const fs::path small = scratch("drain");
  test::CliResult r = test::run_cli("search --objective drain --model mixtral-8x7b --cluster dgx-h100:1 --fidelity analytic --requests 40 "
                                    "--optimizers megatron --budget 2 --seeds 1 --quiet --out " + small.string());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("Objective note: in the best plan's run, no saturated window") != std::string::npos);
  CHECK(read_text(small / "summary.md").find("over the whole run of 40 requests") != std::string::npos);
  // 5,000 requests saturate the same plans (the preset's 1,024 sequences): a steady-state objective, no note.
  const fs::path big = scratch("steady");
  r = test::run_cli("search --objective drain --model mixtral-8x7b --cluster dgx-h100:1 --fidelity analytic --requests 5000 "
                    "--optimizers megatron --budget 2 --seeds 1 --quiet --out " + big.string());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("Objective note") == std::string::npos);
  CHECK(read_text(big / "summary.md").find("Objective note") == std::string::npos);
}

TEST_CASE("search: SIGINT stops at a batch boundary, writes outputs marked incomplete and exits 130") {
  ScratchGuard guard;
  const fs::path dir = scratch("sigint");
  fs::create_directories(dir.parent_path());
  const fs::path out = dir.parent_path() / "stdout", err = dir.parent_path() / "stderr";
  pid_t pid = spawn_cli("search --objective drain --model mixtral-8x7b --cluster dgx-h100:1 --fidelity analytic --requests 30 "
                        "--optimizers random --budget 100000 --seeds 1 --threads 2 --quiet --out " + dir.string(),
                        out, err);
  REQUIRE(pid > 0);
  for (int i = 0; i < 600 && count_lines(dir / kJournalName) < 11; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(count_lines(dir / kJournalName) >= 11);  // (no REQUIRE: the child must be stopped either way)
  ::kill(pid, SIGINT);
  const int code = wait_exit(pid, 60);
  INFO(read_text(err));
  CHECK(code == 130);
  json res = json::parse(std::ifstream(dir / "results.json"));
  CHECK(res["complete"] == false);
  CHECK(res["note"].get<std::string>().find("SIGINT") != std::string::npos);
  CHECK(res["runs"][0]["complete"] == false);
  CHECK(res["evaluations"].get<long>() == count_lines(dir / kJournalName) - 1);
  CHECK(read_text(dir / "summary.md").find("**Incomplete**") != std::string::npos);
  CHECK(read_text(err).find("shardsim search --resume " + dir.string()) != std::string::npos);
}

namespace {

// Plans with tp = 4 have 2 of 16 SimGrid samples fail; plans with tp = 8 fail outright.
class FaultyEvaluator : public Evaluator {
 public:
  Score evaluate(const Plan& p) const override { return evaluate_detailed(p).score; }
  Evaluation evaluate_detailed(const Plan& p) const override {
    if (p.deg.tp == 8) throw std::runtime_error("worker died");
    Evaluation e;
    e.score.feasible = true;
    e.score.objective = 100.0 + p.deg.tp + p.engine.max_seqs / 64.0;
    e.faults.sampled = 16;
    e.faults.failed = p.deg.tp == 4 ? 2 : 0;
    if (e.faults.failed) e.faults.error = "worker died: killed by signal 9";
    return e;
  }
  ThreadSafety thread_safety() const override { return ThreadSafety::Constant; }
  std::string objective_unit() const override { return "points"; }
};

}  // namespace

TEST_CASE("search: failed evaluations and failed SimGrid samples are counted per run and in total") {
  ScratchGuard guard;
  ModelSpec m = load_model("mixtral-8x7b");
  Cluster c = load_cluster("dgx-h100:1");
  SpaceOptions o;
  o.sharding = o.mapping = false;
  PoolSpace space(m, c, default_plan(m), o);
  auto rules = portfolio_genes(space);
  SearchSettings st;
  st.budget = 30;
  st.threads = 2;
  for (const auto& r : rules) st.portfolio.push_back(r.genes);
  FaultyEvaluator eval;
  SearchOutcome out = run_search(space, eval, {{"megatron", 1, static_cast<long>(rules.size())}, {"random", 1, 0}}, st);
  long failed_samples = 0;
  for (const auto& r : out.runs) failed_samples += r.tally.failed_samples;
  CHECK(out.faults.failed_samples > 0);
  CHECK(out.faults.failed_samples <= failed_samples);  // totals count each plan once
  CHECK(out.faults.degraded_evaluations * 2 == out.faults.failed_samples);
  CHECK(out.faults.failed_evaluations > 0);             // the megatron TP-8 rule plans
  SearchReport rep = summarize_search(out, rules, space);
  std::string md = summary_markdown(rep, out, space, rules, "points", "faults", 30);
  CHECK(md.find("SimGrid samples failed") != std::string::npos);
  const fs::path dir = scratch("faults");
  write_search_outputs(dir.string(), json::object(), rep, out, space, "points", md, 30);
  json res = json::parse(std::ifstream(dir / "results.json"));
  CHECK(res["faults"]["simgrid_failed_samples"] == out.faults.failed_samples);
  CHECK(res["runs"][1]["faults"]["simgrid_failed_samples"] == out.runs[1].tally.failed_samples);
  CHECK(res["faults"]["errors"].size() >= 1);
}
