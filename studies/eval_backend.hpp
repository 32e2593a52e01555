// studies/eval_backend.hpp — what the open evaluator's protocol (studies/eval_service) asks
// of a problem and a study, apart from how they are answered.
//
// Owns: EvalProblemApi, EvalStudyApi, ProblemOpener and StudyReportOptions. The service checks a
// request's envelope and arguments, then calls these; shardsim's own answer is EvalProblem and
// EvalStudy (studies/eval_problem, eval_study: the simulator behind them, `problem_opener`),
// and the protocol's fuzz target (tests/fuzz/fuzz_eval_protocol.cpp) puts a stand-in here so
// that whole conversations are fuzzed without the simulator. Every call may throw InputError for
// a bad argument (the service turns it into an error reply); the rest of its contract is
// EvalProblem's and EvalStudy's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/json_reader.hpp"

namespace shardsim {

struct StudyReportOptions {
  std::string out;                   // the study folder (required)
  std::string optimizers;            // built-in ones to run beside, comma list ("" = none)
  std::string seeds = "3";           // their seeds: K or A..B
  std::string reference;             // the optimizer the others are tested against ("" = the report's default)
  int threads = 1;
  bool log_evals = false;
};

// A study: an outside optimizer's evaluations counted against a budget (EvalStudy).
class EvalStudyApi {
 public:
  virtual ~EvalStudyApi() = default;
  virtual long budget() const = 0;
  virtual json evaluate(const std::string& optimizer, std::uint64_t seed, const json& plan) = 0;
  // `plans` is an array (EvalService checks). `threads`: 0 = all cores.
  virtual std::vector<json> evaluate_many(const std::string& optimizer, std::uint64_t seed, const json& plans,
                                          int threads) = 0;
  virtual json report(const StudyReportOptions& o) const = 0;
};

// An open problem (EvalProblem): its description, plans scored and simulated, studies on it.
class EvalProblemApi {
 public:
  virtual ~EvalProblemApi() = default;
  virtual json describe() const = 0;
  virtual json score(const json& plan) const = 0;
  // Each plan of the array `plans` (EvalService checks it is one) answers for itself: a malformed one gets {"error": {source,
  // field "/plans/i…", message}} in its place. `threads`: 0 = all cores.
  virtual std::vector<json> score_many(const json& plans, int threads) const = 0;
  virtual json simulate(const json& plan) const = 0;
  // A new study of `budget` evaluations per run; it may keep a reference to this problem, which
  // the service keeps open while the study lives.
  virtual std::unique_ptr<EvalStudyApi> study(long budget) const = 0;
};

// Opens a problem from the "problem" object of an "open" request.
using ProblemOpener = std::function<std::unique_ptr<EvalProblemApi>(const json& options)>;

}  // namespace shardsim
