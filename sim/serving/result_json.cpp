// sim/serving/result_json.cpp — result JSON, Chrome trace and request CSV writers.
#include "topologies/cluster.hpp"
#include "sim/serving/result_json.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "sim/step/schedule_summary.hpp"

namespace shardsim {

static json pct(const Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}, {"max", p.max}};
}

// By class: seconds of `v` ÷ `div`, keyed by class name.
static json by_class(const std::array<double, kNumOpClasses>& v, double div) {
  json j = json::object();
  for (int i = 0; i < kNumOpClasses; ++i) j[to_string(static_cast<OpClass>(i))] = v[static_cast<std::size_t>(i)] / div;
  return j;
}

static json by_kind(const std::array<double, 4>& v, double div) {
  const char* names[4] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all_and_p2p"};
  json j = json::object();
  for (std::size_t i = 0; i < 4; ++i) j[names[i]] = v[i] / div;
  return j;
}

static double comm_on_critical_path(const ServingBreakdown& b) {
  double s = 0;
  for (int i = 0; i < kNumOpClasses; ++i)
    if (is_comm_class(static_cast<OpClass>(i))) s += b.critical[static_cast<std::size_t>(i)];
  return s;
}

// What each group of keys sums over (docs/simulation.md, "The breakdown").
static json breakdown_scope(const Degrees& d) {
  return {{"replicas", d.dp},
          {"gpus_per_replica", d.pp * d.unit()},
          {"replica_time", "step_time_s, critical_path_s, idle_on_critical_path_s, comm_critical_path_s, expert_time_s, "
                           "expert_imbalance_s: seconds of replica steps, summed over all replicas' steps"},
          {"per_gpu_time", "busy_s, collectives_busy_s, comm_busy_s, comm_exposed_s, comm_overlapped_s: each step's "
                           "mean over its replica's GPUs, summed over all replicas' steps; per_gpu = these / replicas"},
          {"pipeline", "pipeline_*_s: summed over replicas and stages; 0 when pp = 1 (no pipeline)"}};
}

// Sums over all replicas (keys as before), plus the scope and the per-replica / per-GPU means.
json breakdown_to_json(const ServingBreakdown& b, const Degrees& d) {
  const double reps = std::max(1, d.dp);
  const double comm_crit = comm_on_critical_path(b);
  json j;
  j["scope"] = breakdown_scope(d);
  j["steps"] = b.steps;
  j["executed_steps"] = b.executed_steps;
  j["peak_seqs_per_attention_group"] = b.peak_seqs;
  j["prefill_tokens"] = b.prefill_tokens;
  j["decode_tokens"] = b.decode_tokens;
  j["preemptions"] = b.preemptions;
  j["recomputed_tokens"] = b.recomputed_tokens;
  if (b.offload_stall > 0) j["offload_stall_s"] = b.offload_stall;
  if (b.spec_steps > 0)
    j["speculative"] = {{"decode_steps", b.spec_steps},
                        {"tokens", b.spec_tokens},
                        {"tokens_per_step", static_cast<double>(b.spec_tokens) / static_cast<double>(b.spec_steps)}};
  if (b.prompt_tokens_admitted > 0 && b.cached_tokens + b.prefix_evicted_blocks > 0) {  // a prefix cache was in play
    j["prefix_cache"] = {{"cached_tokens", b.cached_tokens},
                         {"admitted_prompt_tokens", b.prompt_tokens_admitted},
                         {"hit_rate", static_cast<double>(b.cached_tokens) / static_cast<double>(b.prompt_tokens_admitted)},
                         {"evicted_blocks", b.prefix_evicted_blocks},
                         {"host_cached_tokens", b.host_cached_tokens},
                         {"host_dropped_blocks", b.host_dropped_blocks}};
  }
  j["host_time_s"] = b.host_time;
  j["step_time_s"] = b.step_time;
  j["critical_path_s"] = by_class(b.critical, 1);
  j["idle_on_critical_path_s"] = b.idle_on_path;
  j["comm_critical_path_s"] = comm_crit;
  j["busy_s"] = by_class(b.busy, 1);
  j["collectives_busy_s"] = by_kind(b.coll_by_kind, 1);
  j["comm_busy_s"] = b.comm_busy;
  j["comm_exposed_s"] = b.comm_exposed;
  j["comm_overlapped_s"] = b.comm_busy - b.comm_exposed;
  if (b.link_traffic) {  // per link class: bytes carried, and the busiest link's busy share of step time
    json links = json::object();
    for (std::size_t k = 0; k < b.link_bytes.size(); ++k) {
      if (b.link_bytes[k] <= 0) continue;
      links[to_string(static_cast<LinkClass>(k))] = {
          {"bytes", b.link_bytes[k]},
          {"busiest_link_busy_s", b.link_busiest[k]},
          {"busiest_link_utilization", b.step_time > 0 ? b.link_busiest[k] / b.step_time : 0.0}};
    }
    j["links"] = links;
  }
  j["expert_time_s"] = b.expert_time;
  j["expert_imbalance_s"] = b.expert_imbalance;
  j["pipeline_bubble_s"] = d.pp > 1 ? b.pipeline_bubble : 0.0;
  j["pipeline_span_s"] = d.pp > 1 ? b.pipeline_span : 0.0;
  j["per_replica_mean"] = {{"step_time_s", b.step_time / reps},
                           {"critical_path_s", by_class(b.critical, reps)},
                           {"comm_critical_path_s", comm_crit / reps},
                           {"expert_time_s", b.expert_time / reps},
                           {"expert_imbalance_s", b.expert_imbalance / reps}};
  j["per_gpu"] = {{"busy_s", by_class(b.busy, reps)},
                  {"collectives_busy_s", by_kind(b.coll_by_kind, reps)},
                  {"comm_busy_s", b.comm_busy / reps},
                  {"comm_exposed_s", b.comm_exposed / reps},
                  {"comm_overlapped_s", (b.comm_busy - b.comm_exposed) / reps}};
  return j;
}

