// tests/common/input_limits_test.cpp — unbounded or hostile input: size caps, devices, pipes, and error
// messages that stay one short printable line whatever the input held.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <functional>

#include "common/embedded.hpp"
#include "tests/cli_runner.hpp"
#include "common/input_error.hpp"
#include "workloads/request_trace.hpp"

using namespace shardsim;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("input limits: files over the cap, devices and directories are refused by name") {
  const test::TempDir d("limits");
  fs::path f = d.path / "big.json";
  { std::ofstream(f) << std::string(5000, ' ') << "{}"; }
  std::string e = error_of([&] { read_text_file(f.string(), 4096); });
  CHECK(e.find("is 5002 bytes, more than the 4096 bytes") != std::string::npos);  // the cap is named
  CHECK(read_text_file(f.string()).size() == 5002);
  CHECK(error_of([] { read_text_file("/dev/zero"); }).find("not a regular file or a pipe") != std::string::npos);
  CHECK(error_of([&] { read_text_file(d.path.string()); }).find("is a directory") != std::string::npos);
  CHECK(error_of([&] { read_text_file((d.path / "none").string()); }).find("cannot open") != std::string::npos);
}

TEST_CASE("input limits: error messages are one short printable line") {
  InputError huge("trace.csv", "line 2", "bad value \"" + std::string(1'000'000, 'x') + "\"");
  CHECK(std::string(huge.what()).size() < 1000);
  CHECK(std::string(huge.what()).find("bytes)") != std::string::npos);
  InputError ctrl("a\x1b[31mb.csv", "line\n1", "bell\a");
  std::string m = ctrl.what();
  CHECK(m.find('\x1b') == std::string::npos);
  CHECK(m.find('\n') == std::string::npos);
  CHECK(m.find('\a') == std::string::npos);
  CHECK(m.find("\\x1b") != std::string::npos);
  // UTF-8 is kept whole, never cut inside a character.
  InputError utf("f", "", std::string(299, 'a') + "é" + std::string(500, 'b'));
  std::string u = utf.what();
  CHECK(u.find("é") != std::string::npos);
  // Through a real loader: a CSV with a huge field and an escape sequence.
  const test::TempDir d("limits");
  fs::path csv = d.path / "t.csv";
  {
    std::ofstream o(csv);
    o << "TIMESTAMP,ContextTokens,GeneratedTokens\n0,5,3\n1,\x1b[2J" << std::string(300'000, '9') << "x,3\n";
  }
  std::string e = error_of([&] { load_request_trace(csv.string()); });
  CHECK(!e.empty());
  CHECK(e.size() < 2000);
  CHECK(e.find('\x1b') == std::string::npos);
}
