// sim/serving/disaggregated.cpp — prefill pool, KV transfer, decode pool (see disaggregated.hpp).
#include "sim/serving/disaggregated.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "common/input_error.hpp"
#include "sim/plan/memory_model.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/step/analytic_executor.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

namespace {

void add_breakdown(ServingBreakdown& a, const ServingBreakdown& b) {
  a.step_time += b.step_time;
  for_each_sum(a, b, [](double& x, double y) { x += y; });
  a.pipeline_bubble += b.pipeline_bubble;
  a.pipeline_span += b.pipeline_span;
  a.steps += b.steps;
  a.prefill_tokens += b.prefill_tokens;
  a.decode_tokens += b.decode_tokens;
  a.executed_steps += b.executed_steps;
  a.executed_chunk_steps += b.executed_chunk_steps;
  a.forwarded_steps += b.forwarded_steps;
  a.interpolated_steps += b.interpolated_steps;
  a.interpolated_mixed_steps += b.interpolated_mixed_steps;
  a.link_traffic = a.link_traffic || b.link_traffic;
  a.layers_lowered = std::max(a.layers_lowered, b.layers_lowered);
  a.large_layers_lowered = std::max(a.large_layers_lowered, b.large_layers_lowered);
  a.model_layers = std::max(a.model_layers, b.model_layers);
  a.peak_seqs = std::max(a.peak_seqs, b.peak_seqs);
  a.preemptions += b.preemptions;
  a.recomputed_tokens += b.recomputed_tokens;
  a.cached_tokens += b.cached_tokens;
  a.prompt_tokens_admitted += b.prompt_tokens_admitted;
  a.prefix_evicted_blocks += b.prefix_evicted_blocks;
  a.host_cached_tokens += b.host_cached_tokens;
  a.host_dropped_blocks += b.host_dropped_blocks;
  a.spec_steps += b.spec_steps;
  a.offload_stall += b.offload_stall;
  a.spec_tokens += b.spec_tokens;
  a.host_time += b.host_time;
  a.engaged += b.engaged;
}

PoolReport pool_report(const Plan& pool, const ServingResult& r, double span) {
  PoolReport p;
  p.gpus = pool.deg.gpus();
  p.replicas = pool.deg.dp;
  p.utilization = span > 0 ? r.breakdown.step_time / (pool.deg.dp * span) : 0;
  p.breakdown = r.breakdown;
  p.memory = r.memory;
  p.experts = r.experts;
  return p;
}

// Hands every prefilled request with more than one token to output to a decode replica and group:
// round-robin over replicas in the order the prefills ended, and over each replica's groups.
std::vector<KvHandoff> deal(const ServingResult& pre, const RequestTrace& trace, const Plan& decode) {
  std::vector<KvHandoff> out;
  for (const auto& r : pre.requests) {
    if (!r.completed || trace.requests[static_cast<std::size_t>(r.id)].output_tokens <= 1) continue;
    KvHandoff h;
    h.req = r.id;
    h.prefill_replica = r.replica;
    h.prompt_tokens = r.prompt_tokens;
    h.ready = r.finish;
    out.push_back(h);
  }
  std::stable_sort(out.begin(), out.end(), [](const KvHandoff& a, const KvHandoff& b) { return a.ready < b.ready; });
  std::vector<int> dealt(static_cast<std::size_t>(decode.deg.dp), 0);
  for (std::size_t k = 0; k < out.size(); ++k) {
    const int rep = static_cast<int>(k % static_cast<std::size_t>(decode.deg.dp));
    out[k].decode_replica = rep;
    out[k].decode_group = dealt[static_cast<std::size_t>(rep)]++ % decode.deg.attn_dp;
  }
  return out;
}

// The steady window where both pools' windows overlap, with the run's tokens and completions in it.
SteadyWindow overlap(const ServingResult& pre, const ServingResult& dec, const ServingResult& out) {
  SteadyWindow w;
  w.start = std::max(pre.steady.start, dec.steady.start);
  w.end = std::min(pre.steady.end, dec.steady.end);
  if (!(pre.steady.seconds() > 0) || !(dec.steady.seconds() > 0) || !(w.end > w.start)) {
    w = SteadyWindow{};
    w.note = !(pre.steady.seconds() > 0) ? "prefill pool: " + pre.steady.note
             : !(dec.steady.seconds() > 0) ? "decode pool: " + dec.steady.note
                                          : "no saturated window: the pools are never saturated at the same time (more requests, or a higher rate)";
    return w;
  }
  for (const auto& [t, n] : out.emissions)
    if (t > w.start && t <= w.end) w.tokens += n;
  for (const auto& r : out.requests)
    if (r.completed && r.finish > w.start && r.finish <= w.end) w.completions++;
  w.turnover = dec.steady.turnover;  // the decode pool's batches are the ones the window must turn over
  w.trusted = pre.steady.trusted && dec.steady.trusted;
  w.note = !pre.steady.trusted ? "prefill pool: " + pre.steady.note : dec.steady.note;
  return w;
}

}  // namespace

Plan prefill_pool(const Plan& plan) {
  Plan p = plan.prefill();
  p.engine.max_output = 1;  // each request is sent to the prefill pool with max_tokens = 1
  return p;
}

RequestTrace prefill_trace(const RequestTrace& trace) {
  RequestTrace t = trace;
  for (auto& r : t.requests) r.output_tokens = 1;
  return t;
}

