// common/display_text.hpp — text that came from outside, made safe to show and to record.
//
// Owns: valid_utf8(), name_problem() (what a display name may hold) and terminal_safe().
// Names read from input files, journals and outside optimizers (a model, a cluster, a plan, a
// scenario, an optimizer) reach the terminal, Markdown reports and JSON outputs. A name holding
// control bytes could drive a terminal (ESC, OSC, BEL: retitle, clear, recolour) and one that is not
// UTF-8 cannot be written as JSON, so loaders refuse both with name_problem(); text that is only
// shown (a file name, say) goes through terminal_safe(). Thread-safety: pure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace shardsim {

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
inline bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = 0;
    char32_t cp = 0, lo = 0;
    if (c < 0x80) { ++i; continue; }
    if (c >= 0xC2 && c <= 0xDF) n = 1, cp = c & 0x1F, lo = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, cp = c & 0x0F, lo = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, cp = c & 0x07, lo = 0x10000;
    else return false;
    if (i + static_cast<std::size_t>(n) >= s.size()) return false;  // cut short
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (cp < lo || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<std::size_t>(n) + 1;
  }
  return true;
}

// The length of the control character at s[i], 0 when there is none: C0 (below 0x20), DEL, or C1
// (U+0080–U+009F, encoded C2 80–C2 9F, which some terminals obey as ESC sequences).
inline std::size_t control_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x20 || c == 0x7f) return 1;
  if (c == 0xC2 && i + 1 < s.size()) {
    const auto d = static_cast<unsigned char>(s[i + 1]);
    if (d >= 0x80 && d <= 0x9F) return 2;
  }
  return 0;
}

// Why `name` cannot be a display name, or "" when it can: not empty, at most 4,096 bytes (a plan's
// name is its compact string, which can be long), UTF-8, no control characters.
inline std::string name_problem(std::string_view name) {
  if (name.empty()) return "must not be empty";
  if (name.size() > 4096) return "longer than 4,096 bytes (" + std::to_string(name.size()) + ")";
  if (!valid_utf8(name)) return "not UTF-8 text";
  for (std::size_t i = 0; i < name.size(); ++i)
    if (control_length(name, i)) return "holds a control character (a name is shown on terminals and in reports)";
  return "";
}

// `s` with control characters written as \xNN and bytes that are not UTF-8 as \xNN: safe to print.
inline std::string terminal_safe(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  auto escape = [&](unsigned char c) {
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  std::size_t i = 0;
  while (i < s.size()) {
    if (const std::size_t k = control_length(s, i)) {
      for (std::size_t j = 0; j < k; ++j) escape(static_cast<unsigned char>(s[i + j]));
      i += k;
      continue;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (c >= 0x80 && (i + n > s.size() || !valid_utf8(s.substr(i, n)))) {
      escape(c);
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace shardsim
