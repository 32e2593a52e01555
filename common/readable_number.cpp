// common/readable_number.cpp — readable(): fixed notation with thousands separators.
#include "common/readable_number.hpp"

#include <cmath>
#include <cstdio>

namespace shardsim {

std::string readable(double x, int significant) {
  if (!std::isfinite(x)) return std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf");
  char buf[64];
  if (std::fabs(x) >= 1e18) {
    std::snprintf(buf, sizeof buf, "%.*g", significant, x);
    return buf;
  }
  if (x == 0) return "0";
  const int whole = static_cast<int>(std::floor(std::log10(std::fabs(x)))) + 1;  // digits before the point
  const int decimals = whole >= significant ? 0 : significant - whole;
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {  // drop trailing fractional zeros, and the point with them
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") return "0";
  const std::size_t sign = s[0] == '-' ? 1 : 0;
  std::size_t point = s.find('.');
  if (point == std::string::npos) point = s.size();
  std::string out(s, 0, sign);
  for (std::size_t i = sign; i < point; ++i) {  // digits of the integer part, a comma before each group of three
    if (i > sign && (point - i) % 3 == 0) out += ',';
    out += s[i];
  }
  out.append(s, point, std::string::npos);
  return out;
}

std::string readable_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (std::fabs(b) >= 1000 && u < 5) {
    b /= 1000;
    ++u;
  }
  return readable(b, 3) + " " + units[u];
}

std::string binary_bytes(double b) {
  char buf[32];
  if (b >= (1 << 30)) std::snprintf(buf, sizeof buf, "%g GiB", b / (1 << 30));
  else if (b >= (1 << 20)) std::snprintf(buf, sizeof buf, "%g MiB", b / (1 << 20));
  else if (b >= (1 << 10)) std::snprintf(buf, sizeof buf, "%g KiB", b / (1 << 10));
  else std::snprintf(buf, sizeof buf, "%g B", b);
  return buf;
}

std::string formatted(const char* format, double x) {
  char buf[128];
  const int n = std::snprintf(buf, sizeof buf, format, x);
  if (n < static_cast<int>(sizeof buf)) return buf;
  std::string out(static_cast<std::size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, x);
  out.pop_back();
  return out;
}

}  // namespace shardsim
