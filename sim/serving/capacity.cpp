// sim/serving/capacity.cpp — backlog runs extended until their window converges; the SLO capacity search.
#include "sim/serving/capacity.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <random>

#include "common/readable_number.hpp"
#include "sim/serving/step_costs.hpp"

namespace shardsim {

RequestTrace capacity_sample(const RequestTrace& population, long n, std::uint64_t seed, bool trace_order_first) {
  RequestTrace out;
  out.source = population.source;
  out.prefix_block_tokens = population.prefix_block_tokens;
  const std::size_t size = population.requests.size();
  if (size == 0 || n <= 0) return out;
  out.requests.reserve(static_cast<std::size_t>(n));
  std::vector<std::size_t> order(size);
  for (std::uint64_t pass = 0; static_cast<long>(out.requests.size()) < n; ++pass) {
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (pass > 0 || !trace_order_first) {
      std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + pass + 1);
      for (std::size_t i = size - 1; i > 0; --i) {  // Fisher–Yates, our own draws (portable)
        const std::size_t j = static_cast<std::size_t>(rng() % (i + 1));
        std::swap(order[i], order[j]);
      }
    }
    for (std::size_t k = 0; k < size && static_cast<long>(out.requests.size()) < n; ++k) {
      Request r = population.requests[order[k]];
      r.arrival_s = 0;
      out.requests.push_back(r);
    }
  }
  return out;
}

namespace {

// Replica 0's share of `t`: every k-th request, as open-loop round-robin deals them (k ≤ 1: all).
RequestTrace share_of(RequestTrace t, int k) {
  if (k <= 1) return t;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < t.requests.size(); i += static_cast<std::size_t>(k)) t.requests[kept++] = t.requests[i];
  t.requests.resize(kept);
  return t;
}

// A share run's rates made the plan's (its counts and percentiles stay the simulated replica's).
void scale_rates(Metrics& m, int k) {
  if (k <= 1) return;
  for (double* x : {&m.throughput_tok_s, &m.output_tok_s, &m.output_tok_s_per_gpu, &m.steady_output_tok_s,
                    &m.steady_output_tok_s_per_gpu, &m.request_s, &m.goodput_req_s})
    *x *= k;
}

// Two-sided 95% Student t quantile for `dof` degrees of freedom (dof ≥ 1).
double t95(int dof) {
  static const double table[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                 2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086};
  if (dof <= 0) return 1e9;
  if (dof <= 20) return table[dof - 1];
  return 1.96 + 2.4 / dof;
}

// The window's batch-means interval: the half-width of the 95% interval of the mean rate,
// relative to it (infinity when the window is empty).
double batch_halfwidth(const ServingResult& r, int batches) {
  const double a = r.steady.start, b = r.steady.end;
  if (!(b > a) || batches < 2) return INFINITY;
  std::vector<double> tokens(static_cast<std::size_t>(batches), 0.0);
  const double span = (b - a) / batches;
  for (const auto& [t, n] : r.emissions) {
    if (!(t > a && t <= b)) continue;
    const int k = std::min(batches - 1, static_cast<int>((t - a) / span));
    tokens[static_cast<std::size_t>(k)] += n;
  }
  double mean = 0;
  for (double x : tokens) mean += x;
  mean /= batches;
  if (!(mean > 0)) return INFINITY;
  double var = 0;
  for (double x : tokens) var += (x - mean) * (x - mean);
  var /= (batches - 1);
  return t95(batches - 1) * std::sqrt(var / batches) / mean;
}

}  // namespace

std::string SaturatedThroughput::describe() const {
  if (!feasible) return "infeasible: " + note;
  char buf[400];
  const std::string who = replicas > 1 ? " (replica 0 of " + std::to_string(replicas) + " alike simulated, with its share)" : "";
  std::snprintf(buf, sizeof buf, "%s output tok/s, %s req/s (%s: 95%% interval ±%.1f%%, %.1f batch turnovers in %.3g–%.3g s, %s requests%s, %d run%s)",
                readable(output_tok_s).c_str(), readable(request_s, 3).c_str(), converged ? "converged" : "NOT converged",
                100 * std::min(rel_halfwidth, 9.99), turnovers, window_start, window_end, readable(static_cast<double>(requests)).c_str(),
                who.c_str(), runs, runs == 1 ? "" : "s");
  return buf;
}

