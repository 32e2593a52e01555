// common/input_error.hpp — the one error type for bad user input.
//
// Owns: InputError, thrown by every loader (cluster, model, plan, traces) and by command-line
// parsing of specs. Its message is one line: "<source>: <field>: <reason>", where <source> is a
// file path (or a spec such as "synthetic:rate=…" or "embedded:…"), <field> a JSON pointer
// ("/fabric/levels"), a "line N" / "line N, column C" location, or a parameter name.
// The command line prints it prefixed with "error: " and exits with code 2. Parts are cleaned:
// control characters escaped, each part at most ~300 bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "common/display_text.hpp"

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
  // One short, printable line whatever the input held: control characters and bytes that are not
  // UTF-8 become \xNN (terminal_safe: a message cannot drive a terminal), and a part longer than
  // kMaxPart bytes is cut at a character boundary with "…" (a 200 MB CSV field was echoed whole).
  static constexpr std::size_t kMaxPart = 300;
  static std::string clean(const std::string& in) {
    const std::string head = in.size() > 4 * kMaxPart ? in.substr(0, 4 * kMaxPart) : in;
    std::string out = terminal_safe(head);
    if (out.size() <= kMaxPart && head.size() == in.size()) return out;
    std::size_t cut = std::min(kMaxPart, out.size());
    while (cut < out.size() && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) ++cut;  // a character whole
    return out.substr(0, cut) + "… (" + std::to_string(in.size()) + " bytes)";
  }
  std::string source_, field_, reason_;
};

}  // namespace shardsim
