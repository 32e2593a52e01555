// tools/cli/cmd_trace.cpp — placeholder until the 'trace' command lands.
#include "tools/cli/commands.hpp"
namespace shardsim::cli {
void add_trace_command(CLI::App& app) { app.add_subcommand("trace", "(not yet implemented)"); }
}  // namespace shardsim::cli