namespace {

// What a backlog series must reach before it stops: the window's turnovers only (a bound for the
// SLO search, whose probes decide the figure), or the turnovers and the interval (the figure).
enum class BacklogRule { Turnovers, Converged };

// Whether the last run of `s` meets `rule`: its window holds min_turnovers turnovers and, to
// converge, its batch-means interval is within ±rel_halfwidth.
bool meets(const SaturatedThroughput& s, const CapacityOptions& opt, BacklogRule rule) {
  const bool turned = s.window_end > s.window_start && s.turnovers >= opt.min_turnovers;
  return rule == BacklogRule::Turnovers ? turned : turned && s.rel_halfwidth <= opt.rel_halfwidth;
}

// The sample after the last run of `s`, from what that run lacked under `rule`: the window's
// turnovers grow about as the requests, the interval's half-width as one over their square root.
// A series that needs only the turnovers grows by what they lack (at least a quarter more); one
// that needs the interval too at least doubles. At most ×16, and never beyond the limit.
long next_sample(const SaturatedThroughput& s, const CapacityOptions& opt, BacklogRule rule) {
  const bool window = s.window_end > s.window_start && s.turnovers > 0;
  double grow = 4;
  if (window) {
    grow = std::max(1.25 * opt.min_turnovers / s.turnovers, 1.0);
    if (rule == BacklogRule::Converged && std::isfinite(s.rel_halfwidth))
      grow = std::max(grow, 1.25 * std::pow(s.rel_halfwidth / opt.rel_halfwidth, 2));
  }
  grow = std::clamp(grow, rule == BacklogRule::Converged || !window ? 2.0 : 1.25, 16.0);
  return std::min(opt.max_requests, static_cast<long>(std::ceil(grow * static_cast<double>(s.requests))));
}

// Runs backlogs on from `s` (a fresh `s` starts at the whole trace; one that ran goes on from its
// last run, by next_sample) until `rule` holds, the limit is reached or a run is infeasible. Each
// run replaces the figure; the costs add up.
void run_backlogs(SaturatedThroughput& s, const CapacityServe& serve, const RequestTrace& population,
                  const ServingOptions& base, const CapacityOptions& opt, BacklogRule rule) {
  ServingOptions so = base;
  if (!so.step_cache) so.step_cache = std::make_shared<StepCache>();  // every run of this plan shares its steps
  so.offline = true;
  so.concurrency = 0;
  so.timeline_steps = 0;
  so.stop_at_last_admission = true;  // the window ends there; the drain after it would only cost steps
  const int k = std::max(1, opt.replicas);
  so.replica_share = k > 1;
  s.replicas = k;
  if (s.runs > 0 && (!s.feasible || meets(s, opt, rule) || s.requests >= opt.max_requests)) return;
  // At least the whole trace (up to the limit): a start that does not depend on --requests.
  long n = s.runs > 0 ? next_sample(s, opt, rule)
                      : std::min(opt.max_requests, std::max({opt.start_requests, static_cast<long>(population.requests.size()), 16L}));
  for (;;) {
    const RequestTrace sample = share_of(capacity_sample(population, n, opt.seed, false), k);
    Metrics m;
    const ServingResult r = serve(sample, so, m);
    scale_rates(m, k);
    ++s.runs;
    s.simulated_requests += static_cast<long>(sample.requests.size());
    s.executed_steps += r.breakdown.executed_steps;
    s.requests = n;
    s.metrics = m;
    if (r.rejected_any || (m.completed < m.requests && !r.drain_skipped)) {
      s.feasible = false;
      s.converged = false;
      s.note = r.note.empty() ? "not every request completed" : r.note;
      return;
    }
    s.feasible = true;
    const SteadyWindow& w = r.steady;
    s.window_start = w.start;
    s.window_end = w.end;
    s.turnovers = w.turnover > 0 ? static_cast<double>(w.completions) / static_cast<double>(w.turnover) : 0;
    s.rel_halfwidth = batch_halfwidth(r, opt.batches);
    if (w.seconds() > 0) {
      s.output_tok_s = k * static_cast<double>(w.tokens) / w.seconds();
      s.request_s = k * static_cast<double>(w.completions) / w.seconds();
      double prompt = 0;
      for (const auto& q : r.requests)
        if (q.completed && q.first_token > w.start && q.first_token <= w.end) prompt += q.prompt_tokens;
      s.total_tok_s = s.output_tok_s + k * prompt / w.seconds();
    } else {  // no window at all: the whole run's rates, never trusted
      s.output_tok_s = m.output_tok_s;
      s.request_s = m.request_s;
      s.total_tok_s = m.throughput_tok_s;
    }
    if (s.turnover_requests == 0 && meets(s, opt, BacklogRule::Turnovers)) s.turnover_requests = n;
    s.converged = meets(s, opt, BacklogRule::Converged);
    if (meets(s, opt, rule)) {
      s.note = s.converged ? "" : "a bound only: " + std::to_string(static_cast<int>(opt.min_turnovers)) +
                                      " turnovers, its interval not narrowed (the SLO search needs no more)";
      return;
    }
    if (n >= opt.max_requests) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "not converged at %ld requests (the limit): %.1f turnovers, ±%.1f%% (needs %g and ±%g%%)", n,
                    s.turnovers, 100 * std::min(s.rel_halfwidth, 9.99), opt.min_turnovers, 100 * opt.rel_halfwidth);
      s.note = buf;
      return;
    }
    n = next_sample(s, opt, rule);
  }
}

}  // namespace

