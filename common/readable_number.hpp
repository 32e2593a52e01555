// common/readable_number.hpp — numbers for people: thousands separators, no scientific notation.
//
// Owns: readable(x, significant): fixed notation with `significant` significant digits (at least
// the whole integer part; trailing fractional zeros dropped), commas between thousands:
// 11170.3 → "11,170", 1.23456 → "1.235", 0.000123 → "0.000123", 2e13 → "20,000,000,000,000".
// Beyond 1e18 in magnitude (counts of genomes) it falls back to "1.98e+21". Thread-safety: pure.
#pragma once

#include <string>

namespace shardsim {

std::string readable(double x, int significant = 4);

}  // namespace shardsim
