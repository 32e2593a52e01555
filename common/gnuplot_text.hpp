// common/gnuplot_text.hpp — a string written into a gnuplot script as data, never as code.
//
// Owns: gnuplot_quoted(). Names from input files, journals and outside optimizers reach plot titles
// and labels. gnuplot performs no backquote or macro substitution inside a single-quoted string and
// knows one escape there ('' for '), so the string is single-quoted with its quotes doubled; control
// bytes (a newline would end the command and start another) become spaces.
#pragma once

#include <string>

namespace shardsim {

// `s` as a gnuplot single-quoted string literal, quotes included: 'it''s'.
inline std::string gnuplot_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\'') q += "''";
    else if (u < 0x20 || u == 0x7f) q += ' ';
    else q += c;
  }
  return q + "'";
}

}  // namespace shardsim
