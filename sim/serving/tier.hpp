// sim/serving/tier.hpp — the scoring tiers (docs/simulation.md, "Fidelity tiers"), one name each.
//
// Owns: Tier, its names and parse_tier(), the one place a tier's text is read (every command,
// scenario file and evaluator problem), each with the tiers it offers. The names are those of
// the outputs ("fidelity" in JSON, the reports' headers). Thread-safety: pure functions.
#pragma once

#include <initializer_list>
#include <string>

namespace shardsim {

// analytic: the analytic executor only; simgrid: the analytic pass and a stratified sample of
// steps in SimGrid that rescales it; full: every step whole in SimGrid.
enum class Tier { Analytic, Simgrid, Full };

const char* to_string(Tier t);

// `text` as one of `offered`; otherwise InputError(source, text, "unknown tier (expected analytic
// or simgrid; WHY)"), naming the offered ones and, when given, why the others are not.
Tier parse_tier(const std::string& text, std::initializer_list<Tier> offered, const std::string& source,
                const std::string& why = "");
// Why comparisons and sweeps offer no full tier.
inline constexpr const char* kNoFullTier = "full would take hours per scenario";
// Any of the three.
Tier parse_tier(const std::string& text, const std::string& source);

}  // namespace shardsim
