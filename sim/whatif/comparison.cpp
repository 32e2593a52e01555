// sim/whatif/comparison.cpp — the comparison's table, frontier, explanation and files.
#include "sim/whatif/comparison.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/gnuplot_text.hpp"
#include "common/readable_number.hpp"
#include "sim/step/schedule_summary.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

namespace {

std::string (*const f)(const char*, double) = formatted;  // common/readable_number

// "+12.3%" / "−4.0%" (a true minus sign) of b against a.
std::string change(double a, double b) {
  if (!(a > 0)) return "";
  const double pct = 100 * (b / a - 1);
  if (std::fabs(pct) < 0.05) return "±0%";
  return (pct > 0 ? "+" : "−") + f("%.1f%%", std::fabs(pct));
}

// Generated tokens of the run (over the makespan).
double output_tokens(const ScenarioOutcome& o) { return o.metrics.output_tok_s * o.metrics.makespan_s; }

const char* kCollNames[4] = {"all-reduce", "reduce-scatter", "all-gather", "all-to-all + p2p"};

// Markdown escapes for a table cell.
std::string cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

// A CSV field, quoted when it holds a comma or a quote.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// A max rate the run cannot vouch for: far above what the plan serves offline, a queue grows
// without end, and meeting the SLO only means the run ended first (as `shardsim sweep` warns).

}  // namespace

double tok_s(const ScenarioOutcome& o) { return o.metrics.steady_output_tok_s; }
double tok_s_per_gpu(const ScenarioOutcome& o) { return o.gpus > 0 ? tok_s(o) / o.gpus : 0; }
double tok_s_per_user(const ScenarioOutcome& o) { return o.metrics.tpot_ms.p50 > 0 ? 1e3 / o.metrics.tpot_ms.p50 : 0; }
double joules_per_token(const ScenarioOutcome& o) { return o.energy.joules_per_token(output_tokens(o)); }

double usd_per_mtok(const ScenarioOutcome& o) {
  return o.gpu_hour_usd > 0 && tok_s(o) > 0 ? o.gpu_hour_usd * o.gpus / (tok_s(o) * 3600) * 1e6 : 0;
}

GpuTime gpu_time(const ScenarioOutcome& o) {
  GpuTime t;
  const double tokens = output_tokens(o);
  if (!(tokens > 0) || o.gpus <= 0) return t;
  const ServingBreakdown& b = o.breakdown;
  const double ms = 1e3 / tokens;  // seconds over the run → ms per generated token
  t.total = o.gpus * o.metrics.makespan_s * ms;
  // Each pool's (or the plan's) replica step time, charged to one stage's GPUs.
  std::vector<ScenarioOutcome::Pool> pools = o.pools;
  if (pools.empty()) pools.push_back({b, o.gpus, o.dp, o.pp});
  for (const auto& pool : pools) {
    const double per_stage = static_cast<double>(pool.gpus) / (std::max(1, pool.dp) * std::max(1, pool.pp));
    const ServingBreakdown& pb = pool.breakdown;
    for (int i = 0; i < kNumOpClasses; ++i) {
      const double c = pb.critical[static_cast<std::size_t>(i)] * per_stage * ms;
      (is_comm_class(static_cast<OpClass>(i)) ? t.communication : t.compute) += c;
    }
    t.waiting += pb.idle_on_path * per_stage * ms;
    t.host += pb.host_time * per_stage * ms;
    for (std::size_t k = 0; k < 4; ++k) t.collective[k] += pb.coll_by_kind[k] / std::max(1, pool.dp) * pool.gpus * ms;
  }
  t.idle = std::max(0.0, t.total - t.compute - t.communication - t.waiting - t.host);
  for (std::size_t k = 0; k < kNumLinkClasses; ++k) {
    t.link_bytes[k] = b.link_bytes[k] / tokens;
    t.link_busy[k] = b.step_time > 0 ? b.link_busiest[k] / b.step_time : 0;
  }
  return t;
}

