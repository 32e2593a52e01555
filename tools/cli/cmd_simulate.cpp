// tools/cli/cmd_simulate.cpp — `shardsim simulate`: score one plan on a trace and explain the result.
//
// Loads the inputs, refuses an infeasible plan (exit 2, the first violation named), replays the
// trace through the serving loop with the chosen executor, prints a short report (metrics, memory,
// where the time goes) and writes the optional result JSON, Chrome timeline, request CSV and
// (SimGrid tiers) per-link CSV — all only after the run succeeded.
#include <algorithm>
#include <array>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "common/readable_number.hpp"
#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "sim/plan/plan_layout.hpp"
#include "sim/step/analytic_executor.hpp"
#include "sim/simgrid/scorer.hpp"
#include "sim/simgrid/link_report.hpp"
#include "common/worker_pool.hpp"
#include "sim/step/lowering.hpp"
#include "optimizers/space/serving_evaluator.hpp"
#include "sim/serving/energy.hpp"
#include "sim/serving/load_sweep.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/result_json.hpp"
#include "sim/step/schedule_summary.hpp"
#include "studies/scoring_resources.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/option_table_cli.hpp"
#include "studies/simulate_json.hpp"

namespace shardsim::cli {

namespace {

struct SimulateOptions : ScoringResources {
  SimInputs in;
  std::string plan = "megatron";
  std::string fidelity = "simgrid";
  std::string json_out, timeline_out, csv_out, links_out;
  int timeline_steps = 3;
  std::string timeline_from = "0";  // a step number, or "decode" (the first decode-only step)
  bool capacity = false;            // also measure the saturated throughput and the capacity under the SLO
  std::string goal = "p99";         // the capacity's SLO goal
};

std::string (*const f)(const char*, double) = formatted;  // common/readable_number

const char* kind_name(int k) { return collective_kind_name(k); }

// "summed over the 4 replicas' steps" (or "the replica's steps" when dp = 1).
std::string over_replicas(int dp) {
  return dp > 1 ? "summed over the " + std::to_string(dp) + " replicas' steps" : "summed over the replica's steps";
}

// Critical path by class (replica time, Σ over replicas), as a share of the summed step time.
void print_critical_path(std::ostream& o, const ServingBreakdown& b, int dp) {
  o << "step time      " << f("%.3f s ", b.step_time) << over_replicas(dp);
  if (dp > 1) o << f(" (%.3f s per replica)", b.step_time / dp);
  o << "\ncritical path  by class, " << over_replicas(dp) << " (share of step time)\n";
  const double total = b.step_time > 0 ? b.step_time : 1;
  std::vector<std::pair<double, std::string>> rows;
  for (int i = 0; i < kNumOpClasses; ++i) rows.push_back({b.critical[static_cast<std::size_t>(i)], to_string(static_cast<OpClass>(i))});
  rows.push_back({b.idle_on_path, "waiting"});
  std::sort(rows.rbegin(), rows.rend());
  for (const auto& [t, name] : rows) {
    if (t <= 0 || t < total * 0.005) continue;
    o << "  " << name << std::string(name.size() < 16 ? 16 - name.size() : 1, ' ') << f("%9.3f s", t)
      << f("  %5.1f%%\n", 100 * t / total);
  }
}

// Communication per GPU (mean over all GPUs of the run), and its share of the critical path.
void print_communication(std::ostream& o, const ServingBreakdown& b, int dp, int gpus) {
  const double busy = b.comm_busy / dp, exposed = b.comm_exposed / dp;
  o << "communication  per GPU (mean of " << gpus << " GPUs): " << f("%.3f s busy = ", busy)
    << f("%.3f s exposed (its compute idle) + ", exposed)
    << f("%.3f s overlapped with its compute\n", std::max(0.0, busy - exposed));  // never "-0.000" from rounding
  const char* kinds[4] = {"all-reduce", "reduce-scatter", "all-gather", "all-to-all + p2p"};
  o << "  by kind      per GPU:";
  for (std::size_t k = 0; k < 4; ++k)
    if (b.coll_by_kind[k] > 0) o << " " << kinds[k] << f(" %.3f s;", b.coll_by_kind[k] / dp);
  double on_path = 0;  // Σ over replicas
  for (int i = 0; i < kNumOpClasses; ++i)
    if (is_comm_class(static_cast<OpClass>(i))) on_path += b.critical[static_cast<std::size_t>(i)];
  o << "\n  critical path " << f("%.3f s of communication", on_path / dp) << (dp > 1 ? f(" per replica (%.3f s ", on_path) : " (")
    << over_replicas(dp) << f("; %.1f%% of step time)\n", b.step_time > 0 ? 100 * on_path / b.step_time : 0.0);
}

// Nodes under one rail leaf: the rail-optimised unit inside which inter-node traffic never leaves its leaf.
int rail_unit_nodes(const Cluster& c) {
  int n = 0;
  for (int node = 0; node < c.num_nodes(); ++node) n += c.leaf_of(node * c.gpus_per_node()) == c.leaf_of(0);
  return n;
}

// The link direction busiest on average in the SimGrid steps (all of them: --links FILE).
void print_busiest_link(std::ostream& o, const FidelityReport& fr, const Cluster& c) {
  const FidelityReport::LinkLoad* top = nullptr;
  for (const auto& l : fr.links)
    if (!top || l.busy_seconds > top->busy_seconds) top = &l;
  if (!top || fr.simgrid_seconds <= 0) return;
  const LinkEnds ends = link_direction_ends(c, top->dlink);
  o << "  busiest link " << ends.from << " → " << ends.to << " (" << to_string(c.link(top->dlink / 2).cls) << f("): %.1f%% busy on average", 100 * top->busy_seconds / fr.simgrid_seconds)
    << f(", %.1f%% in its busiest step (every link: --links FILE)\n", 100 * top->peak);
}

// Each rank's role for the timeline: "GPU 5 · pp 0 · tp 1/2 · attn-dp 2/4 · ep 5/8" (only the
// degrees above 1).
std::vector<std::string> rank_roles(const Plan& plan, const std::vector<int>& gpus) {
  const PlanLayout layout(plan);
  const Degrees& d = plan.deg;
  std::vector<std::string> out;
  for (int g : gpus) {
    const RankCoord c = layout.coord(g);
    std::string s = "GPU " + std::to_string(g);
    auto add = [&](const char* name, int rank, int of) {
      if (of > 1) s += std::string(" · ") + name + " " + std::to_string(rank) + "/" + std::to_string(of);
    };
    add("pp", c.pp, d.pp);
    add("tp", c.tp, d.tp);
    add("attn-dp", c.attn_dp, d.attn_dp);
    add("ep", layout.ep_rank(c), d.ep);
    add("etp", layout.etp_rank(c), d.etp);
    out.push_back(s);
  }
  return out;
}

// Bytes per link class and how busy each class's busiest link was; why a class carried nothing.
void print_links(std::ostream& o, const ServingBreakdown& b, const Cluster& c, int dp) {
  if (!b.link_traffic) return;
  o << "links          by class, " << over_replicas(dp) << ": bytes carried, and the busiest link's busy share of step time\n";
  std::array<int, kNumLinkClasses> present{};
  for (int id = 0; id < c.num_links(); ++id) present[static_cast<std::size_t>(c.link(id).cls)]++;
  for (std::size_t k = 0; k < b.link_bytes.size(); ++k) {
    if (present[k] == 0) continue;
    const std::string name = to_string(static_cast<LinkClass>(k));
    o << "  " << name << std::string(name.size() < 16 ? 16 - name.size() : 1, ' ') << readable_bytes(b.link_bytes[k])
      << (b.link_bytes[k] > 0 ? f(", busiest link %.1f%% busy", b.step_time > 0 ? 100 * b.link_busiest[k] / b.step_time : 0.0) : "")
      << " (" << present[k] << " links)\n";
  }
  const auto spine = static_cast<std::size_t>(LinkClass::LeafSpine);
  if (c.fabric().rail_optimized && present[spine] > 0 && b.link_bytes[spine] == 0 && c.num_nodes() > 1)
    o << "  the spine carried nothing: inter-node traffic goes GPU → NIC → its rail's leaf → NIC (it changes rail over\n"
         "  NVLink inside a node: PXN or receive-side forwarding), and a rail leaf serves "
      << rail_unit_nodes(c) << " nodes (one rail-optimised unit), so leaf-spine oversubscription cannot slow this run\n";
}

// The pools of a disaggregated run and the KV hand-over between them, then where each pool's time goes.
void print_disaggregation(std::ostream& o, const Plan& plan, const Cluster& c, const ServingResult& r) {
  const DisaggReport& d = r.disagg;
  const Plan prefill = plan.prefill();
  const Plan& decode = plan.decode();
  auto gpus = [&](const Plan& p) {  // "8 GPUs", or on a mixed cluster "8 H200-SXM-141GB GPUs 8-15"
    return std::to_string(p.deg.gpus()) + (c.mixed() ? " " + c.pool_gpu(p.first_gpu).name : std::string()) + " GPUs" +
           (c.mixed() ? " " + std::to_string(p.first_gpu) + "-" + std::to_string(p.first_gpu + p.deg.gpus() - 1) : std::string());
  };
  o << "\ndisaggregated  prefill pool " << gpus(prefill) << " (" << d.prefill.replicas << " × " << plan_to_string(prefill)
    << "), decode pool " << gpus(decode) << " (" << d.decode.replicas << " × " << plan_to_string(decode) << ")\n";
  for (const auto* p : {&d.prefill, &d.decode})
    o << "  " << (p == &d.prefill ? "prefill" : "decode ") << " pool  " << f("%.1f%% busy", 100 * p->utilization)
      << " (replica step time / replicas × the run), " << p->breakdown.steps << " steps, KV capacity "
      << readable(p->memory.kv_capacity_tokens) << " tokens per attention group, " << p->breakdown.preemptions << " preemptions\n";
  o << "KV transfer    " << d.transfers << " prompts, " << f("%.2f GB", d.bytes / 1e9) << " moved (timed by " << d.transfer_tier
    << "): " << f("mean %.2f ms", d.transfer_mean * 1e3) << f(", p50 %.2f", d.transfer_p50 * 1e3)
    << f(", p99 %.2f", d.transfer_p99 * 1e3) << f(", max %.2f ms", d.transfer_max * 1e3)
    << f("; each alone on the fabric %.2f ms mean\n", d.alone_mean * 1e3);
  o << "TTFT parts     mean decode admission wait after the KV landed " << f("%.2f ms\n", d.decode_wait_mean * 1e3);
  for (const auto* p : {&d.prefill, &d.decode}) {
    const Degrees& g = p == &d.prefill ? prefill.deg : decode.deg;
    o << "\nwhere the " << (p == &d.prefill ? "prefill" : "decode") << " pool's time goes — " << p->breakdown.steps << " steps of "
      << g.dp << (g.dp > 1 ? " replicas" : " replica") << " (" << p->breakdown.prefill_tokens << " prefill + "
      << p->breakdown.decode_tokens << " decode tokens)\n";
    print_critical_path(o, p->breakdown, g.dp);
    print_communication(o, p->breakdown, g.dp, g.gpus());
  }
}

void print_report(const SimInputs& in, const LoadedInputs& L, const Plan& plan, const ServingResult& r, const Metrics& m,
                  const RunEnergy& energy, const std::string& fidelity, const FidelityReport& fr) {
  std::ostream& o = std::cout;
  const Cluster& c = *L.cluster;
  o << "shardsim simulate: " << L.model.name << " on " << c.name() << " (" << c.gpus_text()
    << "), plan " << plan_to_string(plan, L.model) << ", " << fidelity << " fidelity\n";
  o << "trace " << L.trace_spec << " (" << r.requests.size() << " requests; " << describe_load(in)
    << "), routing " << (L.routing ? L.routing_spec : std::string("none (dense model)")) << "\n";
  if (static_cast<std::size_t>(in.requests) > L.population.requests.size())
    o << "notice         --requests " << in.requests << " asks for more than the trace holds: all its "
      << L.population.requests.size() << " requests are replayed\n";
  o << "\n";
  o << "requests       " << m.completed << " of " << m.requests << " completed in " << f("%.2f s", m.makespan_s) << "\n";
  o << "throughput     " << readable(m.throughput_tok_s) << (in.prefilled ? " tok/s (prompt + output, prompts prefilled elsewhere), " : " tok/s (prompt + output), ") << readable(m.output_tok_s)
    << " output tok/s (" << readable(m.output_tok_s_per_gpu) << " per GPU) over the makespan\n";
  // "Steady" only for a window that held another batch turnover; what the plan sustains is --capacity's.
  if (m.steady_trusted)
    o << "steady state   " << readable(m.steady_output_tok_s) << " output tok/s (" << readable(m.steady_output_tok_s_per_gpu)
      << " per GPU)" << f(" in the saturated window %.2f", m.steady_start_s) << f("–%.2f s", m.steady_end_s) << "\n";
  else if (m.steady_end_s > m.steady_start_s && m.steady_start_s > 0)
    o << "window         " << readable(m.steady_output_tok_s) << " output tok/s" << f(" in %.2f", m.steady_start_s)
      << f("–%.2f s, not steady: ", m.steady_end_s) << m.steady_note << " (what the plan sustains: --capacity)\n";
  else
    o << "window         none: " << m.steady_note << " (what the plan sustains: --capacity)\n";
  o << "TTFT ms        p50 " << f("%.1f", m.ttft_ms.p50) << "  p90 " << f("%.1f", m.ttft_ms.p90) << "  p99 "
    << f("%.1f\n", m.ttft_ms.p99);
  o << "TPOT ms        p50 " << f("%.2f", m.tpot_ms.p50) << "  p90 " << f("%.2f", m.tpot_ms.p90) << "  p99 "
    << f("%.2f\n", m.tpot_ms.p99);
  o << "goodput        " << f("%.2f req/s", m.goodput_req_s) << " meeting TTFT ≤ " << f("%.0f", L.serving.slo_ttft * 1e3)
    << " ms and TPOT ≤ " << f("%.0f ms", L.serving.slo_tpot * 1e3) << f(" (%.1f%% of requests)\n", m.slo_attainment * 100);
  o << "energy         " << energy.describe(m.output_tok_s * m.makespan_s)
    << (energy.modelled ? " over the run (GPUs and network optics; host, NVSwitch and cooling not counted: docs/energy.md)" : "") << "\n";
  const auto& w = r.memory.worst();
  o << "memory/GPU     weights " << f("%.1f GB", w.weights / 1e9) << ", activations+buffers "
    << f("%.1f GB", (w.activations + w.comm_buffers) / 1e9) << ", KV capacity "
    << readable(r.memory.kv_capacity_tokens) << " tokens per attention group" << f(" (%.0f GB usable)\n", r.memory.usable / 1e9);
  if (r.rejected_any) o << "warning        " << r.note << "\n";
  o << "engine         ";
  if (r.disagg.on)
    o << "prefill " << plan.engine.preset << ", " << plan.dtypes.describe() << "; decode " << plan.decode().engine.preset << ", "
      << plan.decode().dtypes.describe() << "; ";
  else
    o << plan.engine.preset << ", " << plan.dtypes.describe() << "; ";
  o << r.breakdown.preemptions << " preemptions, host " << f("%.3f s", r.breakdown.host_time)
    << " not hidden by the GPU (summed over replicas)";
  if (!r.disagg.on && plan.deg.tp > 1 && plan.engine.allreduce != AllReduceKernels::Nccl)
    o << "; small TP all-reduces inside a node on " << to_string(plan.engine.allreduce)
      << "'s own one-/two-shot kernels where faster than NCCL's (engine setting allreduce)";
  o << "\n";
  if (r.breakdown.spec_steps > 0) {
    const EngineSettings& se = r.disagg.on ? plan.decode().engine : plan.engine;
    std::string accept;
    for (double a : se.spec_accept) accept += (accept.empty() ? "" : ":") + f("%g", a);
    o << "speculative    " << se.spec_tokens << " draft token" << (se.spec_tokens == 1 ? "" : "s")
      << " a step from a one-layer draft head (MTP), acceptance " << accept << ": "
      << f("%.3f tokens", static_cast<double>(r.breakdown.spec_tokens) / static_cast<double>(r.breakdown.spec_steps))
      << " per sequence and decode step, over " << r.breakdown.spec_steps << " of them\n";
  }
  if (r.breakdown.prompt_tokens_admitted > 0 && r.breakdown.cached_tokens + r.breakdown.prefix_evicted_blocks > 0)
    o << "prefix cache   " << readable(static_cast<double>(r.breakdown.cached_tokens)) << " of "
      << readable(static_cast<double>(r.breakdown.prompt_tokens_admitted)) << " admitted prompt tokens found cached"
      << f(" (hit rate %.1f%%)", 100.0 * static_cast<double>(r.breakdown.cached_tokens) / static_cast<double>(r.breakdown.prompt_tokens_admitted))
      << ", not prefilled; " << r.breakdown.prefix_evicted_blocks << " blocks evicted for room (dispatch "
      << to_string(plan.engine.dispatch) << ")\n";
  if (plan.engine.weight_offload > 0)
    o << "weight offload " << f("%.1f GB per GPU", r.memory.worst().offloaded / 1e9) << " streamed from host memory every forward at "
      << f("%g GB/s", c.gpu().host_bw / 1e9) << ": steps waited " << f("%.3f s", r.breakdown.offload_stall)
      << " for them beyond their GPU time (summed over replicas)\n";
  if (plan.engine.kv_host > 0 || r.breakdown.host_cached_tokens > 0)
    o << "host KV tier   " << f("%g GB per GPU", plan.engine.kv_host / 1e9) << ": "
      << readable(static_cast<double>(r.breakdown.host_cached_tokens)) << " of the cached tokens found there (copied back at "
      << f("%g GB/s", plan.engine.swap_bw / 1e9) << "), " << r.breakdown.host_dropped_blocks << " blocks dropped from it\n";

  const ServingBreakdown& b = r.breakdown;
  const Degrees& d = r.disagg.on ? plan.decode().deg : plan.deg;  // the decode pool's experts and pipeline
  o << "scoring        " << describe_scoring(b, L.serving) << "\n";
  if (r.disagg.on) print_disaggregation(o, plan, c, r);
  else o << "\nwhere the time goes — " << b.steps << " steps of " << d.dp << (d.dp > 1 ? " replicas" : " replica") << " ("
    << b.prefill_tokens << " prefill + " << b.decode_tokens << " decode tokens)\n";
  if (!r.disagg.on) {
    print_critical_path(o, b, d.dp);
    print_communication(o, b, d.dp, d.dp * d.pp * d.unit());
  }
  print_links(o, b, *L.cluster, r.disagg.on ? 1 : d.dp);
  if (d.ep > 1 && b.expert_time > 0 && !r.disagg.on)
    o << "EP imbalance   the slowest EP rank spends " << f("%.3f s", b.expert_imbalance) << " more than the mean in experts, "
      << over_replicas(d.dp) << f(" (%.1f%% of its expert time)\n", 100 * b.expert_imbalance / b.expert_time);
  if (r.experts.redundant > 0)
    o << "EPLB           " << r.experts.redundant << " redundant expert slots (" << (L.model.experts + r.experts.redundant) / d.ep
      << " per EP rank): measured EP-rank load max/mean " << f("%.2f", r.experts.before) << " → " << f("%.2f", r.experts.after)
      << " (a held-out " << r.experts.sample_tokens << "-token sample, mean over MoE layers)\n";
  if (fr.tier != Tier::Analytic) {
    o << "contention     " << fr.sampled_steps << " steps simulated in SimGrid" << (fr.tier == Tier::Simgrid ? " (stratified sample, representative layers)" : "")
      << ", " << fr.failed << " failed" << (fr.failed > 0 ? " (their strata use the nearest successful sample)" : "")
      << ", " << fr.worker_restarts << " worker restarts; step time SimGrid/analytic median " << f("%.3f", fr.ratio_median) << " ("
      << f("%.3f", fr.ratio_min) << f("–%.3f)\n", fr.ratio_max);
    o << "  vs contention-free:";
    for (int k = 0; k < 5; ++k)
      if (fr.ops[static_cast<std::size_t>(k)] > 0) o << " " << kind_name(k) << f(" %.2f×;", fr.slowdown[static_cast<std::size_t>(k)]);
    if (fr.most_loaded_class >= 0) o << " busiest link class: " << to_string(static_cast<LinkClass>(fr.most_loaded_class));
    o << "\n";
    print_busiest_link(o, fr, c);
    for (const auto& e : fr.errors) o << "  failed evaluation: " << e << "\n";
  }
  if (d.pp > 1 && b.pipeline_span > 0)
    o << "pipeline       bubble " << f("%.1f%% of stage time", 100 * b.pipeline_bubble / b.pipeline_span) << " across "
      << d.pp << " stages, summed over replicas and stages\n";
}

// The plan's capacity measures (sim/serving/capacity.hpp) at the run's tier: what it sustains,
// whatever --requests says; printed with how each was measured, and added to the JSON.
json report_capacity(const SimulateOptions& opt, Tier tier, const LoadedInputs& L, const Plan& plan, SimgridRunner* runner) {
  EvaluatorInputs ei;
  ei.model = &L.model;
  ei.cluster = L.cluster.get();
  ei.cluster_spec = opt.in.cluster;
  ei.trace = &L.trace;
  ei.population = &L.population;
  ei.routing = L.routing.get();
  ei.serving = L.serving;
  ei.tier = tier;
  ei.runner = runner;
  ei.samples = opt.samples;
  ei.goal = parse_slo_goal(opt.goal, L.serving.slo_ttft, L.serving.slo_tpot, "--goal");
  ei.arrivals = opt.in.arrivals == "trace" ? Arrival::Trace : Arrival::Poisson;
  ei.seed = opt.in.seed;
  ei.capacity_converge_saturated = true;  // printed below as the saturated throughput
  const SloCapacity c = ServingEvaluator(ei).capacity(plan);
  const SaturatedThroughput& t = c.saturated;
  std::ostream& o = std::cout;
  o << "\ncapacity       what the plan sustains, drawn from the whole trace " << L.trace_spec << " ("
    << readable(static_cast<double>(L.population.requests.size())) << " requests), not only the " << L.trace.requests.size()
    << " above; seed " << opt.in.seed << "\n";
  o << "  saturated    " << t.describe() << "\n"
    << "               a backlog keeps every batch full; the rate is that of the window from the first batch turnover\n"
    << "               to the first replica's last admission, extended until it holds 3 turnovers and its 10 batch\n"
    << "               means give a 95% interval within ±2%\n";
  o << "  under SLO    " << ei.goal.describe() << ": " << c.describe() << "\n";
  if (!c.probe_log.empty()) {  // how the search went: the bound, then down, then bisection
    o << "  probes       ";
    for (std::size_t i = 0; i < c.probe_log.size(); ++i) {
      const auto& p = c.probe_log[i];
      o << (i > 0 ? ", " : "") << readable(p.rate, 3) << (p.met ? " met" : p.extended ? " met, too few turnovers" : " missed");
      if (p.stopped) o << " (stopped, " << readable(static_cast<double>(p.finished)) << " finished)";
      if (i > 0 && c.probe_log[i - 1].extended) o << " (" << readable(static_cast<double>(p.requests)) << " requests)";
    }
    o << " — req/s, in order, from the bound (the saturated rate once its window held 3 turnovers";
    if (c.bound != t.request_s) o << "; narrowed since to " << readable(t.request_s, 3);
    o << "); each probe the trace's " << readable(static_cast<double>(c.probe_log.front().requests)) << " requests";
    if (t.replicas > 1) o << " (replica 0's share simulated)";
    o << ", replayed longer at the same rate where one met the goal but its batch turned over fewer than 3 times\n";
  }
  long met_requests = 0;  // the probes that met the goal ran whole; those that missed stopped or failed on the way
  for (const auto& p : c.probe_log) met_requests += p.met || p.extended ? p.simulated : 0;
  o << "  cost         " << c.runs() << " runs simulated " << readable(static_cast<double>(c.simulated_requests + t.simulated_requests))
    << " requests (" << readable(static_cast<double>(t.simulated_requests)) << " in the backlog runs, "
    << readable(static_cast<double>(met_requests)) << " in the probes that met the goal, "
    << readable(static_cast<double>(c.simulated_requests - met_requests)) << " in those that missed it"
    << (t.replicas > 1 ? "; one replica's share each run" : "") << ") and executed "
    << readable(static_cast<double>(c.executed_steps + t.executed_steps)) << " steps (the rest memoised, fitted or fast-forwarded)\n";
  if (c.feasible)
    o << "               at that rate (" << (ei.arrivals == Arrival::Trace ? "the trace's arrival shape" : "Poisson")
      << ", second half of " << readable(static_cast<double>(c.verdict_requests())) << " requests): TTFT p99 "
      << f("%.1f ms", c.at_rate.ttft_ms.p99) << ", TPOT p99 " << f("%.2f ms", c.at_rate.tpot_ms.p99) << "\n";
  json probe_log = json::array();
  for (const auto& p : c.probe_log)
    probe_log.push_back({{"rate_req_s", p.rate}, {"met", p.met}, {"stopped", p.stopped}, {"finished", p.finished},
                         {"goal_used", std::isfinite(p.load) ? json(p.load) : json(nullptr)},
                         {"simulated_requests", p.simulated}, {"executed_steps", p.executed}, {"requests", p.requests},
                         {"extended", p.extended}});
  auto sat = json{{"feasible", t.feasible}, {"converged", t.converged}, {"output_tok_s", t.output_tok_s},
                  {"total_tok_s", t.total_tok_s}, {"request_s", t.request_s}, {"requests", t.requests},
                  {"runs", t.runs}, {"simulated_requests", t.simulated_requests}, {"executed_steps", t.executed_steps},
                  {"window_s", json::array({t.window_start, t.window_end})},
                  {"turnovers", t.turnovers}, {"rel_halfwidth", std::isfinite(t.rel_halfwidth) ? json(t.rel_halfwidth) : json(nullptr)},
                  {"note", t.note}};
  return {{"saturated", sat},
          {"slo", {{"goal", ei.goal.describe()}, {"feasible", c.feasible}, {"rate_req_s", c.rate}, {"bound_req_s", c.bound},
                   {"min_failing_req_s", c.min_failing}, {"at_saturation", c.at_saturation},
                   {"output_tok_s", c.output_tok_s}, {"probes", c.probes()},
                   {"stopped_probes", c.stopped_probes()}, {"probe_requests", c.probe_requests}, {"note", c.note},
                   {"probe_log", probe_log}, {"simulated_requests", c.simulated_requests}, {"executed_steps", c.executed_steps},
                   {"ttft_p99_ms", c.at_rate.ttft_ms.p99}, {"tpot_p99_ms", c.at_rate.tpot_ms.p99},
                   {"elasticity", std::isfinite(c.elasticity) ? json(c.elasticity) : json(nullptr)}, {"flat", c.flat()}}},
          {"population", L.population.requests.size()}, {"seed", opt.in.seed}};
}

void run(const SimulateOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  const Tier tier = parse_tier(opt.fidelity, "--fidelity");
  // Output paths are refused before any work, not after it.
  for (const std::string& path : {opt.json_out, opt.timeline_out, opt.csv_out, opt.links_out})
    if (!path.empty()) check_output_path(path);
  if (!opt.links_out.empty() && tier == Tier::Analytic)
    throw InputError("--links", opt.links_out,
                     "per-link loads come from the steps SimGrid runs: use --fidelity simgrid or full (the analytic "
                     "tier's per-class traffic is in the report's \"links\" section)");
  const bool from_decode = opt.timeline_from == "decode";
  long from_step = 0;
  if (!from_decode) {
    if (opt.timeline_from.empty() || opt.timeline_from.size() > 9 ||
        opt.timeline_from.find_first_not_of("0123456789") != std::string::npos)
      throw InputError("--timeline-from", opt.timeline_from, "expected a step number (0 = the first) or 'decode'");
    from_step = std::stol(opt.timeline_from);
  }
  // The worker pool forks its zygote before anything else runs (no threads exist yet).
  const Scorer scorer(tier, opt.workers, opt.samples);
  LoadedInputs L = load_inputs(opt.in);
  Plan plan = load_feasible_plan(opt.plan, L);
  ServingOptions so = L.serving;
  so.link_traffic = true;  // the report's "links" section
  so.timeline_steps = opt.timeline_out.empty() ? 0 : opt.timeline_steps;
  so.timeline_from_decode = from_decode;
  so.timeline_from = from_step;
  FidelityReport fr;
  ServingResult r = scorer.serve({L.model, *L.cluster, opt.in.cluster, plan, L.trace, L.routing.get(), so}, fr);
  Metrics m = summarize(r, so, L.cluster->num_gpus());
  const RunEnergy energy = run_energy(energy_pools(r, plan, *L.cluster), m.makespan_s, network_ports(*L.cluster));
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_report(opt.in, L, plan, r, m, energy, opt.fidelity, fr);
  json capacity;
  if (opt.capacity) capacity = report_capacity(opt, tier, L, plan, scorer.runner());
  RunInputs in{opt.in.model, opt.in.cluster, opt.plan, L.trace_spec, L.routing ? L.routing_spec : "", opt.fidelity,
               opt.in.requests, opt.in.offline, opt.in.seed, load_to_json(opt.in)};
  // All the requested files or none (a full disk once left --json written and --timeline not).
  OutputSet files;
  if (!opt.json_out.empty()) {
    json j = simulate_result_json(in, plan, *L.cluster, r, m, so, wall, fr);
    if (opt.capacity) j["capacity"] = capacity;
    files.add(opt.json_out, json_text(j, 2) + "\n");
  }
  if (!opt.timeline_out.empty()) {
    const Plan& shown = plan.disaggregated() ? plan.decode() : plan;  // a disaggregated run's timeline is its decode pool's
    const std::vector<int> gpus = PlanLayout(shown).replica(0);
    files.add(opt.timeline_out, timeline_to_chrome_trace(r.timeline, gpus, r.timeline_steps, rank_roles(shown, gpus)));
  }
  if (!opt.csv_out.empty()) files.add(opt.csv_out, requests_to_csv(r, so));
  if (!opt.links_out.empty()) files.add(opt.links_out, links_csv(fr, *L.cluster));
  files.commit();
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto opt = std::make_shared<SimulateOptions>();
  auto* cmd = app.add_subcommand(
      "simulate",
      "Score one plan: replay a request trace with token-level expert routing and report throughput,\n"
      "TTFT/TPOT percentiles, goodput under an SLO, memory per GPU and where the time goes.\n\n"
      "Examples:\n"
      "  shardsim simulate --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=2,dp=4 --requests 500\n"
      "  shardsim simulate --model deepseek-v3 --cluster dgx-h100:4 --plan tp=1,ep=32,attn_dp=32 \\\n"
      "                    --routing synthetic:zipf=1.2,locality=0.3 --slo ttft=2000,tpot=80 --json out.json\n"
      "  shardsim simulate --model llama2-70b --cluster dgx-h100:1 --plan tp=2,dp=4,weights=fp8,act=fp8,kv=fp8,engine=trtllm-mlperf \\\n"
      "                    --trace synthetic:n=4000,prompt=lognormal:222:0.6,output=lognormal:290:0.5 --offline\n"
      "  shardsim simulate --model deepseek-v3 --cluster dgx-h100:8 --plan tp=8,ep=8,dp=8 --rate 12      # Poisson, 12 req/s\n"
      "  shardsim simulate --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=2,dp=4 --concurrency 64  # closed loop\n"
      "  shardsim simulate --model deepseek-v3 --cluster dgx-h100:4 --plan prefill:attn_dp=16,ep=16/decode:attn_dp=16,ep=16 \\\n"
      "                    --rate 4              # prefill and decode on separate pools (1P1D), KV sent over the fabric\n"
      "  shardsim simulate --plan megatron --timeline steps.json --requests-csv requests.csv");
  add_sim_options(cmd, opt->in);
  cmd->add_option("--plan,-p", opt->plan, "plan JSON file, compact string (tp=2,dp=4,engine=trtllm,max_seqs=896: degrees, sharding, dtypes, engine settings; docs/plan-format.md) or 'megatron'")->capture_default_str();
  cmd->add_option("--fidelity", opt->fidelity,
                  "analytic (formulas) | simgrid (a stratified sample of steps in SimGrid corrects the rest) | full (every step in SimGrid)")
      ->capture_default_str();
  add_declared(cmd, static_cast<ScoringResources&>(*opt), scoring_resource_decls(kWorkers | kSamples));
  cmd->add_option("--json", opt->json_out, "write the result (schema shardsim.result/1) to this file");
  cmd->add_option("--timeline", opt->timeline_out,
                  "write a Chrome trace of replica 0's steps (open in Perfetto): every operation on tracks named by "
                  "each GPU's role, and a slice per step with its batch (decode/prefill tokens, sequences, KV in use)");
  cmd->add_option("--timeline-steps", opt->timeline_steps, "steps in the timeline")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--timeline-from", opt->timeline_from,
                  "first step of the timeline: a step number (0 = the first), or 'decode' for the first decode-only step")
      ->capture_default_str();
  cmd->add_option("--requests-csv", opt->csv_out, "write one row per request to this CSV file");
  cmd->add_option("--links", opt->links_out,
                  "simgrid and full tiers: write every link direction's load in the SimGrid steps (bytes, mean and peak "
                  "utilisation) to this CSV file, busiest first (docs/what-if.md)");
  cmd->add_flag("--capacity", opt->capacity,
                "also measure what the plan sustains, drawn from the whole trace: its saturated throughput (a backlog run "
                "extended until it converges) and its capacity under --slo at --goal (the highest Poisson rate meeting it); "
                "~6-10 more runs");
  cmd->add_option("--goal", opt->goal, "with --capacity: p99 | p90 | p50 | attain=F")->capture_default_str();
  cmd->callback([opt] { run(*opt); });
}

}  // namespace shardsim::cli