ServingResult serve_disaggregated(const Plan& plan, const ModelSpec& model, const Cluster& cluster, const RequestTrace& trace,
                                  const ServingOptions& options, const PoolServer& serve_pool, const TransferTimer& transfer) {
  if (options.concurrency > 0)
    throw std::invalid_argument("serve_disaggregated: closed-loop clients (concurrency) are not supported");
  if (options.prefilled)  // ServingOptions::prefilled
    throw InputError("--prefilled", plan.name, "a disaggregated plan has its own prefill pool (give its decode pool as the plan)");
  const Plan decode = plan.decode();
  const Plan prefill = prefill_pool(plan);
  ServingOptions pools = options;
  pools.slo_stop.reset();  // neither pool judges a request whole (ServingOptions::slo_stop)
  pools.stop_at_last_admission = false;  // the decode pool's admissions wait on the prefill pool

  // 1. Prefill pool.
  const RequestTrace pre_trace = prefill_trace(trace);
  ServingOptions pre_opt = pools;
  pre_opt.timeline_steps = 0;
  pre_opt.decode_slots.clear();
  ServingResult pre = serve_pool(prefill, pre_trace, pre_opt);

  // 2. KV transfer.
  const MemoryReport decode_memory = plan_memory(decode, model, cluster);
  std::vector<KvHandoff> handoffs = deal(pre, trace, decode);
  KvTransferProgram program = kv_transfer_program(plan, decode_memory, handoffs);
  std::vector<double> arrived = handoff_arrivals(program, transfer(program.program), handoffs.size());
  std::vector<double> alone(handoffs.size(), 0);
  {
    AnalyticExecutor ex(cluster);
    for (std::size_t i = 0; i < program.handoff_of_op.size(); ++i) {
      double& a = alone[static_cast<std::size_t>(program.handoff_of_op[i])];
      a = std::max(a, ex.op_time(program.program, program.program.ops[i]));
    }
  }

  // 3. Decode pool.
  RequestTrace dec_trace = trace;
  ServingOptions dec_opt = pools;
  dec_opt.decode_slots.assign(trace.requests.size(), DecodeSlot{});
  for (std::size_t k = 0; k < handoffs.size(); ++k) {
    const KvHandoff& h = handoffs[k];
    dec_opt.decode_slots[static_cast<std::size_t>(h.req)] = DecodeSlot{h.decode_replica, h.decode_group};
    dec_trace.requests[static_cast<std::size_t>(h.req)].arrival_s = std::max(arrived[k], h.ready);
  }
  ServingResult dec = serve_pool(decode, dec_trace, dec_opt);

  // The run as the user sees it.
  ServingResult out;
  out.requests = pre.requests;
  for (std::size_t i = 0; i < out.requests.size(); ++i) {
    RequestResult& r = out.requests[i];
    r.output_tokens = std::max(1, trace.requests[i].output_tokens);
    if (!r.completed) continue;
    r.prefill_replica = r.replica;
    r.prefilled = r.finish;
    if (r.output_tokens <= 1) {
      out.emissions.push_back({r.finish, 1});
      continue;
    }
    const RequestResult& d = dec.requests[i];
    r.kv_arrived = dec_trace.requests[i].arrival_s;
    r.replica = d.replica;
    r.group = d.group;
    r.first_token = d.first_token;
    r.finish = d.finish;
    r.completed = d.completed;
  }
  out.emissions.insert(out.emissions.end(), dec.emissions.begin(), dec.emissions.end());
  std::sort(out.emissions.begin(), out.emissions.end());
  double first_arrival = out.requests.empty() ? 0 : std::numeric_limits<double>::infinity();
  for (const auto& r : out.requests) {
    if (r.completed) out.makespan = std::max(out.makespan, r.finish);
    first_arrival = std::min(first_arrival, r.arrival);
  }
  out.breakdown = pre.breakdown;
  add_breakdown(out.breakdown, dec.breakdown);
  out.memory = dec.memory;
  out.experts = dec.experts;
  out.timeline = std::move(dec.timeline);
  out.timeline_steps = std::move(dec.timeline_steps);
  out.steady = overlap(pre, dec, out);
  out.rejected_any = pre.rejected_any || dec.rejected_any;
  out.note = pre.rejected_any ? "prefill pool: " + pre.note : dec.note;

  DisaggReport& d = out.disagg;
  d.on = true;
  const double span = out.makespan - first_arrival;
  d.prefill = pool_report(prefill, pre, span);
  d.decode = pool_report(decode, dec, span);
  d.transfers = static_cast<long>(handoffs.size());
  d.bytes = program.bytes;
  std::vector<double> took, wait;
  for (const KvHandoff& h : handoffs) {
    const RequestResult& r = out.requests[static_cast<std::size_t>(h.req)];
    took.push_back(r.kv_arrived - r.prefilled);
    if (r.completed) wait.push_back(r.first_token - r.kv_arrived);
  }
  const Percentiles t = percentiles(std::move(took));  // nearest rank, as every percentile of a run
  d.transfer_mean = t.mean;
  d.transfer_p50 = t.p50;
  d.transfer_p99 = t.p99;
  d.transfer_max = t.max;
  d.alone_mean = percentiles(std::move(alone)).mean;
  d.decode_wait_mean = percentiles(std::move(wait)).mean;
  return out;
}

}  // namespace shardsim
