// tools/cli/cmd_models.cpp — placeholder until the 'models' command lands.
#include "tools/cli/commands.hpp"
namespace shardsim::cli {
void add_models_command(CLI::App& app) { app.add_subcommand("models", "(not yet implemented)"); }
}  // namespace shardsim::cli
