// common/text_case.hpp — case-insensitive names: lowercase().
//
// Owns: lowercase(), ASCII only (names of presets, shorthands and GPUs are ASCII; other bytes
// pass through unchanged). Thread-safety: pure.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>

namespace shardsim {

inline std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace shardsim
