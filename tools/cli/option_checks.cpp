// tools/cli/option_checks.cpp — see option_checks.hpp.
#include "tools/cli/option_checks.hpp"

#include <set>
#include <string>

#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "studies/option_table.hpp"

namespace shardsim::cli {

namespace {

// A seed: a whole number in [0, 2^64 − 1], as the declared options check it (CLI11 wrapped "-1"
// and 2^64 onto one seed).
std::string whole_u64(std::string& s) { return option_value_error(OptionCheck{OptionKind::Seed, 0, -1, {}}, s); }

std::string nonempty_path(std::string& s) { return s.empty() ? "an empty file name" : ""; }

// An output file that could not be written is refused while parsing, before any work.
std::string writable_file(std::string& s) {
  if (s.empty()) return "an empty file name";
  try {
    shardsim::check_output_path(s);
  } catch (const shardsim::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Output paths must not be empty (`--json ''` wrote nothing and exited 0), seeds must be whole numbers.
void harden(CLI::App& app) {
  static const std::set<std::string> files = {"--json", "--timeline", "--requests-csv", "--markdown",
                                              "--dot",  "--json-links", "--policy-out", "--links"};
  for (CLI::Option* o : app.get_options()) {
    if (o->get_items_expected_max() == 0) continue;  // flags
    const std::string name = o->get_name();
    if (files.count(name)) o->check(CLI::Validator(writable_file, "FILE"));
    if (name == "--out") o->check(CLI::Validator(nonempty_path, "PATH"));  // a folder (search) or a file (trace generate)
    if (name == "--seed") o->check(CLI::Validator(whole_u64, "UINT64"));
  }
  for (CLI::App* sub : app.get_subcommands({})) harden(*sub);
}

}  // namespace shardsim::cli
