// tests/tools/search_cli_test.cpp — `shardsim search` from the command line: an --out path is a path,
// never shell text.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/cli_runner.hpp"

using namespace shardsim::test;

TEST_CASE("search: an --out with quotes and shell syntax is used as a path and runs nothing") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("shardsim-inject-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string out = root.string() + "/x'; touch " + root.string() + "/INJECTED; echo '";
  CliResult r = run_cli("search --objective drain --model mixtral-8x7b --cluster dgx-h100:1 --optimizers megatron --budget 2 --seeds 1 "
                        "--requests 20 --fidelity analytic --quiet --out \"" + out + "\"");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(fs::exists(root / "INJECTED"));
  CHECK(fs::exists(fs::path(out) / "results.json"));
  CHECK(fs::exists(fs::path(out) / "anytime.png"));  // gnuplot ran in that directory (tools/deps.sh installs it)
  fs::remove_all(root);
}
