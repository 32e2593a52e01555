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

#include <memory>
#include <string>

#include "common/json_reader.hpp"

namespace shardsim {
class WorkerPool;
}

namespace shardsim::cli {

class EvalProblem;
class EvalStudy;

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
  bool closed() const { return closed_; }

 private:
  json dispatch(const std::string& op, const json& req);
  json score_list(const json& req, bool counted);
  const EvalProblem& problem() const;
  EvalStudy& study();

  WorkerPool* pool_;
  std::unique_ptr<EvalProblem> problem_;
  std::unique_ptr<EvalStudy> study_;
  bool closed_ = false;
};

}  // namespace shardsim::cli
