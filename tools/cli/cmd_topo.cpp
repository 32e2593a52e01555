// tools/cli/cmd_topo.cpp — placeholder until the 'topo' command lands.
#include "tools/cli/commands.hpp"
namespace shardsim::cli {
void add_topo_command(CLI::App& app) { app.add_subcommand("topo", "(not yet implemented)"); }
}  // namespace shardsim::cli
