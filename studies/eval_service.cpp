// studies/eval_service.cpp — the envelope, each operation's arguments, error replies.
#include "studies/eval_service.hpp"

#include <mutex>
#include <utility>

#include "common/input_error.hpp"

namespace shardsim {

namespace {

constexpr const char* kRequestSource = "request";

json error_reply(const json& id, const std::string& source, const std::string& field, const std::string& message) {
  return {{"id", id}, {"ok", false}, {"error", {{"source", source}, {"field", field}, {"message", message}}}};
}

const json& member(const json& req, const char* key) {
  auto it = req.find(key);
  if (it == req.end()) throw InputError(kRequestSource, std::string("/") + key, "missing");
  return *it;
}

// The request's "plans": an array, checked here once for every backend (eval_backend.hpp).
const json& plans_of(const json& req) {
  const json& plans = member(req, "plans");
  if (!plans.is_array()) throw InputError(kRequestSource, "/plans", "expected an array of plans");
  return plans;
}

std::string text_of(const json& req, const char* key, const std::string& fallback) {
  auto it = req.find(key);
  if (it == req.end()) return fallback;
  if (!it->is_string()) throw InputError(kRequestSource, std::string("/") + key, "expected a string");
  return it->get<std::string>();
}

long integer_of(const json& req, const char* key, long fallback, long lo, long hi) {
  auto it = req.find(key);
  if (it == req.end()) return fallback;
  if (!it->is_number_integer() || it->get<long>() < lo || it->get<long>() > hi)
    throw InputError(kRequestSource, std::string("/") + key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return it->get<long>();
}

}  // namespace

EvalService::EvalService(ProblemOpener open) : open_(std::move(open)) {}
EvalService::~EvalService() = default;

const EvalProblemApi& EvalService::problem() const {
  if (!problem_) throw InputError(kRequestSource, "/op", "no problem is open (send {\"op\": \"open\", \"problem\": {…}} first)");
  return *problem_;
}

EvalStudyApi& EvalService::study(const json& req) {
  problem();
  if (studies_.empty()) throw InputError(kRequestSource, "/op", "no study is started (send {\"op\": \"study\", \"budget\": N} first)");
  if (!req.contains("study")) return *studies_.rbegin()->second;
  const long n = integer_of(req, "study", 0, 1, next_study_ - 1);
  auto it = studies_.find(n);
  if (it == studies_.end()) throw InputError(kRequestSource, "/study", "no study " + std::to_string(n) + " (a new problem ends the old one's studies)");
  return *it->second;
}

json EvalService::handle(const json& request) {
  const json id = request.is_object() && request.contains("id") ? request["id"] : json(nullptr);
  try {
    if (!request.is_object()) throw InputError(kRequestSource, "", "expected a JSON object");
    const std::string op = text_of(request, "op", "");
    if (op.empty()) throw InputError(kRequestSource, "/op", "missing");
    json reply;
    if (op == "open" || op == "study" || op == "close") {
      std::unique_lock<std::shared_mutex> lock(mu_);
      reply = dispatch(op, request);
    } else {
      std::shared_lock<std::shared_mutex> lock(mu_);
      reply = dispatch(op, request);
    }
    reply["id"] = id;
    reply["ok"] = true;
    return reply;
  } catch (const InputError& e) {
    return error_reply(id, e.source(), e.field(), e.what());
  } catch (const std::exception& e) {
    return error_reply(id, "shardsim", "", std::string("internal error: ") + e.what());
  }
}

// One line in, one line out, whatever the line: the strict reader (a number beyond a double, or
// nesting deeper than kMaxJsonDepth, is an error reply, not an exception that ended the service),
// and replies encoded with invalid UTF-8 replaced (an error quoting a 0xFF byte could not be).
std::string EvalService::handle_text(const std::string& line) {
  json request;
  try {
    request = parse_json(line, kRequestSource);
  } catch (const InputError& e) {
    return json_text(error_reply(nullptr, e.source(), e.field(), std::string("not JSON: ") + e.what()));
  }
  return json_text(handle(request));
}

std::string EvalService::refusal(const std::string& message) const {
  return json_text(error_reply(nullptr, kRequestSource, "", message));
}

json EvalService::score_list(const json& req, bool counted) {
  const EvalProblemApi& p = problem();
  const int threads = static_cast<int>(integer_of(req, "threads", 0, 0, 1024));
  if (counted) {
    EvalStudyApi& s = study(req);
    const std::string optimizer = text_of(req, "optimizer", "");
    const auto seed = static_cast<std::uint64_t>(integer_of(req, "seed", 1, 1, 1'000'000'000));
    if (req.contains("plan")) return {{"result", s.evaluate(optimizer, seed, req["plan"])}};
    return {{"results", s.evaluate_many(optimizer, seed, plans_of(req), threads)}};
  }
  if (req.contains("plan")) return {{"result", p.score(req["plan"])}};
  return {{"results", p.score_many(plans_of(req), threads)}};
}

json EvalService::dispatch(const std::string& op, const json& req) {
  if (op == "open") {
    studies_.clear();
    problem_.reset();
    problem_ = open_(member(req, "problem"));
    return {{"problem", problem_->describe()}};
  }
  if (op == "space") return {{"problem", problem().describe()}};
  if (op == "score") return score_list(req, false);
  if (op == "simulate") return {{"result", problem().simulate(member(req, "plan"))}};
  if (op == "study") {
    auto s = problem().study(integer_of(req, "budget", 100, 1, 10'000'000));
    const long n = next_study_++;
    const long budget = s->budget();
    studies_[n] = std::move(s);
    return {{"budget", budget}, {"study", n}};
  }
  if (op == "evaluate") return score_list(req, true);
  if (op == "report") {
    StudyReportOptions o;
    o.out = text_of(req, "out", "");
    o.optimizers = text_of(req, "optimizers", "");
    o.seeds = text_of(req, "seeds", "3");
    o.reference = text_of(req, "reference", "");
    o.threads = static_cast<int>(integer_of(req, "threads", 1, 1, 1024));
    if (req.contains("log_evals") && !req["log_evals"].is_boolean()) throw InputError(kRequestSource, "/log_evals", "expected true or false");
    o.log_evals = req.value("log_evals", false);
    return study(req).report(o);
  }
  if (op == "close") {
    closed_ = true;
    return json::object();
  }
  throw InputError(kRequestSource, "/op", op + ": unknown operation (expected open, space, score, simulate, study, evaluate, report or close)");
}

}  // namespace shardsim
