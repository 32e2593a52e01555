// sim/simgrid/fidelity.cpp — tiers, the SimGrid runners and the worker-side handler (see fidelity.hpp).
#include "sim/simgrid/fidelity.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <map>
#include <unordered_map>
#include <thread>

#include "sim/step/analytic_executor.hpp"
#include "sim/step/lowering.hpp"
#include "sim/step/schedule_summary.hpp"
#include "sim/plan/plan_layout.hpp"
#include "sim/simgrid/simgrid_executor.hpp"
#include "sim/serving/disaggregated.hpp"
#include "sim/serving/step_costs.hpp"
#include "sim/simgrid/wire.hpp"
#include "common/worker_pool.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

namespace shardsim {

namespace {

std::string encode_request(const std::string& spec, const StepProgram& p) {
  WireWriter w;
  w.header("SGRQ", 1);
  w.string(spec);
  w.string(encode(p));
  return w.take();
}

SimgridStepResult decode_reply(std::string_view bytes) {
  WireReader r(bytes);
  r.header("SGRP", 3);
  SimgridStepResult out;
  out.ok = true;
  out.timing = decode_timing(r.string());
  for (int k = 0; k < 5; ++k) {
    out.simgrid_seconds[static_cast<std::size_t>(k)] = r.f64();
    out.analytic_seconds[static_cast<std::size_t>(k)] = r.f64();
  }
  out.most_loaded_class = r.i32();
  out.analytic_makespan = r.f64();
  out.op_end = r.doubles();
  const std::int32_t links = r.i32();
  if (links < 0) throw std::runtime_error("SimGrid reply: a negative link count");
  out.links.resize(static_cast<std::size_t>(links));
  for (auto& l : out.links) {
    l.dlink = r.i32();
    l.bytes = r.f64();
    l.busy_seconds = r.f64();
  }
  r.finish();
  return out;
}

class InProcessRunner final : public SimgridRunner {
 public:
  std::vector<SimgridStepResult> run(const std::string& spec, const std::vector<StepProgram>& programs) override {
    std::vector<SimgridStepResult> out;
    for (const auto& p : programs) {
      try {
        out.push_back(decode_reply(simgrid_worker_handler(encode_request(spec, p))));
      } catch (const std::exception& e) {
        SimgridStepResult f;
        f.error = e.what();
        out.push_back(f);
      }
    }
    return out;
  }
};

class PoolRunner final : public SimgridRunner {
 public:
  explicit PoolRunner(WorkerPool& pool) : pool_(pool) {}
  std::vector<SimgridStepResult> run(const std::string& spec, const std::vector<StepProgram>& programs) override {
    std::vector<SimgridStepResult> out(programs.size());
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      for (std::size_t i = next++; i < programs.size(); i = next++) {
        CallResult c = pool_.call(encode_request(spec, programs[i]));
        if (!c.ok()) {
          out[i].error = std::string(to_string(c.status)) + ": " + c.error;
          continue;
        }
        try {
          out[i] = decode_reply(c.reply);
        } catch (const std::exception& e) {
          out[i].error = e.what();
        }
      }
    };
    int threads = std::max(1, std::min<int>(pool_.size(), static_cast<int>(programs.size())));
    std::vector<std::thread> ts;
    for (int t = 1; t < threads; ++t) ts.emplace_back(work);
    work();
    for (auto& t : ts) t.join();
    return out;
  }
  std::uint64_t restarts() const override { return pool_.restarts(); }

