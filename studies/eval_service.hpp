// studies/eval_service.hpp — the open evaluator's operations, one JSON request in, one JSON
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
// The service owns the protocol: the envelope, each operation's arguments, the studies' numbers
// and the error replies; the problem and its studies answer behind EvalProblemApi
// (studies/eval_backend.hpp), so the protocol is fuzzed without the simulator.
// Thread-safety: handle() may be called from several threads (see mu_); the problem parallelises
// "plans" itself.
#pragma once

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>

#include "common/json_reader.hpp"
#include "studies/eval_backend.hpp"

namespace shardsim {

// The most SimGrid worker processes a service (serve-evaluator --workers, Python's Problem) starts.
constexpr int kMaxWorkers = 1024;

class EvalService {
 public:
  // `open`: what an "open" request's problem is opened with (shardsim's: problem_opener(pool),
  // studies/eval_problem.hpp).
  explicit EvalService(ProblemOpener open);
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
  const EvalProblemApi& problem() const;
  EvalStudyApi& study(const json& req);

  ProblemOpener open_;
  // Requests may come from several threads at once (the Python module releases the GIL): "open",
  // "study" and "close" change what the others use and hold it exclusively, every other request
  // holds it shared (EvalStudy locks its own counts).
  std::shared_mutex mu_;
  std::unique_ptr<EvalProblemApi> problem_;
  // Each "study" request starts a study of its own, answered with its number; "evaluate" and
  // "report" name theirs with "study" (the latest when they do not), so an earlier study's handle
  // keeps talking to its own study.
  std::map<long, std::unique_ptr<EvalStudyApi>> studies_;
  long next_study_ = 1;
  bool closed_ = false;
};

}  // namespace shardsim
