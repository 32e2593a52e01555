// tools/cli/main.cpp — the `shardsim` entry point: registers sub-commands, maps errors to exit codes.
//
// Exit codes: 0 success; 2 bad input (InputError, usage errors); 1 internal error; `search`
// stopped by SIGINT / SIGTERM: 130 / 143 (its outputs marked incomplete, resumable).
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <set>
#include <string>

#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/option_checks.hpp"

namespace {

// "shardsim frobnicate --help" printed the main help and exited 0: an unknown command is an error.
bool known_command(CLI::App& app, const std::string& word) {
  for (CLI::App* sub : app.get_subcommands({}))
    if (sub->check_name(word)) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "shardsim — simulate Mixture-of-Experts inference plans on GPU clusters and search for the best plan.\n\n"
      "Examples:\n"
      "  shardsim topo --cluster dgx-h100:32\n"
      "  shardsim models\n"
      "  shardsim trace stats --routing synthetic:zipf=1.2,seed=5 --model mixtral-8x7b --ep 8\n"
      "  shardsim plan check --model deepseek-v3 --cluster dgx-h100:16 --plan tp=8,ep=8,pp=2\n"
      "  shardsim simulate --model mixtral-8x7b --cluster dgx-h100:2 --plan megatron --requests 1000\n"
      "  shardsim sweep --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=2,dp=4 --out sweep\n"
      "  shardsim compare --model deepseek-v3 --cluster dgx-h100:8 --cluster dgx-h200:8 --plan megatron\n"
      "  shardsim validate\n",
      "shardsim"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", "shardsim 0.1.0");
  shardsim::cli::add_topo_command(app);
  shardsim::cli::add_collective_command(app);
  shardsim::cli::add_models_command(app);
  shardsim::cli::add_trace_command(app);
  shardsim::cli::add_plan_command(app);
  shardsim::cli::add_simulate_command(app);
  shardsim::cli::add_validate_command(app);
  shardsim::cli::add_space_command(app);
  shardsim::cli::add_search_command(app);
  shardsim::cli::add_sweep_command(app);
  shardsim::cli::add_compare_command(app);
  shardsim::cli::add_serve_evaluator_command(app);
  shardsim::cli::add_export_command(app);
  shardsim::cli::add_calibrate_command(app);
  shardsim::cli::harden(app);
  if (argc > 1 && argv[1][0] != '-' && !known_command(app, argv[1])) {
    std::cerr << "error: " << argv[1] << ": unknown command (see 'shardsim --help')\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) {
      std::cout << app.help();
      return argc > 1 ? 2 : 0;
    }
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {  // a command's own exit code (validate --strict), its message already printed
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: " << e.what() << " (see 'shardsim --help')\n";
    return 2;
  } catch (const shardsim::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
