// common/input_error.hpp — the one error type for bad user input.
//
// Owns: InputError, thrown by every loader (cluster, model, plan, traces) and by command-line
// parsing of specs. Its message is one line: "<source>: <field>: <reason>", where <source> is a
// file path (or a spec such as "synthetic:rate=…" or "embedded:…"), <field> a JSON pointer
// ("/fabric/levels"), a "line N" / "line N, column C" location, or a parameter name.
// The command line prints it prefixed with "error: " and exits with code 2.
#pragma once

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
    std::string out = s.empty() ? std::string("<input>") : s;
    if (!f.empty()) out += ": " + f;
    out += ": " + r;
    for (char& c : out)
      if (c == '\n' || c == '\r') c = ' ';  // always one line
    return out;
  }
  std::string source_, field_, reason_;
};

}  // namespace shardsim