std::vector<bool> pareto_frontier(const std::vector<ScenarioOutcome>& v) {
  std::vector<bool> on(v.size(), false);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].feasible) continue;
    const double x = tok_s_per_user(v[i]), y = tok_s_per_gpu(v[i]);
    bool dominated = false;
    for (std::size_t j = 0; j < v.size() && !dominated; ++j) {
      if (j == i || !v[j].feasible) continue;
      const double xj = tok_s_per_user(v[j]), yj = tok_s_per_gpu(v[j]);
      dominated = xj >= x && yj >= y && (xj > x || yj > y);
    }
    on[i] = !dominated;
  }
  return on;
}

std::string markdown_table(const std::vector<ScenarioOutcome>& v, const CompareContext& ctx) {
  const bool priced = std::any_of(v.begin(), v.end(), [](const auto& o) { return o.gpu_hour_usd > 0; });
  const bool rated = !ctx.goal.empty();
  const bool powered = std::any_of(v.begin(), v.end(), [](const auto& o) { return o.energy.modelled; });
  const std::vector<bool> front = pareto_frontier(v);
  std::ostringstream o;
  o << "| # | scenario | GPUs | plan | out tok/s | tok/s/GPU | tok/s/user | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms "
       "| TPOT p99 ms | goodput req/s |"
    << (rated ? " max rate req/s |" : "") << " weights+act GB/GPU | KV tokens/group |" << (priced ? " $/M tok |" : "")
    << (powered ? " W/GPU | J/tok |" : "") << " frontier |\n|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    << (rated ? "---:|" : "") << "---:|---:|" << (priced ? "---:|" : "") << (powered ? "---:|---:|" : "") << ":-:|\n";
  for (std::size_t i = 0; i < v.size(); ++i) {
    const ScenarioOutcome& s = v[i];
    o << "| " << i + 1 << " | " << cell(s.scenario.label) << " | " << s.gpus << " × " << cell(s.gpu) << " | ";
    if (!s.feasible) {
      o << "infeasible: " << cell(s.reason) << " |";
      for (int k = 0; k < 11 + rated + priced + 2 * powered; ++k) o << " |";  // the empty cells after the plan's
      o << "\n";
      continue;
    }
    const Metrics& m = s.metrics;
    o << "`" << cell(s.plan) << "`" << (s.plan_source == "given" ? "" : " (" + cell(s.plan_source) + ")") << " | "
      << readable(tok_s(s), 4) << (m.steady_trusted ? "" : "*") << " | " << readable(tok_s_per_gpu(s), 4) << " | "
      << readable(tok_s_per_user(s), 3) << " | " << readable(m.ttft_ms.p50, 4) << " | " << readable(m.ttft_ms.p99, 4)
      << " | " << readable(m.tpot_ms.p50, 3) << " | " << readable(m.tpot_ms.p99, 3) << " | " << readable(m.goodput_req_s, 3)
      << " |";
    if (rated)
      o << " " << (s.max_rate > 0 ? readable(s.max_rate, 3) + (s.max_rate_flat ? "~" : "") : s.max_rate == 0 ? "none" : "—") << " |";
    o << " " << readable(s.static_gb, 3) << " | " << readable(s.kv_capacity_tokens, 3) << " |";
    if (priced) o << " " << (usd_per_mtok(s) > 0 ? "$" : "") << (usd_per_mtok(s) > 0 ? readable(usd_per_mtok(s), 3) : "—") << " |";
    if (powered)
      o << " " << (s.energy.modelled ? readable(s.energy.watts_per_gpu(), 3) : "—") << " | "
        << (joules_per_token(s) > 0 ? readable(joules_per_token(s), 3) : "—") << " |";
    o << (front[i] ? " ✓ |" : "  |") << "\n";
  }
  const bool untrusted = std::any_of(v.begin(), v.end(), [](const auto& s) { return s.feasible && !s.metrics.steady_trusted; });
  if (untrusted)
    o << "\n\\* no saturated window (the run ends before its batches turn over once): tok/s over the makespan, "
         "ramp-up and drain included; use more requests for steady-state figures.\n";
  if (rated)
    o << "\nmax rate: the plan's capacity under " << ctx.goal << " — the highest Poisson rate whose replay of the whole "
         "trace meets it, at most the rate the plan sustains (a backlog run extended until it converges), whatever "
         "--requests says.\n";
  bool any_flat = false;
  for (const auto& s : v) any_flat = any_flat || s.max_rate_flat;
  if (rated && any_flat)
    o << "~ flat near it: the goal's binding percentile barely moves with the rate there, so another arrival draw may "
         "move this capacity by more than the search's 4% (simulate --capacity says how flat; docs/optimizers.md).\n";
  if (rated && ctx.goal_for_search)
    o << "(Measured without --max-rate because a plan was searched: `search:B` chooses by this capacity, so it is "
         "the column its plan is best in; the tok/s columns are the run of the requests above.)\n";
  return o.str();
}

