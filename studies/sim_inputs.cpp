// studies/sim_inputs.cpp — the shared scoring inputs: their declarations and their loading.
#include "studies/sim_inputs.hpp"

#include <cstdio>
#include <set>
#include <sstream>

#include "common/input_error.hpp"
#include "common/text_number.hpp"
#include "sim/plan/plan_check.hpp"

namespace shardsim {

namespace {

std::vector<OptionDecl<SimInputs>> make_sim_option_decls() {
  using D = OptionDecl<SimInputs>;
  std::vector<D> v;
  v.reserve(32);  // the references add() returns stay valid
  auto add = [&](D d, bool show_default = true) -> D& {
    d.show_default = show_default;
    v.push_back(std::move(d));
    return v.back();
  };
  add(decl("--model,-m", &SimInputs::model, "model preset, model JSON or Hugging Face config.json"));
  add(decl("--cluster,-c", &SimInputs::cluster, "cluster shorthand (dgx-h100:N, …) or cluster JSON"));
  add(decl("--trace,-t", &SimInputs::trace, "request trace: azure-conv, a CSV/JSONL path, or synthetic:…"));
  add(decl("--requests,-n", &SimInputs::requests, "use the first N requests of the trace")).check = {OptionKind::Integer, 1, 10'000'000, {}};
  D& arrivals = add(decl("--arrivals", &SimInputs::arrivals,
                         "open-loop rates: poisson (exponential gaps from --seed) | trace (the trace's own gaps, rescaled)"));
  arrivals.check.choices = {"poisson", "trace"};
  arrivals.needs = {"--rate"};
  D& offline = add(decl("--offline", &SimInputs::offline, "all requests arrive at t=0 (MLPerf Offline-style throughput)"), false);
  offline.load = true;
  offline.excludes = {"--rate", "--concurrency"};
  D& rate = add(decl("--rate", &SimInputs::rate,
                     "open loop: offer the trace's requests at R requests/s (lengths from the trace; docs/load.md)"),
                false);
  rate.check = {OptionKind::Real, 1e-9, 1e9, {}};
  rate.load = true;
  rate.excludes = {"--concurrency"};
  D& conc = add(decl("--concurrency", &SimInputs::concurrency,
                     "closed loop: N clients, each sends its next request when its previous one finished"),
                false);
  conc.check = {OptionKind::Integer, 1, 10'000'000, {}};
  conc.load = true;
  D& think = add(decl("--think-time", &SimInputs::think_ms, "closed loop: milliseconds a client waits between requests"));
  think.check = {OptionKind::Real, 0, 1e9, {}};
  think.load = true;
  think.needs = {"--concurrency"};
  add(decl("--prefilled", &SimInputs::prefilled,
           "decode only: every request arrives with its prompt already in the KV cache (prefilled elsewhere, with "
           "capacity to spare), as decode-pool benchmarks measure; its first token goes out when it is admitted"),
      false)
      .excludes = {"--concurrency"};
  add(decl("--routing,-r", &SimInputs::routing, "expert routing: an SSRT file, uniform, or synthetic:zipf=1.2,…"));
  add(decl("--slo", &SimInputs::slo, "latency objectives in ms for goodput: ttft=MS,tpot=MS"));
  add(decl("--seed", &SimInputs::seed, "seed of every random choice (synthetic traces and routing)"));
  add(decl("--exact", &SimInputs::exact,
           "score on the exact path: every step lowered with every layer and every token routed, nothing memoised, "
           "folded or fast-forwarded (slow; the reference the fast path is checked against, docs/performance.md)"),
      false);
  add(decl("--routed-tokens", &SimInputs::routed_tokens,
           "tokens of each prompt chunk routed per step, the rest estimated from them (0 = every token; "
           "default 32, the exact path 0; docs/simulation.md)"),
      false)
      .check = {OptionKind::Integer, 0, 1'000'000, {}};
  return v;
}

}  // namespace

const std::vector<OptionDecl<SimInputs>>& sim_option_decls() {
  static const std::vector<OptionDecl<SimInputs>> decls = make_sim_option_decls();
  return decls;
}

std::string with_seed(const std::string& spec, unsigned long long seed) {
  if (spec.rfind("synthetic", 0) != 0 || spec.find("seed=") != std::string::npos) return spec;
  std::string out = spec;
  if (out == "synthetic") out += ":";
  if (out.back() != ':') out += ",";
  return out + "seed=" + std::to_string(seed);
}

static std::string describe_arrivals(const SimInputs& in) {
  char buf[160];
  if (in.concurrency > 0) {
    std::snprintf(buf, sizeof buf, "closed loop: %d clients, think time %g ms", in.concurrency, in.think_ms);
    return buf;
  }
  if (in.rate > 0) {
    std::snprintf(buf, sizeof buf, "%s at %g req/s", in.arrivals == "trace" ? "the trace's arrival shape" : "Poisson", in.rate);
    return buf;
  }
  return in.offline ? "offline (every request at t = 0)" : "the trace's arrival times";
}

std::string describe_load(const SimInputs& in) {
  const std::string load = describe_arrivals(in);
  return in.prefilled ? load + ", prompts prefilled elsewhere (decode only: TTFT is the wait for admission)" : load;
}

json load_to_json(const SimInputs& in) {
  json j;
  if (in.concurrency > 0) j = {{"mode", "closed"}, {"concurrency", in.concurrency}, {"think_time_ms", in.think_ms}};
  else if (in.rate > 0) j = {{"mode", "rate"}, {"rate_req_s", in.rate}, {"arrivals", in.arrivals}};
  else j = {{"mode", in.offline ? "offline" : "trace"}};
  if (in.prefilled) j["prefilled"] = true;  // absent otherwise: earlier results read the same
  return j;
}

bool load_given(const SimInputs& in) { return in.offline || in.rate > 0 || in.concurrency > 0; }

RequestTrace trace_at_rate(const SimInputs& in, const RequestTrace& trace, double rate) {
  return at_rate(trace, rate, in.arrivals == "trace" ? Arrival::Trace : Arrival::Poisson, in.seed);
}

void parse_slo(const std::string& text, ServingOptions& o) {
  if (text.empty() || text.front() == ',' || text.back() == ',' || text.find(",,") != std::string::npos)
    throw InputError("--slo " + text, "", "expected ttft=MS,tpot=MS (an empty item)");
  std::stringstream ss(text);
  std::string item;
  std::set<std::string> seen;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    if (key != "ttft" && key != "tpot") throw InputError("--slo " + text, key, "unknown objective (expected ttft or tpot)");
    if (eq == std::string::npos) throw InputError("--slo " + text, key, "expected " + key + "=<positive milliseconds>");
    if (!seen.insert(key).second) throw InputError("--slo " + text, key, "given twice (which one did you mean?)");
    // Decimal milliseconds only: parse_real_in refuses hex, inf, nan and padding.
    const double v = parse_real_in(item.substr(eq + 1), "--slo " + text, key, 1e-6, 1e9);
    (key == "ttft" ? o.slo_ttft : o.slo_tpot) = v / 1e3;
  }
}