static json pool_to_json(const PoolReport& p, const Degrees& d) {
  return {{"gpus", p.gpus},
          {"replicas", p.replicas},
          {"utilization", p.utilization},
          {"kv_capacity_tokens", p.memory.kv_capacity_tokens},
          {"memory_gb_per_gpu", p.memory.worst().static_bytes() / 1e9},
          {"breakdown", breakdown_to_json(p.breakdown, d)}};
}

json disagg_to_json(const Plan& plan, const DisaggReport& d) {
  return {{"prefill", pool_to_json(d.prefill, plan.deg)},
          {"decode", pool_to_json(d.decode, plan.decode().deg)},
          {"kv_transfer",
           {{"transfers", d.transfers},
            {"bytes", d.bytes},
            {"seconds", {{"mean", d.transfer_mean}, {"p50", d.transfer_p50}, {"p99", d.transfer_p99}, {"max", d.transfer_max}}},
            {"alone_mean_s", d.alone_mean},
            {"timed_by", d.transfer_tier}}},
          {"decode_admission_wait_mean_s", d.decode_wait_mean}};
}

json result_to_json(const RunInputs& in, const Plan& plan, const ServingResult& r, const Metrics& m,
                    const ServingOptions& o, double wall_s) {
  json j;
  j["schema"] = "shardsim.result/1";
  j["inputs"] = {{"model", in.model},       {"cluster", in.cluster},   {"plan", in.plan},
                 {"trace", in.trace},       {"requests", in.requests}, {"routing", in.routing},
                 {"offline", in.offline},   {"fidelity", in.fidelity}, {"seed", in.seed},
                 {"slo", {{"ttft_ms", o.slo_ttft * 1e3}, {"tpot_ms", o.slo_tpot * 1e3}}}};
  if (!in.load.is_null()) j["inputs"]["load"] = in.load;
  j["plan"] = plan_to_json(plan);
  j["feasible"] = true;
  j["reasons"] = json::array();
  if (r.rejected_any) j["reasons"].push_back(r.note);
  if (r.experts.redundant > 0)
    j["expert_balance"] = {{"redundant_experts", r.experts.redundant}, {"rank_load_max_over_mean_before", r.experts.before},
                           {"rank_load_max_over_mean_after", r.experts.after}, {"sample_tokens", r.experts.sample_tokens}};
  const auto& mem = r.memory;
  j["metrics"] = {{"requests", m.requests},
                  {"completed", m.completed},
                  {"makespan_s", m.makespan_s},
                  {"throughput_tok_s", m.throughput_tok_s},
                  {"output_tok_s", m.output_tok_s},
                  {"output_tok_s_per_gpu", m.output_tok_s_per_gpu},
                  {"steady_output_tok_s", m.steady_output_tok_s},
                  {"steady_output_tok_s_per_gpu", m.steady_output_tok_s_per_gpu},
                  {"steady_window",
                   {{"start_s", m.steady_start_s},
                    {"end_s", m.steady_end_s},
                    {"trusted", m.steady_trusted},
                    {"note", m.steady_note}}},
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
                    {"runtime_gb", mem.worst().runtime / 1e9},
                    {"usable_gb", mem.usable / 1e9},
                    {"kv_capacity_tokens", mem.kv_capacity_tokens}}}};
  if (r.disagg.on) {
    Degrees both = plan.deg;  // means over the replicas of both pools
    both.dp = plan.deg.dp + plan.decode().deg.dp;
    j["breakdown"] = breakdown_to_json(r.breakdown, both);
    j["disaggregation"] = disagg_to_json(plan, r.disagg);
  } else {
    j["breakdown"] = breakdown_to_json(r.breakdown, plan.deg);
  }
  j["scoring"] = scoring_to_json(r.breakdown, o);
  j["provenance"] = {{"version", "shardsim 0.1.0"}, {"fidelity", in.fidelity}, {"seed", in.seed},
                     {"steps_simulated", r.breakdown.steps}, {"wall_s", wall_s}};
  return j;
}

