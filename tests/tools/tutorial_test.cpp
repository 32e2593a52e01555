// tests/tools/tutorial_test.cpp — every command in docs/tutorial/ runs, and the figures the lessons quote
// still hold within the tolerance each lesson states, so the lessons never go stale.
//
// A lesson marks what is checked with ```console blocks: a line "$ shardsim …" is a command; the
// lines after it, up to the next command or the end of the block, are excerpts of its output.
// Each excerpt must match one output line: its words exactly, its numbers within the lesson's
// "Tolerance: ±N%" (thousands separators allowed), and "…" anything.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_runner.hpp"

using namespace shardsim;

namespace {

struct Check {
  std::string command;                 // arguments after "shardsim"
  std::vector<std::string> excerpts;   // lines expected in its output
};

struct Lesson {
  std::string file;
  double tolerance = -1;               // relative, from "Tolerance: ±N%"
  std::vector<Check> checks;
};

Lesson read_lesson(const std::filesystem::path& path) {
  Lesson l;
  l.file = path.filename().string();
  std::ifstream in(path);
  bool in_console = false;
  const std::regex tol(R"(Tolerance: ±([0-9.]+)%)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (l.tolerance < 0 && std::regex_search(line, m, tol)) l.tolerance = std::stod(m[1]) / 100;
    if (line.rfind("```", 0) == 0) {
      in_console = !in_console && line == "```console";
      continue;
    }
    if (!in_console) continue;
    if (line.rfind("$ shardsim ", 0) == 0) l.checks.push_back({line.substr(11), {}});
    else if (!line.empty() && !l.checks.empty()) l.checks.back().excerpts.push_back(line);
  }
  return l;
}

// The excerpt as a pattern: words literal, numbers captured, "…" anything; and its numbers.
std::regex pattern_of(const std::string& excerpt, std::vector<double>& numbers) {
  static const std::regex number(R"(-?[0-9][0-9,]*(\.[0-9]+)?)");
  std::string re;
  std::size_t at = 0;
  auto literal = [&](const std::string& text) {
    std::size_t pos = 0;
    for (std::size_t e; (e = text.find("…", pos)) != std::string::npos; pos = e + std::string("…").size())
      re += std::regex_replace(text.substr(pos, e - pos), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") + ".*";
    re += std::regex_replace(text.substr(pos), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
  };
  for (std::sregex_iterator it(excerpt.begin(), excerpt.end(), number), end; it != end; ++it) {
    literal(excerpt.substr(at, static_cast<std::size_t>(it->position()) - at));
    re += R"((-?[0-9][0-9,]*(?:\.[0-9]+)?))";
    std::string digits = it->str();
    digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
    numbers.push_back(std::stod(digits));
    at = static_cast<std::size_t>(it->position() + it->length());
  }
  literal(excerpt.substr(at));
  return std::regex(re);
}

// Empty when some output line matches the excerpt within tolerance, else why not.
std::string mismatch(const std::string& output, const std::string& excerpt, double tolerance) {
  std::vector<double> want;
  const std::regex re = pattern_of(excerpt, want);
  std::istringstream lines(output);
  std::string closest;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    bool ok = true;
    for (std::size_t i = 0; i < want.size(); ++i) {
      std::string digits = m[i + 1].str();
      digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
      const double got = std::stod(digits);
      ok = ok && std::abs(got - want[i]) <= tolerance * std::max(std::abs(want[i]), 1e-9) + 1e-9;
    }
    if (ok) return "";
    closest = line;
  }
  return closest.empty() ? "no line has this shape" : "closest line: " + closest;
}

}  // namespace

TEST_CASE("tutorial: every lesson's commands run and its quoted figures hold" * doctest::test_suite("heavy")) {
  const std::filesystem::path dir = std::filesystem::path(SHARDSIM_SOURCE_DIR) / "docs" / "tutorial";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".md" && e.path().filename() != "README.md") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  CHECK(files.size() >= 7);
  for (const auto& f : files) {
    const Lesson l = read_lesson(f);
    CAPTURE(l.file);
    REQUIRE(l.tolerance > 0);  // every lesson states how close its figures must stay
    CHECK_FALSE(l.checks.empty());
    for (const auto& c : l.checks) {
      CAPTURE(c.command);
      const auto r = test::run_cli(c.command);
      REQUIRE(r.exit_code == 0);
      CHECK_FALSE(c.excerpts.empty());
      for (const auto& x : c.excerpts) {
        CAPTURE(x);
        CHECK(mismatch(r.out, x, l.tolerance) == "");
      }
    }
  }
}

TEST_CASE("tutorial: the excerpt matcher tells a stale figure from a fresh one") {
  const std::string out = "TPOT ms        p50 21.43  p90 57.75  p99 229.92\nsteady state   3,831 output tok/s (239.4 per GPU)\n";
  CHECK(mismatch(out, "TPOT ms        p50 21.43  p90 57.75", 0.02) == "");
  CHECK(mismatch(out, "TPOT ms        p50 21.8", 0.02) == "");              // within 2%
  CHECK(mismatch(out, "TPOT ms        p50 23.0", 0.02) != "");              // 7% off
  CHECK(mismatch(out, "steady state   3,800 output tok/s …", 0.02) == "");  // separators, and "…"
  CHECK(mismatch(out, "steady state   3,831 input tok/s", 0.02) != "");     // other words
}
