// sim/serving/power_calibration.cpp — power tables read, steady windows measured, the power model fitted (see the header).
#include "sim/serving/power_calibration.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <memory>

#include "common/csv_table.hpp"
#include "common/input_error.hpp"
#include "common/text_number.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"
#include "sim/step/analytic_executor.hpp"
#include "sim/step/compute_cost.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

namespace shardsim {

std::vector<PowerRun> parse_power_table(const std::string& text, const std::string& source) {
  const CsvTable csv = read_csv_table(text, source);
  std::vector<PowerRun> runs;
  if (!csv.columns.empty())
    for (const char* need : {"model", "cluster", "plan", "trace", "watts"})
      if (!csv.has(need))
        throw InputError(source, need, "missing column (the header needs model, cluster, plan, trace, watts; tok_s optional)");
  for (const CsvTable::Row& row : csv.rows) {
    const std::string where = "line " + std::to_string(row.line);
    PowerRun r;
    r.line = row.line;
    r.model = csv.cell(row, "model");
    r.cluster = csv.cell(row, "cluster");
    r.plan = csv.cell(row, "plan");
    r.trace = csv.cell(row, "trace");
    for (const auto* s : {&r.model, &r.cluster, &r.plan, &r.trace})
      if (s->empty()) throw InputError(source, where, "an empty model, cluster, plan or trace cell");
    r.watts = parse_real_in(csv.cell(row, "watts"), source, where + " watts", 1e-3, 1e7);
    const std::string t = csv.cell(row, "tok_s");
    if (!t.empty()) r.tok_s = parse_real_in(t, source, where + " tok_s", 1e-6, 1e12);
    runs.push_back(r);
  }
  if (runs.empty()) throw InputError(source, "", "no runs (a header line, then one line per measured run)");
  return runs;
}

bool power_window(const ServingResult& r, int max_seqs, int gpus, int dp, const GpuSpec& gpu, PowerWindow& out,
                  std::string& why) {
  std::vector<double> first, finish;
  for (const auto& q : r.requests)
    if (q.completed) {
      first.push_back(q.first_token);
      finish.push_back(q.finish);
    }
  const auto b = static_cast<std::size_t>(std::max(1, max_seqs));
  if (first.size() < b + 2) {
    why = std::to_string(first.size()) + " completed requests: the window needs at least max_seqs + 2";
    return false;
  }
  std::sort(first.begin(), first.end());
  std::sort(finish.begin(), finish.end());
  out.from = first[b - 1];                      // max_seqs requests have their first token
  out.to = finish[finish.size() - b - 2];       // all but max_seqs + 1 have finished
  if (!(out.to > out.from)) {
    why = "the window is empty (the last admissions finish before the batch first fills)";
    return false;
  }
  out.tokens = 0;
  for (const auto& [t, n] : r.emissions)
    if (t > out.from && t <= out.to) out.tokens += n;
  out.pool = energy_pool(r, out.from, out.to, gpus, dp, gpu);
  return true;
}

PowerFit::Row measure_power_run(const PowerRun& run, const std::string& source, const PowerServe& serve_with) {
  const std::string where = "line " + std::to_string(run.line);
  const ModelSpec model = load_model(run.model);
  const Cluster cluster = load_cluster(run.cluster);
  if (cluster.mixed()) throw InputError(source, where, "cluster " + run.cluster + " mixes GPU types: a power run is on one");
  const Plan plan = plan_from_string(run.plan, cluster.num_gpus(), plan_defaults(model));
  const PlanCheck check = check_plan(plan, model, cluster);
  if (!check.feasible())
    throw InputError(source, where, "plan " + run.plan + " infeasible: " + check.violations.front().field + ": " + check.violations.front().reason);
  const RequestTrace trace = load_request_trace(run.trace);
  const std::unique_ptr<RoutingSource> routing =
      model.is_moe() ? make_routing("synthetic:seed=1", model.routing_shape()) : nullptr;
  ServingOptions so;
  so.offline = true;
  so.record_work = true;
  PowerFit::Row row;
  row.run = run;
  const ServingResult r = serve_with ? serve_with(plan, model, cluster, run.cluster, trace, routing.get(), so)
                                     : serve(plan, model, cluster, trace, routing.get(), AnalyticExecutor(cluster), so);
  std::string why;
  const int max_seqs = static_cast<int>(engine_seqs(plan.engine, plan.deg.attn_dp) * std::max(1, plan.deg.dp));
  if (!power_window(r, max_seqs, plan.deg.gpus(), plan.deg.dp, cluster.gpu(), row.window, why))
    throw InputError(source, where, why);
  return row;
}

namespace {

// A window's pool with its work done at `at_tok_s` when given (see modelled_watts).
EnergyPool at_rate(const PowerWindow& w, double at_tok_s) {
  EnergyPool p = w.pool;
  const double speed = at_tok_s > 0 && w.tok_s() > 0 ? at_tok_s / w.tok_s() : 1.0;
  p.tensor_work *= speed;
  p.hbm_work *= speed;
  return p;
}

// A window's GPU-seconds per second: active, tensor and HBM work (pool_energy's, over the window).
struct Rates {
  double active = 0, tensor = 0, hbm = 0;
};
Rates rates_of(const PowerWindow& w, double at_tok_s) {
  const double s = w.seconds();
  if (!(s > 0)) return {};
  const PoolEnergy e = pool_energy(at_rate(w, at_tok_s), GpuPower{}, s);
  return {e.active_s / s, e.tensor_s / s, e.hbm_s / s};
}

}  // namespace

double modelled_watts(const PowerWindow& w, const GpuPower& p, double at_tok_s) {
  if (!(w.seconds() > 0)) return 0;
  // Held at the limit as run_energy holds a run (hold_at_limit), over the window's engaged time:
  // the whole window, since every replica holds a full batch in it (its definition).
  EnergyPool pool = at_rate(w, at_tok_s);
  pool.engaged = w.seconds() * std::max(1, pool.dp);
  return hold_at_limit(pool_energy(pool, p, w.seconds()), p).gpu_j() / w.seconds();
}

PowerAnchor sustained_gemm_anchor(const GpuSpec& gpu) {
  const double d = 8192, flops = 2 * d * d * d, bytes = 3 * d * d * 2;
  const double t = compute_time(gpu, ComputeKind::Gemm, d, flops, bytes, Dtype::BF16);
  PowerAnchor a;
  a.tensor = flops / peak_flops(gpu, Dtype::BF16) / t;
  a.hbm = bytes / gpu.hbm_bw / t;
  return a;
}

namespace {

// Non-negative least squares of a·x = y over the rows in `use`: every subset of the three terms
// solved, the best non-negative one kept. False when none is.
bool nnls3(const Eigen::MatrixXd& a, const Eigen::VectorXd& y, const std::vector<int>& rows, Eigen::Vector3d& x) {
  const auto n = static_cast<Eigen::Index>(rows.size());
  Eigen::MatrixXd ar(n, 3);
  Eigen::VectorXd yr(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    ar.row(i) = a.row(rows[static_cast<std::size_t>(i)]);
    yr(i) = y(rows[static_cast<std::size_t>(i)]);
  }
  double best = -1;
  for (int mask = 1; mask < 8; ++mask) {
    std::vector<int> use;
    for (int k = 0; k < 3; ++k)
      if (mask & (1 << k)) use.push_back(k);
    if (static_cast<Eigen::Index>(use.size()) > n) continue;
    Eigen::MatrixXd sub(n, static_cast<Eigen::Index>(use.size()));
    for (std::size_t j = 0; j < use.size(); ++j) sub.col(static_cast<Eigen::Index>(j)) = ar.col(use[j]);
    const Eigen::VectorXd sol = sub.colPivHouseholderQr().solve(yr);
    if ((sol.array() < 0).any() || !sol.allFinite()) continue;
    const double err = (sub * sol - yr).squaredNorm();
    if (best < 0 || err < best) {
      best = err;
      x.setZero();
      for (std::size_t j = 0; j < use.size(); ++j) x(use[j]) = sol(static_cast<Eigen::Index>(j));
    }
  }
  return best >= 0;
}

constexpr double kAtLimit = 0.97;  // a run measured at ≥ 97% of its GPUs' TDP sits at the power limit

}  // namespace

PowerFit fit_gpu_power(std::vector<PowerFit::Row> rows, const GpuSpec& gpu) {
  const GpuPower& base = gpu.power;
  PowerFit f;
  f.before = base;
  f.after = base;
  f.anchor = sustained_gemm_anchor(gpu);
  const int n = static_cast<int>(rows.size()) + 1;  // the runs and the anchor (last)
  // Relative residuals: each equation divided by its watts. The anchor and a run measured at the
  // power limit only bound the model from below (the GPU throttles there, whatever more the work
  // would draw): they join the fit as equations only while the model falls short of them.
  Eigen::MatrixXd a(n, 3);
  Eigen::VectorXd y(n);
  std::vector<bool> limit(static_cast<std::size_t>(n), false);
  for (int i = 0; i < n; ++i) {
    const bool anchor = i == n - 1;
    const PowerFit::Row* row = anchor ? nullptr : &rows[static_cast<std::size_t>(i)];
    const Rates r = anchor ? Rates{f.anchor.active, f.anchor.tensor, f.anchor.hbm} : rates_of(row->window, row->run.tok_s);
    const int gpus = anchor ? 1 : row->window.pool.gpus;
    const double m = anchor ? base.tdp_w : row->run.watts;
    a(i, 0) = r.active / m;
    a(i, 1) = r.tensor / m;
    a(i, 2) = r.hbm / m;
    y(i) = (m - base.idle_w * gpus) / m;
    limit[static_cast<std::size_t>(i)] = anchor || m >= kAtLimit * base.tdp_w * gpus;
  }
  std::vector<int> use;
  for (int i = 0; i < n; ++i)
    if (!limit[static_cast<std::size_t>(i)]) use.push_back(i);
  Eigen::Vector3d x = Eigen::Vector3d::Zero();
  for (int round = 0; round < n; ++round) {
    if (!use.empty() && !nnls3(a, y, use, x)) break;
    bool added = false;
    for (int i = 0; i < n; ++i)
      if (limit[static_cast<std::size_t>(i)] && std::find(use.begin(), use.end(), i) == use.end() &&
          a.row(i).dot(x) < y(i) - 1e-9) {
        use.push_back(i);
        added = true;
      }
    if (!added) break;
  }
  f.after.active_w = x(0);
  f.after.tensor_w = x(1);
  f.after.hbm_w = x(2);
  f.anchor_after = base.idle_w + f.after.active_w * f.anchor.active + f.after.tensor_w * f.anchor.tensor +
                   f.after.hbm_w * f.anchor.hbm;
  double sb = 0, sa = 0;
  for (auto& r : rows) {
    r.before = modelled_watts(r.window, f.before, r.run.tok_s);
    r.after = modelled_watts(r.window, f.after, r.run.tok_s);
    const double eb = r.before > 0 ? std::log(r.before / r.run.watts) : 0, ea = std::log(r.after / r.run.watts);
    sb += eb * eb;
    sa += ea * ea;
  }
  const double runs = static_cast<double>(rows.size());
  f.rms_before = runs > 0 ? std::sqrt(sb / runs) : 0;
  f.rms_after = runs > 0 ? std::sqrt(sa / runs) : 0;
  f.rows = std::move(rows);
  return f;
}

}  // namespace shardsim
