// tools/cli/cmd_sweep.cpp — `shardsim sweep`: one plan under rising load: throughput against
// latency, and the highest load that meets a service-level objective.
//
// The load is an open-loop request rate (--rates; by default fractions of the plan's offline
// capacity) or a closed-loop client count (--clients). Every point serves the same requests (the
// first --requests of the trace; open loop: Poisson gaps drawn once from --seed and scaled to the
// rate, so points differ only in rate) and the points run in parallel. The capacity search
// (sim/serving/load_sweep) then bisects between the highest point that meets --goal and the
// lowest one above it that does not. Output: a table on stdout and, with --out DIR, sweep.csv,
// sweep.json, sweep.gp and sweep.png (when gnuplot is there), swapped in as one set.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "common/readable_number.hpp"
#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "optimizers/search/study_dir.hpp"
#include "sim/serving/capacity.hpp"
#include "sim/serving/load_sweep.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/simgrid/scorer.hpp"
#include "common/worker_pool.hpp"
#include "studies/scoring_resources.hpp"
#include "tools/cli/commands.hpp"
#include "studies/run_program.hpp"
#include "tools/cli/option_table_cli.hpp"

namespace shardsim::cli {

namespace {

struct SweepOptions : ScoringResources {
  SimInputs in;
  std::string plan = "megatron";
  std::string fidelity = "analytic";
  std::string rates, clients;   // "auto" or a comma-separated list; clients set = closed loop
  int points = 10;
  std::string goal = "p99";
  bool no_capacity = false;
  std::string out;
};

const std::vector<std::string>& sweep_members() {
  static const std::vector<std::string> m = {"sweep.csv", "sweep.json", "sweep.gp", "sweep.png"};
  return m;
}

std::vector<double> parse_list(const std::string& text, const char* option, bool whole) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    double v = 0;
    if (!parse_double(item, v) || !(v > 0) || (whole && v != std::floor(v)))
      throw InputError(option, item, whole ? "expected whole client counts ≥ 1, comma-separated"
                                           : "expected request rates > 0 (req/s), comma-separated");
    out.push_back(v);
  }
  if (out.empty() || text.back() == ',') throw InputError(option, text, "an empty item");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Everything a point needs to be scored.
struct PointScorer {
  const SweepOptions& opt;
  const LoadedInputs& L;
  const Plan& plan;
  const Scorer& scorer;
  bool closed;

