// tools/cli/cmd_validate.cpp — `shardsim validate`: the simulated-vs-published tables.
//
// Prints calibration rows (they set a constant) and check rows (never used to set anything) with
// one column per executor; --markdown and --json write the same tables. Exit code 0 even when
// rows miss their target (the table states misses and their causes); --strict exits 1 when any
// row, in any column, misses without a stated cause. --summary prints the absolute error per
// metric over the end-to-end check rows (summarize_errors), which --markdown always writes.
#include <cstdio>
#include <iostream>
#include <memory>

#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "sim/step/analytic_executor.hpp"
#include "sim/simgrid/fidelity.hpp"
#include "sim/simgrid/simgrid_executor.hpp"
#include "common/worker_pool.hpp"
#include "sim/serving/measured_run.hpp"
#include "sim/serving/validation.hpp"
#include "common/embedded.hpp"
#include "sim/serving/hardware_rows.hpp"
#include "sim/serving/host_cost_fit.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/routing_trace.hpp"
#include "studies/scoring_resources.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/option_table_cli.hpp"

namespace shardsim::cli {

namespace {

struct Options : ScoringResources {
  std::string fidelity = "analytic";
  std::string markdown, json_out;
  double scale = 1.0;
  bool exact = false;
  bool strict = false;
  bool summary = false;
  // --run: a user's measured run (sim/serving/measured_run.hpp) with the plan it ran
  std::string run, model = "mixtral-8x7b", cluster = "dgx-h100:1", plan = "megatron";
  std::uint64_t seed = 1;
  // --hw: a calibrated cluster file and the user's measurement files
  std::vector<std::string> fit;  // --run --fit: host costs to fit to the run
  std::string hw;
  std::vector<std::string> nccl_tests, kernels, power;
};

std::string fmt(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, x >= 100 ? "%.0f" : "%.1f", x);
  return buf;
}

// |error| per metric over the end-to-end check rows, per scope, of every column (`sums`: summarize_errors of each).
std::string summary_markdown(const std::vector<std::string>& tiers, const std::vector<std::vector<ErrorSummary>>& sums) {
  std::string md = "\n### Error summary (end-to-end check rows)\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "The absolute error per metric, as peers report accuracy; targets: median ≤ %.0f%%, P90 ≤ %.0f%%.\n\n",
                100 * ErrorSummary::kMedianTarget, 100 * ErrorSummary::kP90Target);
  md += line;
  md += "| metric | scope | rows |";
  std::string sep = "|---|---|---|";
  for (const auto& t : tiers) {
    md += " " + t + " median | P90 | max |";
    sep += "---|---|---|";
  }
  md += "\n" + sep + "\n";
  for (std::size_t i = 0; i < sums.front().size(); ++i) {
    const ErrorSummary& s = sums.front()[i];
    md += "| " + s.metric + " | " + s.scope + " | " + std::to_string(s.rows) + " |";
    for (const auto& col : sums) {
      const ErrorSummary& c = col[i];
      auto pct = [](double x, double target) {
        char b[32];
        std::snprintf(b, sizeof b, target > 0 && x > target ? "**%.1f%%**" : "%.1f%%", 100 * x);
        return std::string(b);
      };
      md += " " + pct(c.median, ErrorSummary::kMedianTarget) + " | " + pct(c.p90, ErrorSummary::kP90Target) + " | " + pct(c.max, 0) + " |";
    }
    md += "\n";
  }
  return md;
}

// One Markdown table per role, every executor's column side by side.
std::string markdown(const std::vector<std::string>& tiers, const std::vector<std::vector<ValidationRow>>& cols) {
  std::string md;
  for (RowRole role : {RowRole::Calibration, RowRole::Check}) {
    md += role == RowRole::Calibration ? "### Calibration rows (each set a constant)\n\n" : "\n### Check rows (never used to set anything)\n\n";
    md += "| case | published |";
    std::string sep = "|---|---|";
    for (const auto& t : tiers) {
      md += " " + t + " | error |";
      sep += "---|---|";
    }
    md += role == RowRole::Calibration ? " target | sets |\n" : " target | verdict |\n";
    md += sep + "---|---|\n";
    const auto& rows = cols.front();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      if (r.role != role) continue;
      md += "| " + r.name + " | " + fmt(r.published) + " " + r.unit + " |";
      bool all = true;
      for (const auto& col : cols) {
        char e[32];
        std::snprintf(e, sizeof e, "%+.1f%%", 100 * col[i].error());
        md += " " + fmt(col[i].simulated) + " " + r.unit + " | " + e + " |";
        all &= col[i].within();
      }
      char tol[16];
      std::snprintf(tol, sizeof tol, "±%.0f%%", 100 * r.tolerance);
      md += std::string(" ") + tol + " | ";
      if (role == RowRole::Calibration) md += r.sets;
      else md += all ? "within" : "**miss**" + (r.known_miss.empty() ? std::string() : ": " + r.known_miss);
      md += " |\n";
    }
  }
  return md;
}

