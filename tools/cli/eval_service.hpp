// tools/cli/eval_service.hpp — the open evaluator's operations, one JSON request in, one JSON
// reply out: what `shardsim serve-evaluator` speaks over JSON lines and what the Python module
// calls (docs/open-evaluator.md has the message schema).
//
// Owns: EvalService. Requests {"id": any (echoed), "op": NAME, …}; replies {"id", "ok": true, …}
// or {"id", "ok": false, "error": {"source", "field", "message"}} — a bad request never ends the
// conversation. Operations:
//   open      {"problem": {search options}}            → {"problem": describe()}  (replaces any open problem)
//   space                                               → {"problem": describe()}
//   score     {"plan": P} | {"plans": [P…], "threads"}  → {"result": …} | {"results": […]}
//   simulate  {"plan": P}                               → {"result": shardsim.result/1 JSON}
//   study     {"budget": N}                             → {"budget"}     (starts a new study)
//   evaluate  {"optimizer", "seed", "plan": P} | {"optimizer", "seed", "plans": [P…], "threads"}
//                                                       → {"result"} | {"results"}  (counted against the budget)
//   report    {"out", "optimizers", "seeds", "reference", "threads", "log_evals"} → {"summary", "files", …}
//   close                                               → {}          (the loop ends)
// Thread-safety: handle() from one thread at a time; it parallelises "plans" itself (TBB).
#pragma once

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>

#include "common/json_reader.hpp"

namespace shardsim {
class WorkerPool;
}

namespace shardsim::cli {

class EvalProblem;
class EvalStudy;

// The most SimGrid worker processes a service (serve-evaluator --workers, Python's Problem) starts.
constexpr int kMaxWorkers = 1024;

class EvalService {
 public:
  // `pool`: the SimGrid worker pool for the simgrid and full tiers (null = analytic only); it
  // must be forked before any thread exists and outlive the service.
  explicit EvalService(WorkerPool* pool);
  ~EvalService();
  // One request → its reply (never throws for bad input: the reply says what was wrong).
  json handle(const json& request);
  // The same on text: a line that is not JSON gets an error reply naming the line.
  std::string handle_text(const std::string& line);
  // The error reply (as text) for a line refused before it was read as JSON, with `message`.
  std::string refusal(const std::string& message) const;
  bool closed() const { return closed_; }

 private:
  json dispatch(const std::string& op, const json& req);
  json score_list(const json& req, bool counted);
  const EvalProblem& problem() const;
  EvalStudy& study(const json& req);

  WorkerPool* pool_;
  // Requests may come from several threads at once (the Python module releases the GIL): "open",
  // "study" and "close" change what the others use and hold it exclusively, every other request
  // holds it shared (EvalStudy locks its own counts).
  std::shared_mutex mu_;
  std::unique_ptr<EvalProblem> problem_;
  // Each "study" request starts a study of its own, answered with its number; "evaluate" and
  // "report" name theirs with "study" (the latest when they do not), so an earlier study's handle
  // keeps talking to its own study.
  std::map<long, std::unique_ptr<EvalStudy>> studies_;
  long next_study_ = 1;
  bool closed_ = false;
};

}  // namespace shardsim::cli