 private:
  WorkerPool& pool_;
};

// A timing stretched to r times its makespan. SimGrid and the analytic executor price compute
// alike and differ in how flows share links, so the difference is charged to communication (its
// critical-path classes, busy time and collectives); a step with no communication on its critical
// path, or one SimGrid finishes sooner than its communication allows, is scaled as a whole.
StepTiming scaled(StepTiming t, double r) {
  const double extra = (r - 1) * t.makespan;
  double comm = 0;
  for (int i = 0; i < kNumOpClasses; ++i)
    if (is_comm_class(static_cast<OpClass>(i))) comm += t.critical[static_cast<std::size_t>(i)];
  t.makespan *= r;
  for (double& x : t.stage_time) x *= r;
  if (comm > 0 && comm + extra >= 0) {
    const double c = (comm + extra) / comm;
    for (int i = 0; i < kNumOpClasses; ++i) {
      if (!is_comm_class(static_cast<OpClass>(i))) continue;
      t.critical[static_cast<std::size_t>(i)] *= c;
      t.busy[static_cast<std::size_t>(i)] *= c;
    }
    for (double& x : t.coll_by_kind) x *= c;
    t.comm_busy *= c;
    t.comm_exposed = std::clamp(t.comm_exposed + extra, 0.0, t.comm_busy);
    return t;
  }
  for (double& x : t.critical) x *= r;
  for (double& x : t.busy) x *= r;
  for (double& x : t.coll_by_kind) x *= r;
  t.comm_busy *= r;
  t.comm_exposed *= r;
  t.expert_time *= r;
  t.expert_imbalance *= r;
  return t;
}

// The sample nearest a step by analytic step time (log distance); −1 when there is none.
long nearest_sample(const std::vector<std::pair<double, double>>& samples, double makespan) {
  if (samples.empty() || makespan <= 0) return -1;
  long best = -1;
  double dist = 1e300;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const double d = std::abs(std::log(makespan / samples[i].first));
    if (d < dist) {
      dist = d;
      best = static_cast<long>(i);
    }
  }
  return best;
}

// Runs every step in SimGrid through the runner (the `full` tier).
class RemoteExecutor final : public StepExecutor {
 public:
  RemoteExecutor(SimgridRunner& runner, std::string spec, const AnalyticExecutor& fallback, FidelityReport& report,
                 std::vector<SimgridStepResult>& results)
      : runner_(runner), spec_(std::move(spec)), fallback_(fallback), report_(report), results_(results) {}
  const char* name() const override { return "simgrid"; }
  StepTiming run(const StepProgram& p, std::vector<TimelineEvent>* timeline) const override {
    auto res = runner_.run(spec_, {p});
    report_.sampled_steps++;
    progress();
    if (!res[0].ok) {
      report_.failed++;
      if (report_.errors.size() < 5) report_.errors.push_back(res[0].error);
      return fallback_.run(p, timeline);
    }
    if (timeline) fallback_.run(p, timeline);  // the timeline shows the contention-free schedule
    results_.push_back(res[0]);
    return res[0].timing;
  }
  const AnalyticExecutor& compute_pricer() const override { return fallback_; }

 private:
  // Every step runs in SimGrid here, which can take minutes: say how far it got every 10 s.
  void progress() const {
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(10)) return;
    last_ = now;
    std::fprintf(stderr, "full fidelity: %ld steps simulated in SimGrid so far (%.0f s)\n", report_.sampled_steps,
                 std::chrono::duration<double>(now - start_).count());
  }

  SimgridRunner& runner_;
  std::string spec_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  mutable std::chrono::steady_clock::time_point last_ = start_;
  const AnalyticExecutor& fallback_;
  FidelityReport& report_;
  std::vector<SimgridStepResult>& results_;
};

// Per stage: the first dense layer and the first and middle MoE layers.
std::vector<int> representative_layers(const Plan& plan, const ModelSpec& m) {
  std::vector<int> out;
  for (const auto& r : stage_layers(m.layers, plan.deg.pp)) {
    std::vector<int> moe;
    bool dense_done = false;
    for (int l = r.first; l < r.last; ++l) {
      if (m.is_moe_layer(l)) moe.push_back(l);
      else if (!dense_done) {
        out.push_back(l);
        dense_done = true;
      }
    }
    if (!moe.empty()) {
      out.push_back(moe.front());
      if (moe.size() > 2) out.push_back(moe[moe.size() / 2]);
    }
  }
  return out;
}

// Adds one SimGrid step's per-link loads to `links` (by dlink) and its makespan to `seconds`.
void add_links(const SimgridStepResult& r, std::map<int, FidelityReport::LinkLoad>& links, double& seconds) {
  const double makespan = r.timing.makespan;
  seconds += makespan;
  for (const auto& l : r.links) {
    FidelityReport::LinkLoad& m = links[l.dlink];
    m.dlink = l.dlink;
    m.bytes += l.bytes;
    m.busy_seconds += l.busy_seconds;
    m.peak = std::max(m.peak, makespan > 0 ? l.busy_seconds / makespan : 0.0);
    ++m.steps;
  }
}