// --markdown / --json: refused before any work when they cannot be written.
void check_outputs(const Options& opt) {
  for (const std::string& path : {opt.markdown, opt.json_out})
    if (!path.empty()) check_output_path(path);
}

// --markdown / --json of one analytic column (the user's own rows).
void write_analytic_rows(const Options& opt, const std::vector<ValidationRow>& rows) {
  const std::vector<std::string> tiers = {"analytic"};
  if (!opt.markdown.empty()) write_file_atomically(opt.markdown, markdown(tiers, {rows}));
  if (!opt.json_out.empty())
    write_file_atomically(opt.json_out,
                          json_text({{"schema", "shardsim.validation/1"}, {"rows", {{"analytic", validation_to_json(rows, "analytic")}}}}, 2) + "\n");
}

// `validate --run FILE`: the user's measured run replayed with their plan, one check row per metric.
void run_measured(const Options& opt) {
  if (opt.fidelity != "analytic") throw InputError("--fidelity", opt.fidelity, "--run serves at the analytic tier");
  check_outputs(opt);
  const ModelSpec model = load_model(opt.model);
  const Cluster cluster = load_cluster(opt.cluster);
  const Plan plan = load_plan(opt.plan, model, cluster);
  const PlanCheck chk = check_plan(plan, model, cluster);
  if (!chk.feasible()) throw InputError(opt.plan, chk.violations.front().field, "infeasible plan: " + chk.violations.front().reason);
  const MeasuredRun run = read_measured_run(read_text_file(opt.run), opt.run);
  const std::unique_ptr<RoutingSource> routing =
      model.is_moe() ? make_routing("synthetic:seed=" + std::to_string(opt.seed), model.routing_shape()) : nullptr;
  ServingOptions so;
  RequestTrace trace = run.trace;
  std::string load;
  if (run.rate > 0) {
    trace = at_rate(trace, run.rate, Arrival::Poisson, opt.seed);
    load = "Poisson at " + fmt(run.rate) + " req/s (seed " + std::to_string(opt.seed) + ")";
    if (run.concurrency > 0) load += "; the client's cap of " + std::to_string(run.concurrency) + " in flight is not modelled";
  } else if (run.concurrency > 0) {
    so.concurrency = run.concurrency;
    load = std::to_string(run.concurrency) + " clients (closed loop)";
  } else {
    so.offline = true;
    load = "every request at once";
  }
  AnalyticExecutor ex(cluster);
  auto serve_plan = [&](const Plan& p) {
    const ServingResult r = serve(p, model, cluster, trace, routing.get(), ex, so);
    return summarize(r, so, cluster.num_gpus());
  };
  // --fit: the host costs set by this run (it becomes a calibration row).
  Plan served = plan;
  std::string fitted;
  if (!opt.fit.empty()) {
    const HostCostFit fit = fit_host_costs(run, plan, opt.fit, serve_plan);
    served = fit.plan;
    for (std::size_t i = 0; i < fit.keys.size(); ++i)
      fitted += (i ? ", " : "") + fit.keys[i] + " " + fmt(fit.before[i]) + " → " + fmt(fit.after[i]);
    char tail[160];
    std::snprintf(tail, sizeof tail, "; RMS of log(simulated / measured) over the run's figures %.3f → %.3f (%d simulated runs)",
                  fit.rms_before, fit.rms_after, fit.serves);
    fitted += tail;
  }
  const Metrics m = serve_plan(served);
  const std::string setup = plan_to_string(served, model) + " on " + cluster.name() + "; " + std::to_string(trace.requests.size()) +
                            " requests (" + (run.per_request ? "their own lengths" : "the mean lengths") + "), " + load;
  std::vector<ValidationRow> rows = measured_run_rows(run, m, setup, cluster.gpu().name, cluster.num_nodes());
  if (!opt.fit.empty())
    for (auto& row : rows) {  // the run set the fitted values: its rows are calibration rows now
      row.role = RowRole::Calibration;
      row.tolerance = 0.05;
      row.sets = fitted;
    }
  std::printf("your run %s (%s)\nreplayed: %s\n", run.source.c_str(), run.client.c_str(), setup.c_str());
  if (!fitted.empty()) std::printf("fitted:   %s\n", fitted.c_str());
  std::printf("\n");
  std::printf("%-44s %12s %12s %8s  target\n", "metric", "measured", "simulated", "error");
  int outside = 0;
  for (const auto& row : rows) {
    outside += !row.within();
    std::printf("%-44s %9s %-3s %9s %-3s %+7.1f%%%s  ±%.0f%%\n", row.metric.c_str(), fmt(row.published).c_str(), row.unit.c_str(),
                fmt(row.simulated).c_str(), row.unit.c_str(), 100 * row.error(), row.within() ? " " : "!", 100 * row.tolerance);
  }
  if (opt.fit.empty())
    std::printf("\n%d of %zu outside their target ('!'). Check rows: nothing was fitted to this run (docs/validation.md, \"Your own runs\").\n",
                outside, rows.size());
  else
    std::printf("\n%d of %zu outside their target ('!'). Calibration rows: this run set the values above, so they are not evidence; check "
                "the fitted plan on another run (docs/validation.md, \"Your own runs\").\n",
                outside, rows.size());
  write_analytic_rows(opt, rows);
}

