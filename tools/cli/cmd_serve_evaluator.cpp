// tools/cli/cmd_serve_evaluator.cpp — `shardsim serve-evaluator`: the open evaluator's ask/tell
// protocol over JSON lines on stdin/stdout (studies/eval_service; docs/open-evaluator.md).
//
// One request per line in, one reply per line out, in order, flushed after each. Blank lines are
// skipped; a line over 64 MiB gets an error reply; a line that is not JSON or a request that is wrong gets an error reply and the loop
// goes on. It ends at end of input or after {"op": "close"}; exit status 0. The SimGrid worker
// pool is forked at start (before any thread), so problems may use any fidelity tier.
#include <iostream>
#include <memory>
#include <string>

#include "sim/simgrid/fidelity.hpp"
#include "common/worker_pool.hpp"
#include "tools/cli/commands.hpp"
#include "studies/eval_problem.hpp"
#include "studies/eval_service.hpp"

namespace shardsim::cli {

namespace {

// The longest request line read (a list of 100,000 plans is about 30 MiB). A longer line was read
// whole until memory ran out and the loop ended, exit 0, with no reply for it or any later line.
constexpr std::size_t kMaxLine = std::size_t{64} << 20;

// Reads one line into `line` (without its newline); false at end of input. A line longer than
// kMaxLine is read to its end but not kept: `too_long` says so.
bool read_line(std::istream& in, std::string& line, bool& too_long) {
  line.clear();
  too_long = false;
  std::streambuf* sb = in.rdbuf();
  bool any = false;
  for (int c = sb->sbumpc(); c != std::char_traits<char>::eof(); c = sb->sbumpc()) {
    any = true;
    if (c == '\n') return true;
    if (line.size() < kMaxLine) line.push_back(static_cast<char>(c));
    else too_long = true;
  }
  return any;
}

void serve(int workers) {
  std::unique_ptr<WorkerPool> pool;
  if (workers > 0) pool = std::make_unique<WorkerPool>(workers, simgrid_worker_handler);
  EvalService service(problem_opener(pool.get()));
  std::string line;
  bool too_long = false;
  while (!service.closed() && read_line(std::cin, line, too_long)) {
    if (too_long) {
      std::cout << service.refusal("a request line longer than " + std::to_string(kMaxLine >> 20) +
                                   " MiB (send long plan lists in several requests)")
                << "\n" << std::flush;
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::cout << service.handle_text(line) << "\n" << std::flush;
  }
}

}  // namespace

void add_serve_evaluator_command(CLI::App& app) {
  auto workers = std::make_shared<int>(default_workers());
  auto* cmd = app.add_subcommand(
      "serve-evaluator",
      "Serve the evaluator to an outside optimizer over JSON lines on stdin/stdout: open a problem (the\n"
      "options of 'shardsim search'), list its space, score plans (text, decisions or genomes; infeasible\n"
      "ones come back with their violations), count a study's evaluations against a budget and report it\n"
      "beside the built-in optimizers. Message schema: docs/open-evaluator.md.\n\n"
      "Example:\n"
      "  printf '%s\\n' '{\"id\":1,\"op\":\"open\",\"problem\":{\"model\":\"mixtral-8x7b\",\"cluster\":\"dgx-h100:1\",\"requests\":50}}' \\\n"
      "                '{\"id\":2,\"op\":\"score\",\"plan\":\"tp=4,dp=2\"}' | shardsim serve-evaluator");
  cmd->add_option("--workers", *workers, "SimGrid worker processes for the simgrid and full tiers (0 = analytic only)")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxWorkers));
  cmd->callback([workers] { serve(*workers); });
}

}  // namespace shardsim::cli