json scoring_to_json(const ServingBreakdown& b, const ServingOptions& o) {
  json approx = json::array();
  if (o.shape_buckets_per_octave > 0)
    approx.push_back("steps memoised by shape, " + std::to_string(o.shape_buckets_per_octave) + " buckets per octave");
  if (o.interpolate_context && o.shape_buckets_per_octave > 0)
    approx.push_back("decode steps of a new shape timed as the mean of five executed steps of the same batch size "
                     "(or the line through neighbouring batch sizes' when it pins them to 0.5%), with their own attention (" +
                     std::to_string(b.interpolated_steps) + " shapes)");
  if (o.interpolate_mixed && o.shape_buckets_per_octave > 0)
    approx.push_back("steps with prompt chunks (beside decode tokens or alone) of a new shape fitted (least squares in "
                     "their tokens) from executed steps of their kind within 2x of their tokens, with their own attention (" +
                     std::to_string(b.interpolated_mixed_steps) + " shapes)");
  if (b.layers_lowered < b.model_layers)
    approx.push_back("layers folded: " + std::to_string(b.layers_lowered) + " of " + std::to_string(b.model_layers) +
                     " lowered per replica step (MoE layers onto about " + std::to_string(o.fold_moe_layers) +
                     " routed representatives, at least one per stage)");
  if (b.large_layers_lowered < b.layers_lowered)
    approx.push_back("steps routing at least " + std::to_string(ServingOptions::kLargeStepTokens) +
                     " tokens per layer: " + std::to_string(b.large_layers_lowered) +
                     " layers lowered (MoE layers onto about " + std::to_string(o.fold_moe_layers_large) +
                     " representatives, at least two per stage)");
  if (o.routed_tokens_per_seq > 0)
    approx.push_back("routing: up to " + std::to_string(o.routed_tokens_per_seq) +
                     " tokens of each prompt chunk routed per step, the rest taken as their expected routing");
  return {{"path", o.exact() ? "exact" : "fast"},
          {"routed_tokens_per_seq", o.routed_tokens_per_seq},
          {"steps", b.steps},
          {"executed_steps", b.executed_steps},
          {"executed_chunk_steps", b.executed_chunk_steps},
          {"reused_steps", b.steps - b.executed_steps},
          {"forwarded_steps", b.forwarded_steps},
          {"interpolated_steps", b.interpolated_steps},
          {"interpolated_mixed_steps", b.interpolated_mixed_steps},
          {"layers_lowered", b.layers_lowered},
          {"large_layers_lowered", b.large_layers_lowered},
          {"model_layers", b.model_layers},
          {"approximations", approx}};
}

std::string describe_scoring(const ServingBreakdown& b, const ServingOptions& o) {
  std::ostringstream s;
  s << (o.exact() ? "exact path" : "fast path") << ": " << b.executed_steps << " of " << b.steps << " steps executed ("
    << b.executed_chunk_steps << " with prompt chunks)";
  if (b.forwarded_steps > 0) s << ", " << b.forwarded_steps << " fast-forwarded";
  if (b.interpolated_steps > 0) s << ", " << b.interpolated_steps << " shapes interpolated";
  if (b.interpolated_mixed_steps > 0) s << ", " << b.interpolated_mixed_steps << " mixed shapes interpolated";
  s << "; " << b.layers_lowered << " of " << b.model_layers << " layers lowered";
  if (b.large_layers_lowered < b.layers_lowered)
    s << " (" << b.large_layers_lowered << " in steps routing " << ServingOptions::kLargeStepTokens << "+ tokens per layer)";
  if (o.shape_buckets_per_octave > 0) s << "; steps memoised by shape (" << o.shape_buckets_per_octave << " buckets/octave)";
  return s.str();
}

