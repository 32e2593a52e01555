// tools/cli/commands.hpp — one function per `shardsim` sub-command, each in its own cmd_*.cpp.
//
// Each add_*_command registers a CLI11 sub-command (options, help with examples, callback).
// Callbacks report bad input by throwing shardsim::InputError; main() turns that into one line on
// stderr and exit code 2. Adding a command = one cmd_*.cpp + one line here + one line in main.cpp.
#pragma once

#include <CLI/CLI.hpp>

namespace shardsim::cli {

void add_topo_command(CLI::App& app);     // cmd_topo.cpp     — cluster summary, DOT export
void add_collective_command(CLI::App& app);  // cmd_collective.cpp — one collective priced as NCCL's tuner weighs it
void add_models_command(CLI::App& app);   // cmd_models.cpp   — model presets and parameter counts
void add_trace_command(CLI::App& app);    // cmd_trace.cpp    — request/routing traces: stats, generate
void add_plan_command(CLI::App& app);     // cmd_plan.cpp     — plan check: verdict, memory, groups
void add_simulate_command(CLI::App& app); // cmd_simulate.cpp — score a plan on a trace, explain the time
void add_validate_command(CLI::App& app); // cmd_validate.cpp — simulated vs published figures
void add_space_command(CLI::App& app);    // cmd_space.cpp    — the search space: decisions, size, rule plans
void add_search_command(CLI::App& app);   // cmd_search.cpp   — optimizers at equal budgets, compared
void add_sweep_command(CLI::App& app);    // cmd_sweep.cpp    — one plan under rising load; max load within an SLO
void add_compare_command(CLI::App& app);  // cmd_compare.cpp  — what-if scenarios side by side, and why they differ
void add_serve_evaluator_command(CLI::App& app);  // cmd_serve_evaluator.cpp — ask/tell over JSON lines for outside optimizers
void add_calibrate_command(CLI::App& app);  // cmd_calibrate.cpp — collective efficiency fitted to your nccl-tests output
void add_export_command(CLI::App& app);   // cmd_export.cpp   — a plan as vLLM / SGLang / TensorRT-LLM launch files; `import` reads them back

}  // namespace shardsim::cli