namespace {

// What a change of fabric (the same GPUs) did to the links above the NICs: the classes that carried nothing in
// either run (so their bandwidth or oversubscription could not matter), and at the analytic tier
// that contention is not priced.
void explain_fabric(std::ostream& o, const ScenarioOutcome& a, const ScenarioOutcome& b, const GpuTime& ta, const GpuTime& tb) {
  std::string idle;
  bool upper_traffic = false;
  for (std::size_t k = 0; k < kNumLinkClasses; ++k) {
    const auto c = static_cast<LinkClass>(k);
    if (c == LinkClass::NvLink || c == LinkClass::NicLink) continue;
    if (a.links[k] + b.links[k] == 0) continue;
    if (ta.link_bytes[k] > 0 || tb.link_bytes[k] > 0) upper_traffic = true;
    else idle += std::string(idle.empty() ? "" : ", ") + to_string(c) + " (" + std::to_string(a.links[k]) + " → " +
                 std::to_string(b.links[k]) + " links)";
  }
  if (!idle.empty())
    o << "- carried nothing in either run: " << idle
      << ". Traffic that never reaches these links cannot be slowed by their bandwidth or oversubscription "
         "(docs/what-if.md, rail-optimised units).\n";
  if (upper_traffic && (a.tier == Tier::Analytic || b.tier == Tier::Analytic))
    o << "- traffic crosses the switch layers, but the analytic tier prices no contention: compare at --fidelity simgrid "
         "to see what sharing those links costs.\n";
}

// One scenario against the baseline: the headline, GPU time per token, the collective that grew
// most, link classes whose traffic or load changed, contention, bubbles.
void explain(std::ostream& o, const ScenarioOutcome& a, const ScenarioOutcome& b, std::size_t ia, std::size_t ib) {
  const GpuTime ta = gpu_time(a), tb = gpu_time(b);
  o << "**#" << ib + 1 << " " << b.scenario.label << "** against #" << ia + 1 << ": ";
  if (a.max_rate >= 0 && b.max_rate >= 0)  // what each sustains within the SLO comes first: it is the capacity
    o << "max rate " << readable(a.max_rate, 3) << " → " << readable(b.max_rate, 3) << " req/s"
      << (a.max_rate > 0 ? " (" + change(a.max_rate, b.max_rate) + ")" : "") << "; over the run above, ";
  o << "tok/s per GPU "
    << readable(tok_s_per_gpu(a), 4) << " → " << readable(tok_s_per_gpu(b), 4) << " (" << change(tok_s_per_gpu(a), tok_s_per_gpu(b))
    << "), TPOT p50 " << readable(a.metrics.tpot_ms.p50, 3) << " → " << readable(b.metrics.tpot_ms.p50, 3) << " ms ("
    << change(a.metrics.tpot_ms.p50, b.metrics.tpot_ms.p50) << ")";
  if (a.plan != b.plan) o << "; plan `" << a.plan << "` → `" << b.plan << "`";
  if (a.gpus != b.gpus || a.gpu != b.gpu) o << "; " << a.gpus << " × " << a.gpu << " → " << b.gpus << " × " << b.gpu;
  o << ".\n";
  auto ms = [](double x) { return readable(std::fabs(x) < 5e-4 ? 0.0 : x, 3); };
  o << "- GPU time per generated token " << ms(ta.total) << " → " << ms(tb.total) << " ms: compute " << ms(ta.compute) << " → "
    << ms(tb.compute) << ", communication on the critical path " << ms(ta.communication) << " → " << ms(tb.communication);
  if (ta.waiting > 0.005 * ta.total || tb.waiting > 0.005 * tb.total)
    o << ", waiting on the critical path " << ms(ta.waiting) << " → " << ms(tb.waiting);
  o << ", host " << ms(ta.host) << " → " << ms(tb.host) << ", no step running " << ms(ta.idle) << " → " << ms(tb.idle) << ".\n";
  const std::pair<double, const char*> parts[] = {{tb.compute - ta.compute, "compute"},
                                                 {tb.communication - ta.communication, "communication"},
                                                 {tb.waiting - ta.waiting, "waiting"},
                                                 {tb.host - ta.host, "host time"},
                                                 {tb.idle - ta.idle, "time with no step running (bubbles, ramp-up, drain)"}};
  const auto* top = &parts[0];
  for (const auto& p : parts)
    if (std::fabs(p.first) > std::fabs(top->first)) top = &p;
  if (std::fabs(top->first) > 0.02 * ta.total)
    o << "- the largest part of the change (" << (tb.total >= ta.total ? "+" : "−") << ms(std::fabs(tb.total - ta.total))
      << " ms) is " << top->second << ": " << (top->first > 0 ? "+" : "−") << ms(std::fabs(top->first)) << " ms.\n";
  else if (std::fabs(tb.total - ta.total) <= 0.005 * ta.total)
    o << "- the two runs spend their time alike.\n";
  std::size_t grew = 0;
  double most = 0;
  for (std::size_t k = 0; k < 4; ++k)
    if (std::fabs(tb.collective[k] - ta.collective[k]) > std::fabs(most)) {
      most = tb.collective[k] - ta.collective[k];
      grew = k;
    }
  if (std::fabs(most) > 0.02 * std::max(ta.total, tb.total))
    o << "- the collective that changed most: " << kCollNames[grew] << ", " << ms(ta.collective[grew]) << " → "
      << ms(tb.collective[grew]) << " GPU-ms per token (busy, overlapped time included).\n";
  double most_bytes = 0;  // the heaviest class of either run: classes below 1% of it are noise here
  for (std::size_t k = 0; k < kNumLinkClasses; ++k) most_bytes = std::max({most_bytes, ta.link_bytes[k], tb.link_bytes[k]});
  for (std::size_t k = 0; k < kNumLinkClasses; ++k) {
    const double ba = ta.link_bytes[k], bb = tb.link_bytes[k];
    const bool moved = std::fabs(bb - ba) > 0.05 * std::max(ba, bb) || std::fabs(tb.link_busy[k] - ta.link_busy[k]) > 0.05;
    if (std::max(ba, bb) < 0.01 * most_bytes || !moved) continue;
    o << "- " << to_string(static_cast<LinkClass>(k)) << " links: " << readable_bytes(ba) << " → " << readable_bytes(bb)
      << " per generated token; busiest link " << f("%.1f%%", 100 * ta.link_busy[k]) << " → " << f("%.1f%%", 100 * tb.link_busy[k])
      << " busy.\n";
  }
  if (a.scenario.cluster != b.scenario.cluster && a.gpu == b.gpu) explain_fabric(o, a, b, ta, tb);
  if (b.tier == Tier::Simgrid || a.tier == Tier::Simgrid) {
    for (std::size_t k = 0; k < 5; ++k) {
      const double sa = a.slowdown[k], sb = b.slowdown[k];
      if ((a.slowdown_ops[k] > 0 || b.slowdown_ops[k] > 0) && std::fabs(sb - sa) > 0.05)
        o << "- contention (SimGrid): " << (k < 4 ? kCollNames[k] : "send") << f(" %.2f×", sa) << f(" → %.2f×", sb)
          << " its contention-free time.\n";
    }
  }
  auto bubble = [](const ScenarioOutcome& s) {
    return s.breakdown.pipeline_span > 0 ? s.breakdown.pipeline_bubble / s.breakdown.pipeline_span : 0.0;
  };
  if (a.pp > 1 || b.pp > 1)
    o << "- pipeline bubble " << f("%.1f%%", 100 * bubble(a)) << " → " << f("%.1f%%", 100 * bubble(b)) << " of stage time.\n";
}

}  // namespace

