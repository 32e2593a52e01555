// sim/result_json.cpp — result JSON, Chrome trace and request CSV writers.
#include "sim/result_json.hpp"

#include <cstdio>
#include <sstream>

namespace shardsim {

static json pct(const Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}, {"max", p.max}};
}

json breakdown_to_json(const ServingBreakdown& b) {
  json j;
  j["steps"] = b.steps;
  j["executed_steps"] = b.executed_steps;
  j["peak_seqs_per_attention_group"] = b.peak_seqs;
  j["prefill_tokens"] = b.prefill_tokens;
  j["decode_tokens"] = b.decode_tokens;
  j["step_time_s"] = b.step_time;
  json crit = json::object(), busy = json::object();
  for (int i = 0; i < kNumOpClasses; ++i) {
    crit[to_string(static_cast<OpClass>(i))] = b.critical[static_cast<std::size_t>(i)];
    busy[to_string(static_cast<OpClass>(i))] = b.busy[static_cast<std::size_t>(i)];
  }
  j["critical_path_s"] = crit;
  j["busy_s"] = busy;
  json kinds = json::object();
  const char* names[4] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all_and_p2p"};
  for (std::size_t i = 0; i < 4; ++i) kinds[names[i]] = b.coll_by_kind[i];
  j["collectives_busy_s"] = kinds;
  j["comm_busy_s"] = b.comm_busy;
  j["comm_exposed_s"] = b.comm_exposed;
  j["comm_overlapped_s"] = std::max(0.0, b.comm_busy - b.comm_exposed);
  j["expert_time_s"] = b.expert_time;
  j["expert_imbalance_s"] = b.expert_imbalance;
  j["pipeline_bubble_s"] = b.pipeline_bubble;
  j["pipeline_span_s"] = b.pipeline_span;
  return j;
}

json result_to_json(const RunInputs& in, const Plan& plan, const ServingResult& r, const Metrics& m,
                    const ServingOptions& o, double wall_s) {
  json j;
  j["schema"] = "shardsim.result/1";
  j["inputs"] = {{"model", in.model},       {"cluster", in.cluster},   {"plan", in.plan},
                 {"trace", in.trace},       {"requests", in.requests}, {"routing", in.routing},
                 {"offline", in.offline},   {"fidelity", in.fidelity}, {"seed", in.seed},
                 {"slo", {{"ttft_ms", o.slo_ttft * 1e3}, {"tpot_ms", o.slo_tpot * 1e3}}}};
  j["plan"] = plan_to_json(plan);
  j["feasible"] = true;
  j["reasons"] = json::array();
  if (r.rejected_any) j["reasons"].push_back(r.note);
  const auto& mem = r.memory;
  j["metrics"] = {{"requests", m.requests},
                  {"completed", m.completed},
                  {"makespan_s", m.makespan_s},
                  {"throughput_tok_s", m.throughput_tok_s},
                  {"output_tok_s", m.output_tok_s},
                  {"output_tok_s_per_gpu", m.output_tok_s_per_gpu},
                  {"request_s", m.request_s},
                  {"goodput_req_s", m.goodput_req_s},
                  {"slo_attainment", m.slo_attainment},
                  {"ttft_ms", pct(m.ttft_ms)},
                  {"tpot_ms", pct(m.tpot_ms)},
                  {"e2e_ms", pct(m.e2e_ms)},
                  {"queue_ms", pct(m.queue_ms)},
                  {"memory_gb_per_gpu", (mem.worst().static_bytes()) / 1e9},
                  {"memory",
                   {{"weights_gb", mem.worst().weights / 1e9},
                    {"activations_gb", mem.worst().activations / 1e9},
                    {"comm_buffers_gb", mem.worst().comm_buffers / 1e9},
                    {"usable_gb", mem.usable / 1e9},
                    {"kv_capacity_tokens", mem.kv_capacity_tokens}}}};
  j["breakdown"] = breakdown_to_json(r.breakdown);
  j["provenance"] = {{"version", "shardsim 0.1.0"}, {"fidelity", in.fidelity}, {"seed", in.seed},
                     {"steps_simulated", r.breakdown.steps}, {"wall_s", wall_s}};
  return j;
}

std::string timeline_to_chrome_trace(const std::vector<TimelineEvent>& events, const std::vector<int>& rank_gpu) {
  json ev = json::array();
  for (std::size_t r = 0; r < rank_gpu.size(); ++r) {
    ev.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", r},
                  {"args", {{"name", "GPU " + std::to_string(rank_gpu[r]) + " (rank " + std::to_string(r) + ")"}}}});
    ev.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", r}, {"tid", 0}, {"args", {{"name", "compute"}}}});
    ev.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", r}, {"tid", 1}, {"args", {{"name", "communication"}}}});
  }
  for (const auto& e : events)
    ev.push_back({{"name", e.name},
                  {"cat", to_string(e.cls)},
                  {"ph", "X"},
                  {"pid", e.rank},
                  {"tid", static_cast<int>(e.stream)},
                  {"ts", e.start * 1e6},
                  {"dur", e.duration * 1e6},
                  {"args", {{"layer", e.layer}}}});
  json j = {{"traceEvents", ev}, {"displayTimeUnit", "ms"}};
  return j.dump() + "\n";
}

std::string requests_to_csv(const ServingResult& r, const ServingOptions& o) {
  std::ostringstream s;
  s << "id,replica,attn_group,arrival_s,prompt_tokens,output_tokens,admitted_s,first_token_s,finish_s,ttft_ms,tpot_ms,"
       "completed,met_slo\n";
  char buf[320];
  for (const auto& q : r.requests) {
    bool met = q.completed && q.ttft() <= o.slo_ttft && q.tpot() <= o.slo_tpot;
    std::snprintf(buf, sizeof buf, "%d,%d,%d,%.6f,%d,%d,%.6f,%.6f,%.6f,%.3f,%.3f,%d,%d\n", q.id, q.replica, q.group,
                  q.arrival, q.prompt_tokens, q.output_tokens, q.admitted, q.first_token, q.finish,
                  q.completed ? q.ttft() * 1e3 : 0.0, q.completed ? q.tpot() * 1e3 : 0.0, q.completed ? 1 : 0,
                  met ? 1 : 0);
    s << buf;
  }
  return s.str();
}

}  // namespace shardsim
