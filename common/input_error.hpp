// common/input_error.hpp — the one error type for bad user input.
//
// Owns: InputError, thrown by every loader (cluster, model, plan, traces) and by command-line
// parsing of specs. Its message is one line: "<source>: <field>: <reason>", where <source> is a
// file path (or a spec such as "synthetic:rate=…" or "embedded:…"), <field> a JSON pointer
// ("/fabric/levels"), a "line N" / "line N, column C" location, or a parameter name.
// The command line prints it prefixed with "error: " and exits with code 2. Parts are cleaned:
// control bytes escaped, each part at most ~300 bytes.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace shardsim {

class InputError : public std::runtime_error {
 public:
  InputError(std::string source, std::string field, std::string reason)
      : std::runtime_error(compose(source, field, reason)),
        source_(std::move(source)), field_(std::move(field)), reason_(std::move(reason)) {}

  const std::string& source() const { return source_; }
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  static std::string compose(const std::string& s, const std::string& f, const std::string& r) {
    std::string out = clean(s.empty() ? std::string("<input>") : s);
    if (!f.empty()) out += ": " + clean(f);
    out += ": " + clean(r);
    return out;
  }
  // One short, printable line whatever the input held: control bytes become \xNN (so a message
  // cannot drive a terminal), and a part longer than kMaxPart bytes is cut at a character
  // boundary with "…" (a 200 MB CSV field was echoed whole).
  static constexpr std::size_t kMaxPart = 300;
  static std::string clean(const std::string& in) {
    std::string out;
    const char* hex = "0123456789abcdef";
    for (std::size_t i = 0; i < in.size(); ++i) {
      const auto c = static_cast<unsigned char>(in[i]);
      if (out.size() >= kMaxPart && (c & 0xC0) != 0x80) {  // not inside a UTF-8 sequence
        out += "… (" + std::to_string(in.size()) + " bytes)";
        break;
      }
      if (c < 0x20 || c == 0x7f) {
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
      } else {
        out += static_cast<char>(c);
      }
    }
    return out;
  }
  std::string source_, field_, reason_;
};

}  // namespace shardsim