namespace {

// Items of a comma list ("dgx-h100:8,oversub=2" → {dgx-h100:8, oversub=2}).
std::vector<std::string> items_of(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  std::sort(out.begin(), out.end());
  return out;
}

// Items in one list and not the other: how far apart two specs are.
std::size_t item_distance(const std::string& a, const std::string& b) {
  const auto x = items_of(a), y = items_of(b);
  std::vector<std::string> diff;
  std::set_symmetric_difference(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(diff));
  return diff.size();
}

}  // namespace

int reference_of(const std::vector<ScenarioOutcome>& v, std::size_t i) {
  if (i == 0 || i >= v.size()) return -1;
  const Scenario& s = v[i].scenario;
  int best = 0;
  std::size_t best_distance = SIZE_MAX;
  for (std::size_t j = 0; j < i; ++j) {
    const Scenario& r = v[j].scenario;
    const std::string Scenario::*axes[] = {&Scenario::model, &Scenario::cluster, &Scenario::engine, &Scenario::load,
                                           &Scenario::plan};
    int differ = 0;
    std::size_t distance = 0;
    for (auto ax : axes)
      if (r.*ax != s.*ax) {
        ++differ;
        distance = item_distance(r.*ax, s.*ax);
      }
    if (differ == 1 && distance < best_distance) {
      best = static_cast<int>(j);
      best_distance = distance;
    }
  }
  return best;
}