void aggregate(const std::vector<SimgridStepResult>& results, FidelityReport& rep) {
  std::array<double, 5> sg{}, an{};
  std::map<int, int> classes;
  std::map<int, FidelityReport::LinkLoad> links;
  for (const auto& r : results) {
    if (!r.ok) continue;
    for (std::size_t k = 0; k < 5; ++k) {
      sg[k] += r.simgrid_seconds[k];
      an[k] += r.analytic_seconds[k];
      rep.ops[k] += r.analytic_seconds[k] > 0 ? 1 : 0;
    }
    if (r.most_loaded_class >= 0) classes[r.most_loaded_class]++;
    add_links(r, links, rep.simgrid_seconds);
  }
  rep.links.clear();
  for (const auto& [d, l] : links) rep.links.push_back(l);
  for (std::size_t k = 0; k < 5; ++k) rep.slowdown[k] = an[k] > 0 ? sg[k] / an[k] : 1.0;
  int best = 0;
  for (auto [c, n] : classes)
    if (n > best) {
      best = n;
      rep.most_loaded_class = c;
    }
}

// Each pool at `tier`; the KV transfers in SimGrid unless the tier is analytic. The report is the
// decode pool's, with both pools' sampled steps, failures and restarts counted.
ServingResult serve_disaggregated_at_fidelity(Tier tier, const Plan& plan, const ModelSpec& model,
                                              const Cluster& cluster, const std::string& cluster_spec,
                                              const RequestTrace& trace, const RoutingSource* routing,
                                              const ServingOptions& options, SimgridRunner* runner, FidelityReport& report,
                                              int samples) {
  FidelityReport pools[2];
  int next = 0;
  auto pool = [&](const Plan& p, const RequestTrace& t, const ServingOptions& o) {
    FidelityReport& rep = pools[std::min(next++, 1)];
    return serve_at_fidelity(tier, p, model, cluster, cluster_spec, t, routing, o, runner, rep, samples);
  };
  const TransferTimer analytic = analytic_transfer_timer(cluster);
  const bool simgrid = tier != Tier::Analytic && runner != nullptr;
  TransferTimer timer = analytic;
  FidelityReport own;  // the transfers' SimGrid run
  if (simgrid)
    timer = [&](const StepProgram& p) {
      if (p.ops.empty()) return std::vector<double>{};
      std::vector<SimgridStepResult> res = runner->run(cluster_spec, {p});
      own.sampled_steps++;
      if (res[0].ok && res[0].op_end.size() == p.ops.size()) return res[0].op_end;
      own.failed++;
      own.errors.push_back("KV transfers: " + (res[0].ok ? std::string("no operation end times") : res[0].error));
      return analytic(p);
    };
  ServingResult r = serve_disaggregated(plan, model, cluster, trace, options, pool, timer);
  report = pools[1];
  report.tier = tier;
  report.sampled_steps += pools[0].sampled_steps + own.sampled_steps;
  report.failed += pools[0].failed + own.failed;
  report.worker_restarts += pools[0].worker_restarts;
  for (const auto& e : own.errors) report.errors.push_back(e);
  for (const auto& e : pools[0].errors) report.errors.push_back("prefill pool: " + e);
  if (simgrid && own.failed == 0) r.disagg.transfer_tier = "simgrid";
  return r;
}

}  // namespace

void RunWeightedSlowdown::add(std::size_t sample, const std::array<double, 4>& coll_by_kind, double repeats) {
  const auto& s = slowdowns_.at(sample);
  for (std::size_t k = 0; k < 5; ++k) {
    const double t = repeats * coll_by_kind[std::min<std::size_t>(k, 3)];  // sends: the all-to-all slot
    analytic_[k] += t;
    stretched_[k] += t * s[k];
  }
}

double RunWeightedSlowdown::slowdown(std::size_t k, double fallback) const {
  return analytic_.at(k) > 0 ? stretched_[k] / analytic_[k] : fallback;
}

