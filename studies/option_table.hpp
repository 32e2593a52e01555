// studies/option_table.hpp — options declared once: name, help, the check a value must pass and
// the field it sets; read here from a JSON object (the open evaluator, the Python module) and
// registered on a command line by tools/cli/option_table_cli.hpp, so that a command and the
// evaluator accept, refuse and explain a value alike.
//
// Owns: OptionDecl<T> (one declaration), OptionCheck and option_value_error() (the check and its
// one-line reason), OptionReader (a JSON object of options → the declared fields).
//
// A declaration's kind follows its field: std::string (any text, or one of `choices`), int
// (a decimal integer in [lo, hi]), double (a decimal number in [lo, hi]: no hex, inf, nan or
// padding), unsigned long long (a seed: a whole number in [0, 2^64 − 1]), bool (a switch).
// `needs` and `excludes` name other options of the same table by their long name ("--rate").
#pragma once

#include <functional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "common/json_reader.hpp"

namespace shardsim {

enum class OptionKind { Text, Integer, Real, Seed, Flag };

// What a value must be, and the reason when it is not.
struct OptionCheck {
  OptionKind kind = OptionKind::Text;
  double lo = 0, hi = -1;            // Integer and Real: the range (inclusive); lo > hi: any value
  std::vector<std::string> choices;  // Text: the allowed values; empty: any text
};

// "" when `text` is a valid value, else why not ("expected an integer, got \"x\"", "value 0 out
// of range [1, 10000000]", "expected one of poisson, trace, got \"burst\"").
std::string option_value_error(const OptionCheck& check, const std::string& text);

template <class T>
struct OptionDecl {
  using Field = std::variant<std::string T::*, int T::*, double T::*, unsigned long long T::*, bool T::*>;
  std::string names;  // as the command line spells them, the long name first: "--model,-m"
  std::string help;
  Field field;
  OptionCheck check;  // its kind is set from `field` by decl()
  bool show_default = false;
  std::vector<std::string> needs, excludes;  // long names of options of the same table
  bool load = false;                         // a load option (a command that sets the load leaves these out)

  std::string long_name() const { return names.substr(0, names.find(',')); }  // "--model"
  std::string key() const { return long_name().substr(2); }                   // "model"
};

// A declaration of `field`, its kind taken from the field's type.
template <class T, class V>
OptionDecl<T> decl(std::string names, V T::*field, std::string help) {
  OptionDecl<T> d;
  d.names = std::move(names);
  d.help = std::move(help);
  d.field = field;
  if constexpr (std::is_same_v<V, std::string>) d.check.kind = OptionKind::Text;
  else if constexpr (std::is_same_v<V, int>) d.check.kind = OptionKind::Integer;
  else if constexpr (std::is_same_v<V, double>) d.check.kind = OptionKind::Real;
  else if constexpr (std::is_same_v<V, unsigned long long>) d.check.kind = OptionKind::Seed;
  else d.check.kind = OptionKind::Flag;
  return d;
}

// Sets the declared field of `target` from `text`, which passed option_value_error().
template <class T>
void set_option(const OptionDecl<T>& d, T& target, const std::string& text) {
  std::visit(
      [&](auto field) {
        using V = std::remove_reference_t<decltype(target.*field)>;
        if constexpr (std::is_same_v<V, std::string>) target.*field = text;
        else if constexpr (std::is_same_v<V, int>) target.*field = std::stoi(text);
        else if constexpr (std::is_same_v<V, double>) target.*field = std::stod(text);
        else if constexpr (std::is_same_v<V, unsigned long long>) target.*field = std::stoull(text);
        else target.*field = text == "true";
      },
      d.field);
}

// Reads a JSON object of options (keys are long names without dashes) against one or more
// declaration tables, each bound to its own target: every key known, of the right JSON type, a
// valid value, its `needs` given and none of its `excludes`; otherwise InputError(source,
// "/<key>", reason), before any field is set. A number is taken as its shortest decimal text (1e3
// as 1000); true/false only for a switch, and a switch set to false is as if not given.
class OptionReader {
 public:
  template <class T>
  OptionReader& add(const std::vector<OptionDecl<T>>& decls, T& target) {
    for (const auto& d : decls) {
      keys_.push_back(d.key());
      checks_.push_back(&d.check);
      needs_.push_back(&d.needs);
      excludes_.push_back(&d.excludes);
      setters_.push_back([&d, &target](const std::string& text) { set_option(d, target, text); });
    }
    return *this;
  }
  void read(const json& object, const std::string& source) const;

 private:
  std::vector<std::string> keys_;
  std::vector<const OptionCheck*> checks_;
  std::vector<const std::vector<std::string>*> needs_, excludes_;
  std::vector<std::function<void(const std::string&)>> setters_;
};

}  // namespace shardsim