SaturatedThroughput saturated_throughput(const CapacityServe& serve, const RequestTrace& population,
                                         const ServingOptions& base, const CapacityOptions& opt) {
  SaturatedThroughput s;
  run_backlogs(s, serve, population, base, opt, BacklogRule::Converged);
  return s;
}

void SloCapacity::measure_flatness() {
  elasticity = NAN;
  flat_from = 0;
  load_at_rate = NAN;
  auto usable = [](const Probe& p) { return p.met && std::isfinite(p.load) && p.load > 0; };
  const Probe* top = nullptr;
  const Probe* below = nullptr;
  for (const auto& p : probe_log)
    if (usable(p) && (top == nullptr || p.rate > top->rate)) top = &p;
  if (top == nullptr || top->rate != rate) return;  // the figure is not a probed rate (a narrowed saturated one)
  load_at_rate = top->load;
  for (const auto& p : probe_log)
    if (usable(p) && p.rate < top->rate * (1 - 1e-9) && (below == nullptr || p.rate > below->rate)) below = &p;
  if (below == nullptr) return;
  elasticity = std::log(top->load / below->load) / std::log(top->rate / below->rate);
  flat_from = below->rate;
}

long SloCapacity::verdict_requests() const {
  long n = probe_requests;
  for (const auto& p : probe_log)
    if (p.met && p.rate == rate) n = p.requests;
  return n;
}

int SloCapacity::stopped_probes() const {
  return static_cast<int>(std::count_if(probe_log.begin(), probe_log.end(), [](const Probe& p) { return p.stopped; }));
}

std::string SloCapacity::describe() const {
  if (!saturated.feasible) return "infeasible: " + saturated.note;
  if (!feasible) return "none: " + note;
  const std::string bound = at_saturation     ? " — the saturated rate itself meets the goal"
                            : min_failing > 0 ? ", " + readable(min_failing, 3) + " req/s misses it"
                                              : "";
  const std::string stopped =
      stopped_probes() > 0 ? " (" + std::to_string(stopped_probes()) + " stopped as soon as their misses decided they fail)" : "";
  const std::string flat_note = flatness();
  const std::string thin = flat_note.empty() ? "" : "; " + flat_note;
  return readable(rate, 3) + " req/s (" + readable(output_tok_s) + " output tok/s)" + bound + "; " + std::to_string(runs()) +
         " runs" + stopped + thin;
}

std::string SloCapacity::flatness() const {
  if (!flat()) return "";
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "flat near it: the goal's binding percentile, at %.0f%% of its bound, moves only %+.1f%% from %s to %s req/s "
                "(elasticity %.2f), so another arrival draw may move this capacity by more than the search's tolerance",
                100 * load_at_rate, 100 * (std::pow(rate / flat_from, elasticity) - 1), readable(flat_from, 3).c_str(),
                readable(rate, 3).c_str(), elasticity);
  return buf;
}

namespace {
// The fractions of the saturated rate probed, in turn, after it failed, until one meets the goal.
// Plans meet a latency goal close below their saturated rate more often than far below it
// (0.86-0.94 of it on the four plans docs/optimizers.md lists), and a probe that fails stops
// early (stop_early) while one that passes runs whole: so the first rung is high.
constexpr double kLadder[] = {0.9, 0.7, 0.5, 0.125, 1.0 / 32};
}  // namespace