std::string why_they_differ(const std::vector<ScenarioOutcome>& v, const CompareContext& ctx) {
  std::ostringstream o;
  if (v.size() < 2 || ctx.baseline >= static_cast<int>(v.size())) return "";
  o << "## Why they differ\n\n"
    << (ctx.baseline >= 0 ? "Each scenario against #" + std::to_string(ctx.baseline + 1) + "."
                          : std::string("Each scenario against the nearest one before it that differs in one choice only (else #1)."))
    << " GPU time per generated token = GPUs × run time / generated tokens, split by where it went.\n\n";
  for (std::size_t i = 0; i < v.size(); ++i) {
    const int ref = ctx.baseline >= 0 ? ctx.baseline : reference_of(v, i);
    if (static_cast<int>(i) == ref || ref < 0) continue;
    const auto r = static_cast<std::size_t>(ref);
    if (!v[i].feasible || !v[r].feasible) {
      const std::size_t bad = v[i].feasible ? r : i;
      o << "**#" << i + 1 << " " << v[i].scenario.label << "** against #" << r + 1 << ": #" << bad + 1
        << " is infeasible: " << v[bad].reason << "\n\n";
      continue;
    }
    explain(o, v[r], v[i], r, i);
    o << "\n";
  }
  return o.str();
}

