// tools/cli/cmd_plan.cpp — placeholder until the 'plan' command lands.
#include "tools/cli/commands.hpp"
namespace shardsim::cli {
void add_plan_command(CLI::App& app) { app.add_subcommand("plan", "(not yet implemented)"); }
}  // namespace shardsim::cli
