// common/text_number.hpp — numbers from command-line text, with one-line errors.
//
// Owns: parse_int_in / parse_real_in: the whole text must be the number, inside [lo, hi];
// otherwise InputError(source, field, "expected an integer, got \"x\"" or "value x out of
// range [lo, hi]"). Used by the compact plan string and engine settings.
#pragma once

#include <cmath>
#include <string>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"

namespace shardsim {

inline long long parse_int_in(const std::string& v, const std::string& source, const std::string& field, long long lo,
                              long long hi) {
  std::size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (...) {
    used = 0;
  }
  if (v.empty() || used != v.size()) throw InputError(source, field, "expected an integer, got \"" + v + "\"");
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
  if (v.empty() || used != v.size() || !std::isfinite(x))
    throw InputError(source, field, "expected a number, got \"" + v + "\"");
  if (x < lo || x > hi)
    throw InputError(source, field, "value " + v + " out of range [" + format_number(lo) + ", " + format_number(hi) + "]");
  return x;
}

}  // namespace shardsim