std::string compare_csv(const std::vector<ScenarioOutcome>& v) {
  const std::vector<bool> front = pareto_frontier(v);
  std::ostringstream o;
  o << "index,label,model,cluster,engine,load,plan_choice,plan,plan_source,feasible,reason,gpus,gpu,output_tok_s,"
       "steady_trusted,tok_s_per_gpu,tok_s_per_user,ttft_p50_ms,ttft_p99_ms,tpot_p50_ms,tpot_p99_ms,goodput_req_s,"
       "max_rate_req_s,static_gb_per_gpu,kv_capacity_tokens,usd_per_mtok,frontier,gpu_ms_per_token,compute_ms,"
       "communication_ms,host_ms,idle_ms,watts_per_gpu,joules_per_token\n";
  for (std::size_t i = 0; i < v.size(); ++i) {
    const ScenarioOutcome& s = v[i];
    const GpuTime t = gpu_time(s);
    const Metrics& m = s.metrics;
    o << i + 1 << "," << csv_field(s.scenario.label) << "," << csv_field(s.scenario.model) << "," << csv_field(s.scenario.cluster)
      << "," << csv_field(s.scenario.engine) << "," << csv_field(s.scenario.load) << "," << csv_field(s.scenario.plan) << ","
      << csv_field(s.plan) << "," << csv_field(s.plan_source) << "," << (s.feasible ? 1 : 0) << "," << csv_field(s.reason) << ","
      << s.gpus << "," << csv_field(s.gpu) << "," << tok_s(s) << "," << (m.steady_trusted ? 1 : 0) << "," << tok_s_per_gpu(s)
      << "," << tok_s_per_user(s) << "," << m.ttft_ms.p50 << "," << m.ttft_ms.p99 << "," << m.tpot_ms.p50 << ","
      << m.tpot_ms.p99 << "," << m.goodput_req_s << "," << s.max_rate << "," << s.static_gb << "," << s.kv_capacity_tokens
      << "," << usd_per_mtok(s) << "," << (front[i] ? 1 : 0) << "," << t.total << "," << t.compute << ","
      << t.communication << "," << t.host << "," << t.idle << "," << s.energy.watts_per_gpu() << "," << joules_per_token(s) << "\n";
  }
  return o.str();
}

json compare_json(const std::vector<ScenarioOutcome>& v, const CompareContext& ctx, const json& inputs) {
  const std::vector<bool> front = pareto_frontier(v);
  json j = {{"schema", "shardsim.compare/1"}, {"title", ctx.title}, {"inputs", inputs},
            {"baseline", ctx.baseline + 1}, {"goal", ctx.goal}};
  j["scenarios"] = json::array();
  auto pct = [](const Percentiles& p) { return json{{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}}; };
  for (std::size_t i = 0; i < v.size(); ++i) {
    const ScenarioOutcome& s = v[i];
    const int ref = ctx.baseline >= 0 ? ctx.baseline : reference_of(v, i);
    json e = {{"index", i + 1}, {"reference", ref >= 0 && ref != static_cast<int>(i) ? ref + 1 : 0}, {"label", s.scenario.label}, {"model", s.scenario.model}, {"cluster", s.scenario.cluster},
              {"engine", s.scenario.engine}, {"load", s.scenario.load}, {"plan_choice", s.scenario.plan},
              {"feasible", s.feasible}, {"gpus", s.gpus}, {"gpu", s.gpu}};
    if (!s.feasible) {
      e["reason"] = s.reason;
      j["scenarios"].push_back(e);
      continue;
    }
    const Metrics& m = s.metrics;
    const GpuTime t = gpu_time(s);
    e["plan"] = s.plan;
    e["plan_source"] = s.plan_source;
    e["tier"] = to_string(s.tier);
    e["output_tok_s"] = tok_s(s);
    e["steady_trusted"] = m.steady_trusted;
    e["tok_s_per_gpu"] = tok_s_per_gpu(s);
    e["tok_s_per_user"] = tok_s_per_user(s);
    e["ttft_ms"] = pct(m.ttft_ms);
    e["tpot_ms"] = pct(m.tpot_ms);
    e["goodput_req_s"] = m.goodput_req_s;
    e["slo_attainment"] = m.slo_attainment;
    if (s.max_rate >= 0) {
      e["max_rate_req_s"] = s.max_rate;
      e["max_rate_flat"] = s.max_rate_flat;
    }
    e["memory"] = {{"weights_gb", s.weights_gb}, {"static_gb", s.static_gb}, {"kv_capacity_tokens", s.kv_capacity_tokens}};
    if (s.gpu_hour_usd > 0) e["cost"] = {{"gpu_hour_usd", s.gpu_hour_usd}, {"usd_per_mtok", usd_per_mtok(s)}};
    if (s.energy.modelled) e["energy"] = energy_json(s.energy, output_tokens(s));
    e["frontier"] = static_cast<bool>(front[i]);
    json coll = json::object(), links = json::object();
    for (std::size_t k = 0; k < 4; ++k) coll[kCollNames[k]] = t.collective[k];
    for (std::size_t k = 0; k < kNumLinkClasses; ++k)
      if (s.breakdown.link_bytes[k] > 0)
        links[to_string(static_cast<LinkClass>(k))] = {{"bytes_per_token", t.link_bytes[k]}, {"busiest_link_busy", t.link_busy[k]}};
    e["gpu_ms_per_token"] = {{"total", t.total}, {"compute", t.compute}, {"communication", t.communication},
                             {"waiting", t.waiting}, {"host", t.host}, {"idle", t.idle}, {"collectives", coll}};
    e["links"] = links;
    j["scenarios"].push_back(e);
  }
  return j;
}

