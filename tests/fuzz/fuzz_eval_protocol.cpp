// tests/fuzz/fuzz_eval_protocol.cpp — the open evaluator's JSON-lines protocol (studies/eval_service):
// whole conversations, one request per line, through EvalService::handle_text as serve-evaluator
// and the Python module call it. The problem behind it is a stand-in (studies/eval_backend.hpp),
// so the target fuzzes the protocol — the envelope, each operation's arguments, study numbers and
// budgets, error replies — not the simulator: plan strings go to the real plan loader, budgets are
// counted, a report writes nothing. Every line gets exactly one reply, and every reply is one line
// of JSON that loads back with the strict reader: an object with "ok" true or false and "id" (the
// request's, or null when there is none), an error with a one-line message naming source and
// field; a study is numbered one more than the last; "close" ends the conversation. A reply may
// not be missing, spread over lines, or be an exception (the service must never throw).
#include <map>
#include <memory>
#include <utility>

#include "checks.hpp"
#include "sim/plan/plan.hpp"
#include "studies/eval_service.hpp"

namespace {

using shardsim::InputError;
using shardsim::json;
using namespace shardsim;

// Plans as the real problem takes them, minus the space: text through the real loader, a decision
// object or a genome of integers accepted as they are; anything else is an error naming /plan.
json fake_score(const json& plan, const std::string& field) {
  if (plan.is_string()) {
    const shardsim::Plan p = shardsim::plan_from_string(plan.get<std::string>(), fuzz::plan_gpus(), fuzz::plan_defaults());
    return {{"feasible", true}, {"plan", plan}, {"objective", p.deg.tp}};
  }
  if (plan.is_object()) return {{"feasible", false}, {"plan", nullptr}};
  if (plan.is_array()) {
    for (const auto& g : plan)
      if (!g.is_number_integer()) throw InputError("request", field, "expected a genome of integers");
    return {{"feasible", true}, {"plan", nullptr}};
  }
  throw InputError("request", field, "expected a plan string, decisions or a genome");
}

class FakeStudy : public EvalStudyApi {
 public:
  explicit FakeStudy(long budget) : budget_(budget) {}
  long budget() const override { return budget_; }
  json evaluate(const std::string& optimizer, std::uint64_t seed, const json& plan) override {
    take(optimizer, seed, 1);
    return fake_score(plan, "/plan");
  }
  std::vector<json> evaluate_many(const std::string& optimizer, std::uint64_t seed, const json& plans, int) override {
    std::vector<json> out;
    for (std::size_t i = 0; i < plans.size(); ++i) out.push_back(fake_score(plans[i], "/plans/" + std::to_string(i)));
    take(optimizer, seed, static_cast<long>(plans.size()));
    return out;
  }
  json report(const StudyReportOptions& o) const override {
    if (o.out.empty()) throw InputError("request", "/out", "missing");
    return {{"summary", ""}, {"out", o.out}, {"files", json::array()}};
  }

 private:
  void take(const std::string& optimizer, std::uint64_t seed, long n) {
    long& used = used_[{optimizer, seed}];
    if (used + n > budget_) throw InputError("request", "/optimizer", "budget spent");
    used += n;
  }
  long budget_;
  std::map<std::pair<std::string, std::uint64_t>, long> used_;
};

class FakeProblem : public EvalProblemApi {
 public:
  json describe() const override { return {{"decisions", json::array()}}; }
  json score(const json& plan) const override { return fake_score(plan, "/plan"); }
  std::vector<json> score_many(const json& plans, int) const override {
    std::vector<json> out;
    for (std::size_t i = 0; i < plans.size(); ++i) {
      try {
        out.push_back(fake_score(plans[i], "/plans/" + std::to_string(i)));
      } catch (const InputError& e) {
        out.push_back({{"error", {{"source", e.source()}, {"field", e.field()}, {"message", e.what()}}}});
      }
    }
    return out;
  }
  json simulate(const json& plan) const override { return fake_score(plan, "/plan"); }
  std::unique_ptr<EvalStudyApi> study(long budget) const override { return std::make_unique<FakeStudy>(budget); }
};

std::unique_ptr<EvalProblemApi> open_fake(const json& options) {
  if (!options.is_object()) throw InputError("problem", "", "expected an object of search options");
  if (options.contains("model") && !options["model"].is_string()) throw InputError("problem", "/model", "expected a string");
  return std::make_unique<FakeProblem>();
}

bool one_line(const std::string& s) { return s.find('\n') == std::string::npos; }

// The reply to `line` obeys the protocol; returns it loaded.
json check_reply(const std::string& line, const std::string& reply) {
  FUZZ_CHECK(one_line(reply), "a reply spread over lines");
  json r;
  fuzz::must("parse_json(reply)", [&] { r = shardsim::parse_json(reply, "reply"); });
  FUZZ_CHECK(r.is_object() && r.contains("ok") && r["ok"].is_boolean() && r.contains("id"), "reply without ok or id: " + reply.substr(0, 200));
  json request;
  bool parsed = true;
  try {
    request = shardsim::parse_json(line, "request");
  } catch (const InputError&) {
    parsed = false;
  }
  const json id = parsed && request.is_object() && request.contains("id") ? request["id"] : json(nullptr);
  FUZZ_CHECK(r["id"] == id, "the reply's id is not the request's");
  if (!r["ok"].get<bool>()) {
    const json& e = r["error"];
    FUZZ_CHECK(e.is_object() && e["source"].is_string() && e["field"].is_string() && e["message"].is_string(), "a malformed error");
    FUZZ_CHECK(one_line(e["message"].get<std::string>()), "an error message spread over lines");
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  EvalService service(open_fake);
  long last_study = 0;
  std::size_t begin = 0;
  while (begin <= text.size() && !service.closed()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // serve-evaluator skips blank lines
    std::string reply;
    fuzz::must("EvalService::handle_text", [&] { reply = service.handle_text(line); });
    const json r = check_reply(line, reply);
    if (r["ok"].get<bool>() && r.contains("study")) {
      FUZZ_CHECK(r["study"].is_number_integer() && r["study"].get<long>() == last_study + 1, "studies not numbered in turn");
      last_study = r["study"].get<long>();
    }
  }
  return 0;
}
