// sim/serving/tier.cpp — the tiers' names, read and written in one place.
#include "sim/serving/tier.hpp"

#include "common/input_error.hpp"

namespace shardsim {

const char* to_string(Tier t) {
  switch (t) {
    case Tier::Analytic: return "analytic";
    case Tier::Simgrid: return "simgrid";
    case Tier::Full: return "full";
  }
  return "analytic";
}

Tier parse_tier(const std::string& text, std::initializer_list<Tier> offered, const std::string& source,
                const std::string& why) {
  std::string names;
  std::size_t i = 0;
  for (Tier t : offered) {
    if (text == to_string(t)) return t;
    names += (i == 0 ? "" : i + 1 == offered.size() ? " or " : ", ") + std::string(to_string(t));
    ++i;
  }
  throw InputError(source, text, "unknown tier (expected " + names + (why.empty() ? "" : "; " + why) + ")");
}

Tier parse_tier(const std::string& text, const std::string& source) {
  return parse_tier(text, {Tier::Analytic, Tier::Simgrid, Tier::Full}, source);
}

}  // namespace shardsim