// `validate --hw FILE`: the user's own measurements priced on their calibrated cluster, split as
// validate splits its own rows (sim/serving/hardware_rows.hpp).
void run_hardware(const Options& opt) {
  if (opt.fidelity != "analytic") throw InputError("--fidelity", opt.fidelity, "--hw prices at the analytic tier");
  check_outputs(opt);
  const Cluster cluster = load_cluster(opt.hw);
  std::vector<std::string> notes;
  const std::vector<ValidationRow> rows = hardware_rows(cluster, {opt.nccl_tests, opt.kernels, opt.power}, notes);
  if (rows.empty())
    throw InputError("--hw", opt.hw, "no rows: the file records no calibration whose sources are here, and no --nccl-tests, --kernels or --power file was given");
  std::printf("your hardware: %s (%s; %zu calibrated constant(s))\n\n", opt.hw.c_str(), cluster.gpus_text().c_str(), cluster.calibration().size());
  std::printf("%-78s %-5s %12s %12s %8s  target\n", "case", "role", "measured", "analytic", "error");
  int calib = 0, outside = 0;
  for (const auto& r : rows) {
    calib += r.role == RowRole::Calibration;
    if (r.role == RowRole::Check && !r.within()) ++outside;
    std::printf("%-78s %-5s %9s %-3s %9s %-3s %+7.1f%%%s  ±%.0f%%\n", r.name.c_str(), r.role == RowRole::Calibration ? "calib" : "check",
                fmt(r.published).c_str(), r.unit.c_str(), fmt(r.simulated).c_str(), r.unit.c_str(), 100 * r.error(), r.within() ? " " : "!",
                100 * r.tolerance);
  }
  for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
  std::printf("\n%d calibration row(s) (their files set the constants: not evidence), %zu check row(s), %d of them outside their "
              "target ('!'); docs/validation.md, \"Your own hardware\"\n",
              calib, rows.size() - static_cast<std::size_t>(calib), outside);
  write_analytic_rows(opt, rows);
}

