// tools/cli/option_table_cli.hpp — declared options (studies/option_table.hpp) on a CLI11 command.
//
// Owns: add_declared() and add_sim_options(). Each declaration becomes one CLI11 option or flag
// bound to its field, checked by the declaration's own option_value_error() (so a command refuses a
// value with the words the open evaluator uses), its default shown when declared so, and its
// `needs`/`excludes` wired to the options of the same table that the command registered.
#pragma once

#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

#include "studies/option_table.hpp"
#include "studies/sim_inputs.hpp"

namespace shardsim::cli {

// The validator of `check` (null for a switch; a seed's is added by harden() to every --seed).
inline bool needs_validator(const OptionCheck& check) {
  return check.kind != OptionKind::Flag && check.kind != OptionKind::Seed &&
         (check.kind != OptionKind::Text || !check.choices.empty());
}
CLI::Validator declared_validator(const OptionCheck& check);

// Registers `decls` on `cmd`, bound to `target`'s fields; `with_load` false leaves out the load options.
template <class T>
void add_declared(CLI::App* cmd, T& target, const std::vector<OptionDecl<T>>& decls, bool with_load = true) {
  std::vector<std::pair<const OptionDecl<T>*, CLI::Option*>> added;
  for (const auto& d : decls) {
    if (d.load && !with_load) continue;
    CLI::Option* o = std::visit(
        [&](auto field) -> CLI::Option* {
          using V = std::remove_reference_t<decltype(target.*field)>;
          if constexpr (std::is_same_v<V, bool>) return cmd->add_flag(d.names, target.*field, d.help);
          else return cmd->add_option(d.names, target.*field, d.help);
        },
        d.field);
    if (d.show_default) o->capture_default_str();
    if (needs_validator(d.check)) o->check(declared_validator(d.check));
    added.emplace_back(&d, o);
  }
  for (auto& [d, o] : added) {
    for (const auto& n : d->needs)
      if (CLI::Option* other = cmd->get_option_no_throw(n)) o->needs(other);
    for (const auto& n : d->excludes)
      if (CLI::Option* other = cmd->get_option_no_throw(n)) o->excludes(other);
  }
}

// sim_option_decls() on `cmd`. `load_options` false: the command sets the load itself (sweep), so
// of the load options only --arrivals is registered.
inline void add_sim_options(CLI::App* cmd, SimInputs& in, bool load_options = true) {
  add_declared(cmd, in, sim_option_decls(), load_options);
}

}  // namespace shardsim::cli