SloCapacity capacity_under_slo(const CapacityServe& serve, const RequestTrace& population, const ServingOptions& base,
                               const SloGoal& goal, const CapacityOptions& opt) {
  SloCapacity c;
  ServingOptions shared = base;  // the backlog runs and the probes share one step cache: one plan, one tier
  if (!shared.step_cache) shared.step_cache = std::make_shared<StepCache>();
  // The bound: backlog runs until their window holds min_turnovers turnovers (its interval is
  // narrowed only if the bound itself turns out to be the capacity, or the caller wants the figure).
  run_backlogs(c.saturated, serve, population, shared, opt, BacklogRule::Turnovers);
  if (!c.saturated.feasible) {
    c.note = c.saturated.note;
    return c;
  }
  const double mu = c.bound = c.saturated.request_s;
  if (!(mu > 0)) {
    c.note = "no completions in the saturated run";
    return c;
  }
  // Every probe replays the whole trace (what the trace's own replay is judged on), and a probe
  // that meets the goal must also have turned its own batch over `min_turnovers` times — its
  // completions over the mean number of sequences it held, less the batch that fills and the one
  // that drains, as a backlog's window counts them —, since a queue near the capacity
  // builds over turnovers: a passing probe that lacks them is replayed longer at the same rate
  // (by what it lacks, a quarter more), and that verdict counts. At the SLO's rates a plan holds
  // far fewer sequences than its saturated batch, so the whole Azure trace is rarely extended; a
  // short trace against a large batch is.
  const long trace_n = std::min(opt.max_requests, std::max(16L, static_cast<long>(population.requests.size())));
  std::map<long, RequestTrace> samples;  // by length: the trace in its order first, then shuffled passes
  auto sample_of = [&](long n) -> const RequestTrace& {
    auto it = samples.find(n);
    if (it == samples.end()) it = samples.emplace(n, capacity_sample(population, n, opt.seed, true)).first;
    return it->second;
  };
  c.probe_requests = trace_n;
  const RequestTrace& sample = sample_of(trace_n);
  double mean_output = 0;
  for (const auto& q : sample.requests) mean_output += std::max(1, q.output_tokens);
  mean_output /= std::max<std::size_t>(1, sample.requests.size());
  ServingOptions so = shared;
  so.offline = false;
  so.concurrency = 0;
  so.timeline_steps = 0;
  const int k = std::max(1, opt.replicas);
  so.replica_share = k > 1;
  // Judged on all its requests and on those of the second half of its arrivals (a queue that
  // grows shows there); a rejected or unfinished request fails the probe. A probe stops as soon
  // as its misses decide that it fails (ServingOptions::slo_stop): the same verdict, sooner.
  // A probe longer than the trace (the backlog needed more requests for its turnovers) replays the
  // trace in its own order first, then shuffled passes of it: the trace's first pass must meet the
  // goal too, on its own — as the trace's replay is judged, its bursts undiluted by the stationary
  // passes after it (which only add load to its tail).
  const std::size_t first_n = (population.requests.size() + static_cast<std::size_t>(k) - 1) / static_cast<std::size_t>(k);  // of the share
  auto probe_n = [&](double rate, long n, Metrics& judged, double& turnovers) {
    const RequestTrace t = share_of(at_rate(sample_of(n), rate, opt.arrivals, opt.seed), k);
    const double half = t.requests[t.requests.size() / 2].arrival_s;
    const double first_end = first_n < t.requests.size() ? t.requests[first_n].arrival_s : INFINITY;
    ServingOptions po = so;
    if (opt.stop_early) po.slo_stop = goal.stop_when_missed(t.requests, half, so);
    Metrics whole;
    ServingResult r = serve(t, po, whole);
    scale_rates(whole, k);
    long admitted = 0;
    for (const auto& q : r.requests) admitted += q.admitted >= 0 ? 1 : 0;  // a stopped probe: up to its stop
    c.simulated_requests += admitted;
    c.executed_steps += r.breakdown.executed_steps;
    c.probe_log.push_back({rate, false, r.stopped_early, whole.completed, NAN, admitted, r.breakdown.executed_steps, false, n});
    if (r.stopped_early) return false;
    if (r.rejected_any || whole.completed < whole.requests) return false;
    // The metrics of the requests whose arrival passes `keep`, as the plan's.
    auto part = [&](auto keep) {
      ServingResult sub;
      sub.makespan = r.makespan;
      for (const auto& q : r.requests)
        if (keep(q.arrival)) sub.requests.push_back(q);
      Metrics m = summarize(sub, so, 1);
      scale_rates(m, k);
      return m;
    };
    judged = part([half](double a) { return a >= half; });
    bool met = goal.met(judged) && goal.met(whole);
    double load = std::max(goal.load(judged), goal.load(whole));
    if (std::isfinite(first_end)) {
      const Metrics first = part([first_end](double a) { return a < first_end; });
      met = met && goal.met(first);
      load = std::max(load, goal.load(first));
    }
    c.probe_log.back().met = met;
    if (met) c.probe_log.back().load = load;
    // Its own batch's turnovers, as a backlog's window counts them: completions over the mean batch
    // (Little's law: the sequence-seconds held ÷ the span they were served in), less the batch that
    // fills and the one that drains.
    double held = 0, from = INFINITY, to = 0, done = 0;
    for (const auto& q : r.requests) {
      if (q.admitted < 0 || !q.completed) continue;
      done += 1;
      held += q.finish - q.admitted;
      from = std::min(from, q.admitted);
      to = std::max(to, q.finish);
    }
    turnovers = held > 0 ? done * (to - from) / held - 2 : INFINITY;
    return met;
  };
  auto probe = [&](double rate, Metrics& judged) {
    for (long n = trace_n;;) {
      double turnovers = 0;
      if (!probe_n(rate, n, judged, turnovers)) return false;
      if (turnovers >= opt.min_turnovers || n >= opt.max_requests) return true;
      c.probe_log.back().extended = true;  // re-judged on the longer probe that follows
      c.probe_log.back().met = false;
      n = std::min(opt.max_requests, static_cast<long>(std::ceil(static_cast<double>(n) * 1.25 * (opt.min_turnovers + 2) /
                                                                 std::max(turnovers + 2, 1e-3))));
      c.probe_requests = std::max(c.probe_requests, n);
    }
  };
  // Geometric bisection between the highest rate met and the lowest missed, to rel_tol.
  auto bisect = [&] {
    while (c.min_failing > c.rate * (1 + opt.rel_tol)) {
      const double mid = std::sqrt(c.rate * c.min_failing);
      Metrics x;
      if (probe(mid, x)) {
        c.rate = mid;
        c.at_rate = x;
      } else {
        c.min_failing = mid;
      }
    }
  };
  // The figure, with the saturated measure narrowed as the caller asked (the note says which),
  // and how steeply the goal tightens between the two highest rates that met it.
  auto done = [&] {
    c.output_tok_s = c.rate * mean_output;
    c.measure_flatness();
    if (opt.converge_saturated) run_backlogs(c.saturated, serve, population, shared, opt, BacklogRule::Converged);
  };
  Metrics m;
  if (probe(mu, m)) {
    c.feasible = true;
    c.at_saturation = true;
    c.rate = mu;
    c.at_rate = m;
    // The bound met the goal, so it is the figure: narrowed until it converges and never exceeded
    // (below the bound: the converged rate, judged by the bound's probe); a converged rate above
    // the bound is probed, and bisected to if it misses.
    run_backlogs(c.saturated, serve, population, shared, opt, BacklogRule::Converged);
    const double precise = c.saturated.request_s;
    Metrics x;
    if (precise <= mu) {
      c.rate = precise;
    } else if (probe(precise, x)) {
      c.rate = precise;
      c.at_rate = x;
    } else {
      c.at_saturation = false;
      c.min_failing = precise;
      bisect();
    }
    done();
    return c;
  }
  c.min_failing = mu;
  for (double f : kLadder) {
    Metrics x;
    if (probe(f * mu, x)) {
      c.feasible = true;
      c.rate = f * mu;
      c.at_rate = x;
      break;
    }
    c.min_failing = f * mu;
  }
  if (!c.feasible) {
    c.note = "even " + readable(c.min_failing, 3) + " req/s misses " + goal.describe();
  } else {
    bisect();
  }
  done();
  return c;
}

}  // namespace shardsim
