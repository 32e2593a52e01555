// tests/common/readable_number_test.cpp — numbers for people: separators, significant digits, no exponent.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "common/readable_number.hpp"

using namespace shardsim;

TEST_CASE("readable: thousands separators and significant digits, never an exponent for ordinary figures") {
  CHECK(readable(11170.3) == "11,170");           // was 1.117e+04
  CHECK(readable(1234567.0) == "1,234,567");      // the whole integer part is kept
  CHECK(readable(-12345.6) == "-12,346");
  CHECK(readable(999.96) == "1,000");             // rounding carries into a new group
  CHECK(readable(1.23456) == "1.235");
  CHECK(readable(45.4) == "45.4");                // no trailing zeros
  CHECK(readable(0.000123) == "0.000123");
  CHECK(readable(2e13) == "20,000,000,000,000");  // a genome count
  CHECK(readable(0.0) == "0");
  CHECK(readable(-0.00001, 2) == "-0.00001");
  CHECK(readable(8683.0, 5) == "8,683");
  CHECK(readable(1.98e21) == "1.98e+21");         // beyond 1e18: an exponent after all
  CHECK(readable(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(readable(std::nan("")) == "nan");
}