  Metrics operator()(double load) const {
    ServingOptions so = L.serving;
    so.offline = false;
    if (closed) so.concurrency = static_cast<int>(load);
    const RequestTrace t = closed ? L.trace : trace_at_rate(opt.in, L.trace, load);
    FidelityReport fr;
    ServingResult r = scorer.serve({L.model, *L.cluster, opt.in.cluster, plan, t, L.routing.get(), so}, fr);
    return summarize(r, so, L.cluster->num_gpus());
  }
};

// What the plan sustains (sim/serving/capacity.hpp, analytic tier): its saturated throughput,
// measured on a backlog of the whole trace extended until it converges. The automatic range's
// scale, and the ceiling of the capacity search: a rate above it cannot be sustained however long
// the run, so it is never reported as met.
SaturatedThroughput sustainable(const PointScorer& s) {
  const CapacityServe serve = [&](const RequestTrace& t, const ServingOptions& o, Metrics& m) {
    FidelityReport fr;
    ServingResult r = s.scorer.serve({s.L.model, *s.L.cluster, s.opt.in.cluster, s.plan, t, s.L.routing.get(), o}, fr, Tier::Analytic);
    m = summarize(r, o, s.L.cluster->num_gpus());
    return r;
  };
  CapacityOptions co;
  co.start_requests = static_cast<long>(s.L.trace.requests.size());
  co.seed = s.opt.in.seed;
  return saturated_throughput(serve, s.L.population, s.L.serving, co);
}

// The loads to sweep: the user's, or automatic (rates: `points` evenly up to 1.2× the saturated
// rate; clients: powers of two up to twice the sequences the replicas can run, ≤ requests).
std::vector<double> sweep_loads_of(const SweepOptions& opt, const Plan& plan, double capacity, int requests) {
  const bool closed = !opt.clients.empty();
  if (closed && plan.disaggregated()) refuse_closed_loop("--clients", opt.clients);
  const std::string& list = closed ? opt.clients : opt.rates;
  if (list != "auto" && !list.empty()) return parse_list(list, closed ? "--clients" : "--rates", closed);
  std::vector<double> loads;
  if (closed) {
    const double top = std::min<double>(requests, 2.0 * static_cast<double>(engine_seqs(plan.engine, plan.deg.attn_dp)) * plan.deg.dp);
    for (double c = 1; c <= top; c *= 2) loads.push_back(c);
    return loads;
  }
  for (int i = 1; i <= opt.points; ++i) loads.push_back(1.2 * capacity * i / opt.points);
  return loads;
}

std::string (*const f)(const char*, double) = formatted;  // common/readable_number

// Output tokens per second per user: 1 / TPOT p50.
double per_user(const Metrics& m) { return m.tpot_ms.p50 > 0 ? 1e3 / m.tpot_ms.p50 : 0; }

// `sustained`: the saturated request rate; an open-loop rate above it is marked "above saturation".
void print_table(std::ostream& o, const std::vector<LoadPoint>& pts, bool closed, double sustained) {
  o << (closed ? "clients" : "  req/s") << "   served/s  out tok/s  tok/s/GPU  tok/s/user   TTFT p50    p99 ms"
    << "   TPOT p50    p99 ms  in SLO  meets\n";
  bool above = false;
  for (const auto& p : pts) {
    const bool over = !closed && p.load > sustained;
    above = above || over;
    const Metrics& m = p.metrics;
    o << f(closed ? "%7.0f" : "%7.3g", p.load) << f("  %9.3f", m.request_s) << f("  %9.0f", m.output_tok_s)
      << f("  %9.1f", m.output_tok_s_per_gpu) << f("  %10.1f", per_user(m)) << f("  %9.1f", m.ttft_ms.p50)
      << f("  %8.1f", m.ttft_ms.p99) << f("  %9.2f", m.tpot_ms.p50) << f("  %8.2f", m.tpot_ms.p99)
      << f("  %5.1f%%", 100 * m.slo_attainment) << (p.meets ? "  yes" : "  no") << (over ? "  (above saturation)" : "") << "\n";
  }
  if (above)
    o << "(above saturation: more than the " << readable(sustained, 3) << " req/s the plan sustains; such a rate's queue grows "
         "without end, and whatever it 'meets' holds only until the run's requests run out)\n";
}

std::string csv_of(const std::vector<LoadPoint>& pts, bool closed) {
  std::ostringstream o;
  o << (closed ? "clients" : "rate_req_s")
    << ",served_req_s,output_tok_s,output_tok_s_per_gpu,steady_output_tok_s,tok_s_per_user,ttft_p50_ms,ttft_p90_ms,"
       "ttft_p99_ms,tpot_p50_ms,tpot_p90_ms,tpot_p99_ms,slo_attainment,goodput_req_s,completed,requests,meets\n";
  for (const auto& p : pts) {
    const Metrics& m = p.metrics;
    o << p.load << "," << m.request_s << "," << m.output_tok_s << "," << m.output_tok_s_per_gpu << ","
      << m.steady_output_tok_s << "," << per_user(m) << "," << m.ttft_ms.p50 << "," << m.ttft_ms.p90 << ","
      << m.ttft_ms.p99 << "," << m.tpot_ms.p50 << "," << m.tpot_ms.p90 << "," << m.tpot_ms.p99 << ","
      << m.slo_attainment << "," << m.goodput_req_s << "," << m.completed << "," << m.requests << ","
      << (p.meets ? 1 : 0) << "\n";
  }
  return o.str();
}

json point_json(const LoadPoint& p) {
  const Metrics& m = p.metrics;
  auto pct = [](const Percentiles& x) { return json{{"p50", x.p50}, {"p90", x.p90}, {"p99", x.p99}}; };
  return {{"load", p.load},
          {"meets", p.meets},
          {"served_req_s", m.request_s},
          {"output_tok_s", m.output_tok_s},
          {"output_tok_s_per_gpu", m.output_tok_s_per_gpu},
          {"steady_output_tok_s", m.steady_output_tok_s},
          {"tok_s_per_user", per_user(m)},
          {"ttft_ms", pct(m.ttft_ms)},
          {"tpot_ms", pct(m.tpot_ms)},
          {"slo_attainment", m.slo_attainment},
          {"goodput_req_s", m.goodput_req_s},
          {"completed", m.completed},
          {"requests", m.requests}};
}

// The two-panel plot: throughput per GPU against load; p99 TTFT and TPOT against load with the SLO.
std::string gnuplot_script(const SloGoal& g, bool closed) {
  const std::string x = closed ? "clients (closed loop)" : "offered load (req/s)";
  std::ostringstream o;
  o << "set terminal pngcairo size 1100,460 noenhanced\nset output 'sweep.png'\nset datafile separator ','\n"
    << "set key autotitle columnhead top left\nset grid\nset multiplot layout 1,2\n"
    << "set xlabel '" << x << "'\nset ylabel 'output tok/s per GPU'\n"
    << "plot 'sweep.csv' using 1:4 with linespoints lw 2 title 'throughput per GPU'\n"
    << "set ylabel 'ms'\nset logscale y\n"
    << "plot 'sweep.csv' using 1:9 with linespoints lw 2 title 'TTFT p99', '' using 1:12 with linespoints lw 2 title 'TPOT p99', "
    << g.ttft_s * 1e3 << " dt 2 lc 1 title 'TTFT bound', " << g.tpot_s * 1e3 << " dt 2 lc 2 title 'TPOT bound'\n"
    << "unset multiplot\n";
  return o.str();
}

// Writes the outputs into a staging folder and swaps it in for --out; true when plotted.
bool write_outputs(const SweepOptions& opt, const json& j, const std::vector<LoadPoint>& all, const SloGoal& g, bool closed) {
  OutputStaging staging(opt.out, sweep_members());
  const std::string d = staging.dir() + "/";
  write_file_atomically(d + "sweep.csv", csv_of(all, closed));
  write_file_atomically(d + "sweep.json", json_text(j, 2) + "\n");
  write_file_atomically(d + "sweep.gp", gnuplot_script(g, closed));
  const bool plotted = plot_png(staging.dir(), "sweep.gp", "sweep.png");
  staging.publish();
  return plotted;
}

// Returns the tier --fidelity names.
Tier check_options(const SweepOptions& opt) {
  if (!opt.rates.empty() && !opt.clients.empty())
    throw InputError("--rates", opt.rates, "give either --rates (open loop) or --clients (closed loop), not both");
  return parse_tier(opt.fidelity, {Tier::Analytic, Tier::Simgrid}, "--fidelity", "full would take hours per point");
}

void run(const SweepOptions& opt) {
  const Tier tier = check_options(opt);
  if (!opt.out.empty()) prepare_study_dir(opt.out, false);  // a folder that cannot be made fails before the work
  const Scorer scorer(tier, opt.workers, opt.samples);  // its pool forks before any thread exists
  LoadedInputs L = load_inputs(opt.in);
  Plan plan = load_feasible_plan(opt.plan, L);
  const SloGoal goal = parse_slo_goal(opt.goal, L.serving.slo_ttft, L.serving.slo_tpot, "--goal");
  const bool closed = !opt.clients.empty();
  const PointScorer score{opt, L, plan, scorer, closed};
  const SaturatedThroughput sat = sustainable(score);
  const double capacity = sat.request_s;
  const std::vector<double> loads = sweep_loads_of(opt, plan, capacity, static_cast<int>(L.trace.requests.size()));

  std::ostream& o = std::cout;
  o << "shardsim sweep: " << L.model.name << " on " << L.cluster->name() << " (" << L.cluster->num_gpus()
    << " GPUs), plan " << plan_to_string(plan) << ", " << opt.fidelity << " fidelity\n"
    << "trace " << L.trace_spec << " (" << L.trace.requests.size() << " requests"
    << (closed ? "; closed loop" : opt.in.arrivals == "trace" ? "; the trace's arrival shape" : "; Poisson arrivals")
    << "); goal: " << goal.describe() << "\n"
    << "saturated      " << sat.describe() << " (analytic tier, drawn from the whole trace)\n\n";
  std::vector<LoadPoint> points = sweep_loads(loads, score, goal, opt.threads);
  print_table(o, points, closed, capacity);

  json j = {{"schema", "shardsim.sweep/1"},
            {"inputs", {{"model", opt.in.model}, {"cluster", opt.in.cluster}, {"plan", plan_to_string(plan)},
                        {"trace", L.trace_spec}, {"requests", L.trace.requests.size()}, {"seed", opt.in.seed},
                        {"routing", L.routing ? L.routing_spec : ""}, {"fidelity", opt.fidelity},
                        {"mode", closed ? "closed" : "rate"}, {"arrivals", closed ? "closed" : opt.in.arrivals}}},
            {"goal", goal.describe()},
            {"saturated", {{"req_s", capacity}, {"output_tok_s", sat.output_tok_s}, {"converged", sat.converged},
                           {"requests", sat.requests}, {"note", sat.note}}}};
  j["points"] = json::array();
  for (const auto& p : points) {
    j["points"].push_back(point_json(p));
    j["points"].back()["above_saturation"] = !closed && p.load > capacity;
  }
  std::vector<LoadPoint> all = points;
  if (!opt.no_capacity) {
    // Open loop: the search stays at or below the saturated rate (a rate above it cannot be
    // sustained, whatever a finite run shows); points above it are left out of its bracket.
    std::vector<LoadPoint> known;
    for (const auto& p : points)
      if (closed || p.load <= capacity) known.push_back(p);
    double lo = loads.front(), hi = closed ? loads.back() : std::min(loads.back(), capacity);
    for (const auto& p : known) if (p.meets) lo = p.load;  // the highest meeting point …
    for (const auto& p : known) if (!p.meets && p.load > lo) { hi = p.load; break; }  // … and the next failing one
    if (!closed) lo = std::min(lo, capacity);
    const double limit = closed ? static_cast<double>(L.trace.requests.size()) : capacity;
    CapacityResult cap = max_load_meeting(score, lo, std::max(lo, hi), goal, 0.02, 12, closed, known, limit);
    const std::string unit = closed ? "clients" : "req/s";
    o << "\nmax " << (closed ? "clients" : "rate") << " meeting the goal: " << cap.describe(unit) << "\n";
    const std::string note = !closed && cap.bound == CapacityResult::Bound::AllMeet
                                 ? "the goal holds up to the plan's saturated rate (" + readable(capacity, 3) +
                                       " req/s), the most it sustains: the capacity is its throughput"
                                 : "";
    if (!note.empty()) o << "note: " << note << "\n";
    j["capacity"] = {{"bound", cap.bound == CapacityResult::Bound::Found ? "found" : cap.bound == CapacityResult::Bound::AllMeet ? "all-meet" : "none-meet"},
                     {"max_meeting", cap.max_meeting}, {"min_failing", cap.min_failing}, {"unit", unit},
                     {"probes", json::array()}, {"note", note}};
    for (const auto& p : cap.probes) j["capacity"]["probes"].push_back(point_json(p));
    all.insert(all.end(), cap.probes.begin(), cap.probes.end());
    std::sort(all.begin(), all.end(), [](const LoadPoint& a, const LoadPoint& b) { return a.load < b.load; });
  }
  if (opt.out.empty()) return;
  const bool plotted = write_outputs(opt, j, all, goal, closed);
  o << "\nwrote " << opt.out << "/{sweep.csv, sweep.json, sweep.gp" << (plotted ? ", sweep.png}" : "}") << "\n";
  if (!plotted) o << "(no plot: gnuplot is missing or failed, or the image was cut short; run 'gnuplot sweep.gp' in " << opt.out << ")\n";
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto opt = std::make_shared<SweepOptions>();
  auto* cmd = app.add_subcommand(
      "sweep",
      "One plan under rising load: throughput, TTFT/TPOT percentiles and SLO attainment at each offered rate\n"
      "(open loop) or client count (closed loop), and the highest load that meets the SLO (docs/load.md).\n\n"
      "Examples:\n"
      "  shardsim sweep --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=2,dp=4 --requests 1000\n"
      "  shardsim sweep --model deepseek-v3 --cluster dgx-h100:8 --plan tp=8,ep=8,dp=8 --rates 2,4,8,16 \\\n"
      "                 --slo ttft=2000,tpot=80 --goal attain=0.9 --out sweep-ds\n"
      "  shardsim sweep --model llama3-70b --cluster dgx-h100:1 --plan tp=4,dp=2 --clients 1,4,16,64,256");
  add_sim_options(cmd, opt->in, false);  // the sweep sets the load: no --rate, --concurrency, --offline
  cmd->add_option("--plan,-p", opt->plan, "plan JSON file, compact string or 'megatron'")->capture_default_str();
  cmd->add_option("--rates", opt->rates, "open loop: request rates (req/s) to offer, comma-separated, or auto "
                                         "(--points rates up to 1.2× the plan's saturated rate; the default)");
  cmd->add_option("--clients", opt->clients, "closed loop: client counts, comma-separated, or auto (powers of two)");
  cmd->add_option("--points", opt->points, "rates in the automatic range")->capture_default_str()->check(CLI::Range(2, 200));
  cmd->add_option("--goal", opt->goal,
                  "what meets the --slo: p99 | p90 | p50 (that percentile of TTFT and of TPOT within bounds, MLPerf-style) "
                  "or attain=F (a fraction F of requests within both, DistServe-style)")
      ->capture_default_str();
  cmd->add_flag("--no-capacity", opt->no_capacity, "skip the search for the highest load that meets the goal");
  cmd->add_option("--fidelity", opt->fidelity, "analytic | simgrid")->capture_default_str();
  add_declared(cmd, static_cast<ScoringResources&>(*opt), scoring_resource_decls(kWorkers | kSamples | kThreads, "points", "per point"));
  cmd->add_option("--out", opt->out, "write sweep.csv, sweep.json, sweep.gp and sweep.png into this folder");
  cmd->callback([opt] { run(*opt); });
}

}  // namespace shardsim::cli
