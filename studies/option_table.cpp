// studies/option_table.cpp — option values checked once, options read from JSON objects.
#include "studies/option_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "common/input_error.hpp"
#include "common/text_number.hpp"

namespace shardsim {

namespace {

// Whole numbers only, no sign, at most 2^64 − 1 (a seed of "-1" was once taken as 2^64 − 1).
std::string whole_u64_error(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    return "expected a whole number in [0, 18446744073709551615], got \"" + s + "\"";
  errno = 0;
  (void)std::strtoull(s.c_str(), nullptr, 10);
  if (errno == ERANGE) return "value " + s + " is larger than 18446744073709551615";
  return "";
}

// The shortest decimal text that reads back as `v` (1e-12, not 9.9999999999999998e-13); a whole
// number below 2^53 in plain digits (JSON's 1e3 is the integer 1000).
std::string shortest_text(double v) {
  char buf[40];
  if (std::floor(v) == v && std::fabs(v) < 9007199254740992.0) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// A JSON value as the text the command line would have been given.
std::string value_text(const json& v, bool is_switch, const std::string& source, const std::string& key) {
  if (is_switch) {
    if (!v.is_boolean()) throw InputError(source, "/" + key, "a switch: expected true or false");
    return v.get<bool>() ? "true" : "false";
  }
  if (v.is_boolean()) throw InputError(source, "/" + key, "expected a value, not true/false");
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) return shortest_text(v.get<double>());
  throw InputError(source, "/" + key, "expected a string, a number or true/false, got " + std::string(v.type_name()));
}

}  // namespace

std::string option_value_error(const OptionCheck& check, const std::string& text) {
  const bool ranged = check.lo <= check.hi;
  try {
    switch (check.kind) {
      case OptionKind::Flag: return "";
      case OptionKind::Seed: return whole_u64_error(text);
      case OptionKind::Integer:
        (void)parse_int_in(text, "", "", ranged ? static_cast<long long>(check.lo) : INT32_MIN,
                           ranged ? static_cast<long long>(check.hi) : INT32_MAX);
        return "";
      case OptionKind::Real:
        (void)parse_real_in(text, "", "", ranged ? check.lo : -HUGE_VAL, ranged ? check.hi : HUGE_VAL);
        return "";
      case OptionKind::Text: break;
    }
  } catch (const InputError& e) {
    return e.reason();
  }
  if (check.choices.empty() || std::find(check.choices.begin(), check.choices.end(), text) != check.choices.end()) return "";
  std::string known;
  for (const auto& c : check.choices) known += (known.empty() ? "" : ", ") + c;
  return "expected one of " + known + ", got \"" + text + "\"";
}

void OptionReader::read(const json& object, const std::string& source) const {
  if (!object.is_object()) throw InputError(source, "", "expected an object of options, got " + std::string(object.type_name()));
  std::vector<std::pair<std::size_t, std::string>> given;  // declaration, value text
  std::vector<bool> set(keys_.size(), false);
  for (auto it = object.begin(); it != object.end(); ++it) {
    const auto at = std::find(keys_.begin(), keys_.end(), it.key());
    if (at == keys_.end()) {
      std::string known;
      for (const auto& k : keys_) known += (known.empty() ? "" : ", ") + k;
      throw InputError(source, "/" + it.key(), "unknown option (expected one of: " + known + ")");
    }
    const auto i = static_cast<std::size_t>(at - keys_.begin());
    const bool is_switch = checks_[i]->kind == OptionKind::Flag;
    const std::string text = value_text(*it, is_switch, source, it.key());
    if (const std::string why = option_value_error(*checks_[i], text); !why.empty()) throw InputError(source, "/" + it.key(), why);
    if (!is_switch || text == "true") set[i] = true;
    given.emplace_back(i, text);
  }
  auto is_set = [&](const std::string& long_name) {
    for (std::size_t j = 0; j < keys_.size(); ++j)
      if (set[j] && "--" + keys_[j] == long_name) return true;
    return false;
  };
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    if (!set[i]) continue;
    for (const auto& other : *excludes_[i])
      if (is_set(other)) throw InputError(source, "/" + keys_[i], "--" + keys_[i] + " excludes " + other);
    for (const auto& other : *needs_[i])
      if (!is_set(other)) throw InputError(source, "/" + keys_[i], "--" + keys_[i] + " requires " + other);
  }
  for (const auto& [i, text] : given) setters_[i](text);
}

}  // namespace shardsim