std::string timeline_to_chrome_trace(const std::vector<TimelineEvent>& events, const std::vector<int>& rank_gpu,
                                     const std::vector<TimelineStep>& steps, const std::vector<std::string>& roles) {
  json ev = json::array();
  for (std::size_t r = 0; r < rank_gpu.size(); ++r) {
    const std::string name = r < roles.size() ? roles[r] : "GPU " + std::to_string(rank_gpu[r]) + " (rank " + std::to_string(r) + ")";
    ev.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"args", {{"name", name}}}});
    ev.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", r}, {"args", {{"sort_index", r + 1}}}});
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
  if (!steps.empty()) {  // the replica's steps above the ranks: what each batch held
    const std::size_t pid = rank_gpu.size();
    ev.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", "replica 0 steps"}}}});
    ev.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"args", {{"sort_index", 0}}}});
    ev.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", "steps"}}}});
    for (const auto& s : steps) {
      std::string name = "step " + std::to_string(s.index) + ": " + std::to_string(s.decode_tokens) + " decode";
      if (s.prefill_tokens > 0)
        name += " + " + std::to_string(s.prefill_tokens) + " prefill tokens (" + std::to_string(s.prefill_seqs) + " prompts)";
      ev.push_back({{"name", name},
                    {"cat", "step"},
                    {"ph", "X"},
                    {"pid", pid},
                    {"tid", 0},
                    {"ts", s.start * 1e6},
                    {"dur", (s.end - s.start) * 1e6},
                    {"args",
                     {{"step", s.index}, {"decode_tokens", s.decode_tokens}, {"prefill_tokens", s.prefill_tokens},
                      {"decode_seqs", s.decode_seqs}, {"prefill_seqs", s.prefill_seqs}, {"running_seqs", s.running},
                      {"kv_tokens", s.kv_tokens}, {"kv_capacity", s.kv_capacity}, {"admitted", s.admitted},
                      {"preempted", s.preempted}}}});
      ev.push_back({{"name", "batch tokens"}, {"ph", "C"}, {"pid", pid}, {"ts", s.start * 1e6},
                    {"args", {{"decode", s.decode_tokens}, {"prefill", s.prefill_tokens}}}});
      ev.push_back({{"name", "KV tokens in use"}, {"ph", "C"}, {"pid", pid}, {"ts", s.start * 1e6},
                    {"args", {{"kv", s.kv_tokens}}}});
    }
  }
  json j = {{"traceEvents", ev}, {"displayTimeUnit", "ms"}};
  return json_text(j) + "\n";
}

std::string requests_to_csv(const ServingResult& r, const ServingOptions& o) {
  std::ostringstream s;
  s << "id,replica,attn_group,arrival_s,prompt_tokens,output_tokens,admitted_s,first_token_s,finish_s,ttft_ms,tpot_ms,"
       "completed,met_slo";
  if (r.disagg.on) s << ",prefill_replica,prefilled_s,kv_arrived_s";
  s << "\n";
  char buf[320];
  for (const auto& q : r.requests) {
    bool met = q.completed && q.ttft() <= o.slo_ttft && q.tpot() <= o.slo_tpot;
    std::snprintf(buf, sizeof buf, "%d,%d,%d,%.6f,%d,%d,%.6f,%.6f,%.6f,%.3f,%.3f,%d,%d\n", q.id, q.replica, q.group,
                  q.arrival, q.prompt_tokens, q.output_tokens, q.admitted, q.first_token, q.finish,
                  q.completed ? q.ttft() * 1e3 : 0.0, q.completed ? q.tpot() * 1e3 : 0.0, q.completed ? 1 : 0,
                  met ? 1 : 0);
    s << buf;
    if (r.disagg.on) {
      s.seekp(-1, std::ios_base::cur);  // before the newline
      std::snprintf(buf, sizeof buf, ",%d,%.6f,%.6f\n", q.prefill_replica, q.prefilled, q.kv_arrived);
      s << buf;
    }
  }
  return s.str();
}

}  // namespace shardsim