std::unique_ptr<SimgridRunner> make_in_process_runner() { return std::make_unique<InProcessRunner>(); }
std::unique_ptr<SimgridRunner> make_pool_runner(WorkerPool& pool) { return std::make_unique<PoolRunner>(pool); }

std::string simgrid_worker_handler(std::string_view request) {
  // Per-process state: the clusters and executors seen so far (one SimGrid Engine underneath).
  static std::map<std::string, std::unique_ptr<Cluster>> clusters;
  static std::map<std::string, std::unique_ptr<SimgridExecutor>> executors;
  WireReader r(request);
  r.header("SGRQ", 1);
  std::string spec = r.string();
  StepProgram program = decode_program(r.string());
  r.finish();
  auto& cl = clusters[spec];
  if (!cl) cl.reset(new Cluster(load_cluster(spec)));
  auto& ex = executors[spec];
  if (!ex) ex = std::make_unique<SimgridExecutor>(*cl);
  StepTiming t = ex->run(program);
  const ContentionReport& c = ex->last_contention();
  WireWriter w;
  w.header("SGRP", 3);
  w.string(encode(t));
  for (std::size_t k = 0; k < 5; ++k) {
    w.f64(c.simgrid_seconds[k]);
    w.f64(c.analytic_seconds[k]);
  }
  w.i32(c.most_loaded_class);
  w.f64(c.analytic_makespan);
  w.doubles(ex->last_op_ends());
  w.i32(static_cast<std::int32_t>(c.links.size()));
  for (const auto& l : c.links) {
    w.i32(l.dlink);
    w.f64(l.bytes);
    w.f64(l.busy_seconds);
  }
  return w.take();
}

