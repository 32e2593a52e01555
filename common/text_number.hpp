// common/text_number.hpp — numbers from command-line text, with one-line errors.
//
// Owns: parse_int_in / parse_real_in: the whole text must be the number, inside [lo, hi];
// otherwise InputError(source, field, "expected an integer, got \"x\"" or "value x out of
// range [lo, hi]"). Decimal only: hexadecimal ("0x10"), "inf", "nan" and surrounding spaces are
// refused (std::stod would take them). Used by the compact plan string, engine settings and --slo.
#pragma once

#include <cctype>
#include <cmath>
#include <string>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"

namespace shardsim {

// True when `v` can only be a decimal number: starts with a digit, a sign or a point, no x/X/p/P.
inline bool decimal_text(const std::string& v) {
  if (v.empty()) return false;
  const char c = v.front();
  if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.')) return false;
  return v.find_first_of("xXpP") == std::string::npos;
}

inline long long parse_int_in(const std::string& v, const std::string& source, const std::string& field, long long lo,
                              long long hi) {
  std::size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (...) {
    used = 0;
  }
  if (!decimal_text(v) || used != v.size()) throw InputError(source, field, "expected an integer, got \"" + v + "\"");
  if (x < lo || x > hi)
    throw InputError(source, field, "value " + v + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

inline double parse_real_in(const std::string& v, const std::string& source, const std::string& field, double lo, double hi) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (...) {
    used = 0;
  }
  if (!decimal_text(v) || used != v.size() || !std::isfinite(x))
    throw InputError(source, field, "expected a number, got \"" + v + "\"");
  if (x < lo || x > hi)
    throw InputError(source, field, "value " + v + " out of range [" + format_number(lo) + ", " + format_number(hi) + "]");
  return x;
}

}  // namespace shardsim