std::string compare_gnuplot(const std::vector<ScenarioOutcome>& v, const CompareContext& ctx) {
  const std::vector<bool> front = pareto_frontier(v);
  // Scenarios that differ only in load are one configuration: its points are joined by a line,
  // as AIConfigurator joins a configuration's concurrency levels.
  std::map<std::string, std::vector<std::size_t>> configs;
  std::vector<std::string> order;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].feasible) continue;
    const Scenario& s = v[i].scenario;
    const std::string key = s.model + "\n" + s.cluster + "\n" + s.engine + "\n" + s.plan;
    if (configs[key].empty()) order.push_back(key);
    configs[key].push_back(i);
  }
  std::ostringstream points, frontier_points;
  for (std::size_t c = 0; c < order.size(); ++c) {
    auto& members = configs[order[c]];
    std::sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) { return tok_s_per_user(v[a]) < tok_s_per_user(v[b]); });
    for (std::size_t i : members)
      points << i + 1 << " " << tok_s_per_user(v[i]) << " " << tok_s_per_gpu(v[i]) << " " << c % 8 + 1 << " "
             << joules_per_token(v[i]) << "\n";
    points << "\n";  // a blank line ends the configuration's line
  }
  std::vector<std::pair<double, double>> frontier;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (front[i]) frontier.push_back({tok_s_per_user(v[i]), tok_s_per_gpu(v[i])});
  std::sort(frontier.begin(), frontier.end());
  for (const auto& [x, y] : frontier) frontier_points << x << " " << y << "\n";
  std::ostringstream o;
  o << "# The Pareto plot of a shardsim comparison (the numbers of compare.csv): run 'gnuplot compare.gp'.\n"
    << "set terminal pngcairo size 900,600 noenhanced\nset output 'compare.png'\n"
    << "set title " << gnuplot_quoted(ctx.title) << "\nset xlabel 'output tok/s per user (1000 / TPOT p50)'\n"
    << "set ylabel 'output tok/s per GPU'\nset grid\nset key top right\nset offsets graph 0.05, graph 0.15, graph 0.1, graph 0.05\n"
    << "$points << EOD\n" << points.str() << "EOD\n$frontier << EOD\n" << frontier_points.str() << "EOD\n"
    << "plot $frontier using 1:2 with linespoints lw 2 dt 2 pt 6 ps 2.6 lc rgb '#d62728' title 'Pareto frontier', \\\n"
    << "     $points using 2:3:4 with linespoints lw 1.5 pt 7 ps 1.4 lc variable title 'scenario (#n = table row; a line joins one configuration''s loads)', \\\n"
    << "     $points using 2:3:(sprintf('#%d', $1) . ($5 > 0 ? sprintf(' %.3g J/tok', $5) : '')) with labels offset 1.4,0.7 notitle\n";
  return o.str();
}

}  // namespace shardsim