ServingResult serve_at_fidelity(Tier tier, const Plan& plan, const ModelSpec& model,
                                const Cluster& cluster, const std::string& cluster_spec, const RequestTrace& trace,
                                const RoutingSource* routing, const ServingOptions& options, SimgridRunner* runner,
                                FidelityReport& report, int samples) {
  report = FidelityReport{};
  report.tier = tier;
  if (plan.disaggregated())
    return serve_disaggregated_at_fidelity(tier, plan, model, cluster, cluster_spec, trace, routing, options, runner, report, samples);
  AnalyticExecutor analytic(cluster);
  if (tier == Tier::Analytic || runner == nullptr) return serve(plan, model, cluster, trace, routing, analytic, options);
  class CountRestarts {  // on every way out
   public:
    CountRestarts(SimgridRunner& runner, FidelityReport& report) : runner_(runner), report_(report), before_(runner.restarts()) {}
    ~CountRestarts() { report_.worker_restarts = static_cast<long>(runner_.restarts() - before_); }

   private:
    SimgridRunner& runner_;
    FidelityReport& report_;
    std::uint64_t before_;
  } count_restarts(*runner, report);

  if (tier == Tier::Full) {
    std::vector<SimgridStepResult> results;
    RemoteExecutor remote(*runner, cluster_spec, analytic, report, results);
    ServingOptions o = options;
    o.set_exact();  // every step whole in SimGrid (SimGrid programs are never folded)
    ServingResult r = serve(plan, model, cluster, trace, routing, remote, o);
    aggregate(results, report);
    std::vector<double> ratios;
    for (const auto& x : results)
      if (x.analytic_makespan > 0) ratios.push_back(x.timing.makespan / x.analytic_makespan);
    std::sort(ratios.begin(), ratios.end());
    if (!ratios.empty()) {
      report.ratio_min = ratios.front();
      report.ratio_median = ratios[ratios.size() / 2];
      report.ratio_max = ratios.back();
    }
    return r;
  }

  // simgrid: pass 1 records the executed steps.
  struct Rec {
    int replica;
    ReplicaBatch batch;
    double makespan;
  };
  std::vector<Rec> recs;
  ServingOptions o1 = options;
  o1.on_executed_step = [&](int replica, const ReplicaBatch& b, const StepTiming& t) {
    recs.push_back({replica, b, t.makespan});
  };
  o1.timeline_steps = 0;
  o1.slo_stop.reset();  // the analytic pass is not the run judged: it must see every step
  o1.step_cache = std::make_shared<StepCache>();  // pass 2 reuses pass 1's analytic steps
  const ServingResult first = serve(plan, model, cluster, trace, routing, analytic, o1);
  // Stratified sample: quantiles of analytic step time.
  std::vector<std::size_t> order(recs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return recs[a].makespan < recs[b].makespan; });
  std::vector<std::size_t> picked;
  int s = std::min<int>(samples, static_cast<int>(order.size()));
  for (int i = 0; i < s; ++i) {
    std::size_t idx = order[static_cast<std::size_t>((i + 0.5) * static_cast<double>(order.size()) / s)];
    if (picked.empty() || picked.back() != idx) picked.push_back(idx);
  }
  LoweringOptions lo;
  lo.only_layers = representative_layers(plan, model);
  std::vector<StepProgram> programs;
  std::vector<double> reduced_analytic;
  for (std::size_t idx : picked) {
    Lowering low(plan, model, cluster, routing, recs[idx].replica, lo);
    programs.push_back(low.lower(recs[idx].batch));
    reduced_analytic.push_back(analytic.run(programs.back()).makespan);
  }
  std::vector<SimgridStepResult> results = runner->run(cluster_spec, programs);
  std::vector<std::pair<double, double>> ratio_by_time;
  std::vector<std::array<double, 5>> slowdowns;  // per successful sample, per kind (RunWeightedSlowdown)
  std::vector<double> ratios;
  for (std::size_t i = 0; i < results.size(); ++i) {
    report.sampled_steps++;
    if (!results[i].ok) {
      report.failed++;
      if (report.errors.size() < 5) report.errors.push_back(results[i].error);
      continue;
    }
    double r = reduced_analytic[i] > 0 ? results[i].timing.makespan / reduced_analytic[i] : 1.0;
    ratio_by_time.push_back({recs[picked[i]].makespan, r});
    ratios.push_back(r);
    std::array<double, 5> s{};
    for (std::size_t k = 0; k < 5; ++k)
      s[k] = results[i].analytic_seconds[k] > 0 ? results[i].simgrid_seconds[k] / results[i].analytic_seconds[k] : 1.0;
    slowdowns.push_back(s);
  }
  aggregate(results, report);
  std::sort(ratios.begin(), ratios.end());
  if (!ratios.empty()) {
    report.ratio_min = ratios.front();
    report.ratio_median = ratios[ratios.size() / 2];
    report.ratio_max = ratios.back();
  }
  ServingOptions o2 = options;
  o2.step_cache = o1.step_cache;
  // Each step stretched by its nearest sample's ratio; the contention figure weighs each sample
  // by the steps it stretched — fast-forwarded ones replay a stretched timing, found again by
  // its makespan — rather than each sample alike.
  RunWeightedSlowdown weighted(slowdowns);
  std::unordered_map<double, std::pair<std::size_t, std::array<double, 4>>> stretched;  // stretched makespan → sample, analytic coll time
  o2.transform_timing = [&](const StepTiming& t) {
    const long i = nearest_sample(ratio_by_time, t.makespan);
    StepTiming tt = scaled(t, i < 0 ? 1.0 : ratio_by_time[static_cast<std::size_t>(i)].second);
    if (i >= 0) stretched[tt.makespan] = {static_cast<std::size_t>(i), t.coll_by_kind};
    return tt;
  };
  o2.on_step = [&](const StepTiming& t) {
    if (auto f = stretched.find(t.makespan); f != stretched.end()) weighted.add(f->second.first, f->second.second);
  };
  ServingResult r = serve(plan, model, cluster, trace, routing, analytic, o2);
  for (std::size_t k = 0; k < 5; ++k) report.slowdown[k] = weighted.slowdown(k, report.slowdown[k]);
  // Pass 2 executes only shapes pass 1 did not meet; the steps this result cost are both passes'.
  r.breakdown.executed_steps += first.breakdown.executed_steps;
  r.breakdown.executed_chunk_steps += first.breakdown.executed_chunk_steps;
  return r;
}

}  // namespace shardsim