LoadedInputs load_inputs(const SimInputs& in) {
  // The cluster is constructed in place: copying a Cluster copies its graph (topologies/cluster.hpp).
  return load_inputs(in, load_model(in.model), std::unique_ptr<Cluster>(new Cluster(load_cluster(in.cluster))));
}

LoadedInputs load_inputs(const SimInputs& in, ModelSpec model, std::unique_ptr<Cluster> cluster) {
  LoadedInputs out;
  out.model = std::move(model);
  out.cluster = std::move(cluster);
  out.trace_spec = with_seed(in.trace, in.seed);
  out.population = load_request_trace(out.trace_spec);
  out.trace = head(out.population, static_cast<std::size_t>(in.requests));
  parse_slo(in.slo, out.serving);
  out.serving.offline = in.offline;
  out.serving.prefilled = in.prefilled;
  if (in.rate > 0) out.trace = trace_at_rate(in, out.trace, in.rate);
  out.serving.concurrency = in.concurrency;
  out.serving.think_time = in.think_ms / 1e3;
  if (in.exact) out.serving.set_exact();
  if (in.routed_tokens >= 0) out.serving.routed_tokens_per_seq = in.routed_tokens;
  out.routing_spec = with_seed(in.routing, in.seed);
  if (out.model.is_moe()) {
    out.routing = make_routing(out.routing_spec, out.model.routing_shape());
  }
  return out;
}

void refuse_closed_loop(const std::string& option, const std::string& value) {
  throw InputError(option, value,
                   "closed-loop clients are not supported with a disaggregated plan (a client's next request would "
                   "couple the prefill and decode pools); offer an open-loop load with --rate");
}

Plan load_feasible_plan(const std::string& spec, const LoadedInputs& in) {
  Plan plan = load_plan(spec, in.model, *in.cluster);
  PlanCheck chk = check_plan(plan, in.model, *in.cluster);
  if (!chk.feasible())
    throw InputError(spec, chk.violations.front().field,
                     "infeasible plan: " + chk.violations.front().reason + " (see 'shardsim plan check')");
  if (plan.disaggregated() && in.serving.concurrency > 0) refuse_closed_loop("--concurrency", std::to_string(in.serving.concurrency));
  return plan;
}

}  // namespace shardsim