void run(const Options& opt) {
  if (!opt.hw.empty() && !opt.run.empty()) throw InputError("--hw", opt.hw, "give --hw or --run, not both");
  if (opt.hw.empty() && !(opt.nccl_tests.empty() && opt.kernels.empty() && opt.power.empty()))
    throw InputError("--nccl-tests", "", "--nccl-tests, --kernels and --power are measurements of your hardware: give them with --hw FILE");
  if (!opt.fit.empty() && opt.run.empty()) throw InputError("--fit", "", "fits host costs to your measured run: give it with --run FILE");
  if (!opt.hw.empty()) {
    run_hardware(opt);
    return;
  }
  if (!opt.run.empty()) {
    run_measured(opt);
    return;
  }
  if (opt.fidelity != "analytic" && opt.fidelity != "simgrid" && opt.fidelity != "both")
    throw InputError("--fidelity", opt.fidelity, "unknown tier (expected analytic, simgrid or both)");
  if (!(opt.scale > 0 && opt.scale <= 10))
    throw InputError("--requests-scale", std::to_string(opt.scale), "expected a number in (0, 10]");
  check_outputs(opt);  // (before the work: nothing is computed for a file that cannot be written)
  std::vector<std::string> tiers;
  if (opt.fidelity != "simgrid") tiers.push_back("analytic");
  if (opt.fidelity != "analytic") tiers.push_back("simgrid");
  // The worker pool forks its zygote before anything else runs (no threads exist yet).
  std::unique_ptr<WorkerPool> pool;
  if (opt.fidelity != "analytic")
    pool = std::make_unique<WorkerPool>(opt.workers > 0 ? opt.workers : default_workers(), simgrid_worker_handler);
  ValidationOptions vo;
  vo.request_scale = opt.scale;
  vo.exact = opt.exact;
  std::vector<std::vector<ValidationRow>> cols;
  for (const auto& tier : tiers) {
    if (tier == "analytic") {
      cols.push_back(run_validation([](const Cluster& c) { return std::make_unique<AnalyticExecutor>(c); }, vo));
      continue;
    }
    // One-collective rows run whole in SimGrid; end-to-end rows at the simgrid tier, as `simulate
    // --fidelity simgrid` serves them (sampled steps lowered whole in the worker pool).
    const std::unique_ptr<SimgridRunner> runner = make_pool_runner(*pool);
    ValidationOptions so = vo;
    so.serve = [&runner, samples = opt.samples](const Plan& plan, const ModelSpec& model, const Cluster& cluster,
                                                const std::string& spec, const RequestTrace& trace,
                                                const RoutingSource* routing, const ServingOptions& o) {
      FidelityReport report;
      return serve_at_fidelity(Tier::Simgrid, plan, model, cluster, spec, trace, routing, o, runner.get(), report, samples);
    };
    cols.push_back(run_validation([](const Cluster& c) { return std::make_unique<SimgridExecutor>(c); }, so));
  }
  const auto& rows = cols.front();
  int unexplained = 0;  // rows outside their target with no stated cause (any column)
  std::printf("%-66s %-5s %12s", "case", "role", "published");
  for (const auto& t : tiers) std::printf(" %12s %8s", t.c_str(), "error");
  std::printf("  target\n");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    std::printf("%-66s %-5s %9s %-3s", r.name.c_str(), r.role == RowRole::Calibration ? "calib" : "check",
                fmt(r.published).c_str(), r.unit.c_str());
    for (const auto& col : cols) {
      const auto& c = col[i];
      bool miss = !c.within();
      if (miss && r.known_miss.empty()) ++unexplained;
      std::printf(" %9s %-3s %+7.1f%%%s", fmt(c.simulated).c_str(), c.unit.c_str(), 100 * c.error(), miss ? "!" : " ");
    }
    std::printf("  ±%.0f%%\n", 100 * r.tolerance);
  }
  std::printf("\n('!' marks a row outside its target) sources, setups and what each calibration row set: "
              "--markdown / --json, docs/validation.md\n");
  std::vector<std::vector<ErrorSummary>> sums;
  for (const auto& col : cols) sums.push_back(summarize_errors(col));
  if (opt.summary) {
    std::printf("\nerror summary: |error| over the end-to-end check rows (targets: median ≤ %.0f%%, P90 ≤ %.0f%%; '!' misses)\n",
                100 * ErrorSummary::kMedianTarget, 100 * ErrorSummary::kP90Target);
    std::printf("%-10s %-16s %5s", "metric", "scope", "rows");
    for (const auto& t : tiers) std::printf("  %9s %8s %8s", (t + " med").c_str(), "P90", "max");
    std::printf("\n");
    for (std::size_t i = 0; i < sums.front().size(); ++i) {
      const ErrorSummary& s = sums.front()[i];
      std::printf("%-10s %-16s %5d", s.metric.c_str(), s.scope.c_str(), s.rows);
      for (const auto& col : sums) {
        const ErrorSummary& c = col[i];
        std::printf("  %8.1f%%%s %7.1f%%%s %7.1f%%", 100 * c.median, c.median > ErrorSummary::kMedianTarget ? "!" : " ",
                    100 * c.p90, c.p90 > ErrorSummary::kP90Target ? "!" : " ", 100 * c.max);
      }
      std::printf("\n");
    }
  }
  if (!opt.markdown.empty()) write_file_atomically(opt.markdown, markdown(tiers, cols) + summary_markdown(tiers, sums));
  if (!opt.json_out.empty()) {
    json j = {{"schema", "shardsim.validation/1"}, {"rows", json::object()}};
    for (std::size_t k = 0; k < tiers.size(); ++k) j["rows"][tiers[k]] = validation_to_json(cols[k], tiers[k]);
    write_file_atomically(opt.json_out, json_text(j, 2) + "\n");
  }
  if (opt.strict && unexplained > 0) {
    std::fprintf(stderr, "validate: %d row(s) outside their target with no stated cause\n", unexplained);
    throw CLI::RuntimeError(1);
  }
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "validate",
      "Recompute the validation tables: calibration rows (H100 kernel times and 8-GPU NCCL collectives,\n"
      "each setting a constant) and check rows (collectives on 2, 4 and 32 GPUs; MLPerf Inference v4.1\n"
      "Llama-2-70B Offline and Server on DGX-H100 and 8×H200; TensorRT-LLM Mixtral throughputs; SGLang's\n"
      "DeepSeek-V3 prefill and decode pools on H100; NVIDIA NIM's closed-loop concurrency sweep of\n"
      "Llama-3.3-70B on H100; ML.ENERGY's vLLM power, throughput and energy per token of Llama 3.1, Qwen3 and\n"
      "DeepSeek-V3.1 on H100 and B200, whose one-H100 8B runs set the power model), each set up as the\n"
      "published run was. The simgrid column serves end-to-end\n"
      "rows at the simgrid tier (sampled steps in SimGrid), as `simulate --fidelity simgrid` does.\n\n"
      "Examples:\n"
      "  shardsim validate\n"
      "  shardsim validate --fidelity both --markdown table.md --json table.json --strict\n"
      "  shardsim validate --run result.json --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=2,dp=4,engine=vllm\n"
      "  shardsim validate --hw my-cluster.json --nccl-tests all_reduce_16.txt");
  cmd->add_option("--fidelity", opt->fidelity, "analytic | simgrid | both (one column each)")->capture_default_str();
  cmd->add_option("--markdown", opt->markdown, "also write the tables as Markdown to this file");
  cmd->add_option("--json", opt->json_out, "also write the rows (schema shardsim.validation/1) to this file");
  cmd->add_option("--requests-scale", opt->scale, "fraction of each end-to-end row's published request count")
      ->capture_default_str();
  add_declared(cmd, static_cast<ScoringResources&>(*opt), scoring_resource_decls(kWorkers | kSamples, "rows", "per end-to-end row (the simgrid column)"));
  cmd->add_flag("--exact", opt->exact,
                "run the end-to-end rows on the exact scoring path (every step whole; slow; docs/performance.md)");
  cmd->add_flag("--summary", opt->summary,
                "also print |error| per metric over the end-to-end check rows (median, P90, max), over all of them, "
                "single-node and multi-node, and per GPU (--markdown always writes it)");
  cmd->add_option("--run", opt->run,
                  "instead of the built-in rows: your own measured run (vllm bench serve --save-result --save-detailed JSON, "
                  "TensorRT-LLM benchmark_serving JSON, or sglang bench_serving --output-file JSONL) replayed with --plan on "
                  "--cluster, each measured metric a check row (docs/validation.md, \"Your own runs\")");
  cmd->add_option("--model,-m", opt->model, "with --run: the model it served")->capture_default_str();
  cmd->add_option("--cluster,-c", opt->cluster, "with --run: the cluster it ran on")->capture_default_str();
  cmd->add_option("--plan,-p", opt->plan, "with --run: the plan it ran (e.g. `shardsim import` of its config)")->capture_default_str();
  cmd->add_option("--seed", opt->seed, "with --run: the Poisson arrivals' and routing's seed")->capture_default_str();
  cmd->add_option("--fit", opt->fit,
                  "with --run: fit these host costs of the plan's engine to the run (step_overhead_ms, seq_overhead_us, "
                  "launch_overhead_us; repeat for two) — its rows then are calibration rows and the fitted plan is printed")
      ->delimiter(',');
  cmd->add_option("--hw", opt->hw,
                  "instead of the built-in rows: your hardware — a cluster file `shardsim calibrate` wrote — with your measurements "
                  "priced on it: the files that set its constants as calibration rows, --nccl-tests / --kernels / --power files "
                  "as check rows (docs/validation.md, \"Your own hardware\")");
  cmd->add_option("--nccl-tests", opt->nccl_tests, "with --hw: nccl-tests output to check (repeat for several)");
  cmd->add_option("--kernels", opt->kernels, "with --hw: kernel timing tables to check, as calibrate reads them (repeat)");
  cmd->add_option("--power", opt->power, "with --hw: measured power runs to check, as calibrate reads them (repeat)");
  cmd->add_flag("--strict", opt->strict, "exit 1 when a row misses its target without a stated cause (the rule tests/sim/serving/validation_test.cpp asserts)");
  cmd->callback([opt] { run(*opt); });
}

}  // namespace shardsim::cli
