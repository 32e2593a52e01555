// tools/cli/cmd_validate.cpp — `shardsim validate`: the simulated-vs-published table.
//
// Exit code 0 even when rows miss their tolerance (the table states misses honestly); --strict
// makes a miss exit 1, for CI use.
#include <cstdio>
#include <iostream>
#include <memory>

#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "sim/analytic_executor.hpp"
#include "sim/simgrid_executor.hpp"
#include "sim/validation.hpp"
#include "tools/cli/commands.hpp"

namespace shardsim::cli {

void add_validate_command(CLI::App& app) {
  struct Options {
    std::string fidelity = "both";
    std::string markdown;
    int requests = 12000;
    bool strict = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "validate",
      "Recompute the validation table: simulated vs published NCCL collective times on 8×H100, bus\n"
      "bandwidths, and MLPerf Inference v4.1 Llama-2-70B Offline throughput on one DGX-H100.\n\n"
      "Examples:\n"
      "  shardsim validate\n"
      "  shardsim validate --markdown table.md --strict");
  cmd->add_option("--fidelity", opt->fidelity, "analytic | simgrid | both (one column each)")->capture_default_str();
  cmd->add_option("--markdown", opt->markdown, "also write the table as Markdown to this file");
  cmd->add_option("--mlperf-requests", opt->requests, "requests in the MLPerf offline run")->capture_default_str();
  cmd->add_flag("--strict", opt->strict, "exit 1 when a row misses its tolerance");
  cmd->callback([opt] {
    if (opt->fidelity != "analytic" && opt->fidelity != "simgrid" && opt->fidelity != "both")
      throw InputError("--fidelity", opt->fidelity, "unknown tier (expected analytic, simgrid or both)");
    std::vector<std::string> tiers;
    if (opt->fidelity != "simgrid") tiers.push_back("analytic");
    if (opt->fidelity != "analytic") tiers.push_back("simgrid");
    std::vector<std::vector<ValidationRow>> cols;
    for (const auto& tier : tiers) {
      if (tier == "analytic")
        cols.push_back(run_validation([](const Cluster& c) { return std::make_unique<AnalyticExecutor>(c); }, opt->requests));
      else
        cols.push_back(run_validation([](const Cluster& c) { return std::make_unique<SimgridExecutor>(c); }, opt->requests));
    }
    std::string md = "| case | published |";
    std::string sep = "|---|---|";
    for (const auto& t : tiers) {
      md += " " + t + " | error | within ±target |";
      sep += "---|---|---|";
    }
    md += "\n" + sep + "\n";
    bool all = true;
    std::printf("%-58s %14s", "case", "published");
    for (const auto& t : tiers) std::printf(" %14s %8s", t.c_str(), "error");
    std::printf("  target\n");
    const auto& rows = cols.front();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      std::printf("%-58s %9.0f %-4s", r.name.c_str(), r.published, r.unit.c_str());
      char line[768];
      std::snprintf(line, sizeof line, "| %s | %.0f %s |", r.name.c_str(), r.published, r.unit.c_str());
      md += line;
      for (const auto& col : cols) {
        const auto& c = col[i];
        all &= c.within();
        std::printf(" %9.0f %-4s %+7.1f%%%s", c.simulated, c.unit.c_str(), 100 * c.error(), c.within() ? " " : "!");
        std::snprintf(line, sizeof line, " %.0f %s | %+.1f%% | %s |", c.simulated, c.unit.c_str(), 100 * c.error(),
                      c.within() ? "yes" : "**no**");
        md += line;
      }
      std::printf("  ±%.0f%%\n", 100 * r.tolerance);
      md += "\n";
    }
    std::printf("\n('!' marks a miss) sources and calibration notes:\n");
    for (const auto& r : rows)
      std::printf("  %s: %s%s%s\n", r.name.c_str(), r.source.c_str(), r.note.empty() ? "" : "; ", r.note.c_str());
    if (!opt->markdown.empty()) write_file_atomically(opt->markdown, md);
    if (opt->strict && !all) throw CLI::RuntimeError(1);
  });
}

}  // namespace shardsim::cli
