// common/readable_number.hpp — numbers for people: thousands separators, no scientific notation.
//
// Owns: readable(x, significant): fixed notation with `significant` significant digits (at least
// the whole integer part; trailing fractional zeros dropped), commas between thousands:
// 11170.3 → "11,170", 1.23456 → "1.235", 0.000123 → "0.000123", 2e13 → "20,000,000,000,000".
// Beyond 1e18 in magnitude (counts of genomes) it falls back to "1.98e+21". readable_bytes():
// the same for byte counts, in decimal units; binary_bytes(): message sizes in KiB / MiB / GiB; formatted(): one number printf-style, for tables
// whose columns need a fixed form. Thread-safety: pure.
#pragma once

#include <string>

namespace shardsim {

std::string readable(double x, int significant = 4);
// Bytes in decimal units with three significant digits: "73.6 GB", "5.57 TB", "0 B".
std::string readable_bytes(double bytes);
// A message size in binary units, as nccl-tests sizes are named: "8 KiB", "1.5 MiB", "8 GiB", "512 B".
std::string binary_bytes(double bytes);
// One number printf-style, e.g. formatted("%.1f%%", 12.34) = "12.3%" (any length).
std::string formatted(const char* format, double x);

}  // namespace shardsim
