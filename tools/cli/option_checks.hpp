// tools/cli/option_checks.hpp — the checks every option of a given name gets, wherever it is declared.
//
// Owns: harden(). Output files must be writable names (refused while parsing, before any work),
// --out must not be empty, --seed is a whole number in [0, 2^64 − 1]. The command line applies it
// to every command (main.cpp) and the open evaluator to its problem options (eval_problem.cpp), so
// `seed: -1` from JSON lines or Python is refused as `--seed -1` is.
#pragma once

#include <CLI/CLI.hpp>

namespace shardsim::cli {

// Adds the checks to `app`'s options and to its sub-commands', recursively.
void harden(CLI::App& app);

}  // namespace shardsim::cli
