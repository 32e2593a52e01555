// tools/cli/option_table_cli.cpp — a declaration's check as a CLI11 validator.
#include "tools/cli/option_table_cli.hpp"

#include <string>

#include "common/json_reader.hpp"

namespace shardsim::cli {

CLI::Validator declared_validator(const OptionCheck& check) {
  std::string desc;
  if (check.kind == OptionKind::Text) {
    for (const auto& c : check.choices) desc += (desc.empty() ? "{" : ",") + c;
    desc += "}";
  } else if (check.lo <= check.hi && check.kind == OptionKind::Integer) {
    desc = "in [" + std::to_string(static_cast<long long>(check.lo)) + ", " + std::to_string(static_cast<long long>(check.hi)) + "]";
  } else if (check.lo <= check.hi) {
    desc = "in [" + format_number(check.lo) + ", " + format_number(check.hi) + "]";
  }
  return CLI::Validator([check](std::string& text) { return option_value_error(check, text); }, desc);
}

}  // namespace shardsim::cli
