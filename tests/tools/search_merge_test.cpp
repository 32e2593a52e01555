// tests/tools/search_merge_test.cpp — `shardsim search merge`: studies of one problem combined are the
// study that ran all their seeds, in any order; other problems and non-product unions are refused.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/json_reader.hpp"
#include "tests/cli_runner.hpp"

using namespace shardsim;

namespace {

// The report without its wall times: the "Objective:" line, and the main table's last column
// (its rows are those with a spread "min · q1 · q3 · max").
std::string without_wall(const std::string& md) {
  std::istringstream in(md);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.rfind("Objective:", 0) == 0) continue;
    if (line.find(" · ") != std::string::npos) line = line.substr(0, line.rfind(" | ", line.size() - 3));
    out += line + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("search merge: two seed ranges merged equal one study of all seeds, whatever the order") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("shardsim_merge_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string base = "search --objective drain --model mixtral-8x7b --cluster dgx-h100:1 --optimizers megatron,random,sa --budget 8 "
                           "--requests 40 --fidelity analytic --quiet ";
  auto a = test::run_cli(base + "--seeds 1..2 --out " + (root / "a").string());
  auto b = test::run_cli(base + "--seeds 3..4 --out " + (root / "b").string());
  auto all = test::run_cli(base + "--seeds 4 --out " + (root / "all").string());
  REQUIRE(a.exit_code == 0);
  REQUIRE(b.exit_code == 0);
  REQUIRE(all.exit_code == 0);
  auto ab = test::run_cli("search merge " + (root / "a").string() + " " + (root / "b").string() + " --out " + (root / "ab").string());
  // The search's own options may follow the folders (--quiet is the search's, not merge's).
  auto ba = test::run_cli("search merge " + (root / "b").string() + " " + (root / "a").string() + " --out " + (root / "ba").string() +
                          " --quiet");
  REQUIRE(ab.exit_code == 0);
  REQUIRE(ba.exit_code == 0);
  // Every evaluation of every run, in order, is the one-study's: nothing simulated again, nothing lost.
  CHECK(test::slurp(root / "ab" / "anytime.csv") == test::slurp(root / "all" / "anytime.csv"));
  CHECK(test::slurp(root / "ba" / "anytime.csv") == test::slurp(root / "all" / "anytime.csv"));
  CHECK(test::slurp(root / "ab" / "journal.jsonl") == test::slurp(root / "ba" / "journal.jsonl"));
  const json m = json::parse(test::slurp(root / "ab" / "results.json"));
  const json one = json::parse(test::slurp(root / "all" / "results.json"));
  REQUIRE(m["runs"].size() == 1 + 2 * 4);  // megatron, in both studies, kept once
  for (std::size_t i = 0; i < m["runs"].size(); ++i) {
    CHECK(m["runs"][i]["optimizer"] == one["runs"][i]["optimizer"]);
    CHECK(m["runs"][i]["seed"] == one["runs"][i]["seed"]);
    CHECK(m["runs"][i]["best_objective"] == one["runs"][i]["best_objective"]);
  }
  CHECK(m["optimizers"][2]["test"] == one["optimizers"][2]["test"]);
  CHECK(m["optimizers"][2]["median_interval_95"] == one["optimizers"][2]["median_interval_95"]);
  CHECK(without_wall(test::slurp(root / "ab" / "summary.md")) == without_wall(test::slurp(root / "ba" / "summary.md")));

  // Another problem (more requests) is refused, naming the journal and the input.
  auto c = test::run_cli("search --objective drain --model mixtral-8x7b --cluster dgx-h100:1 --optimizers megatron,random,sa --budget 8 "
                         "--requests 41 --fidelity analytic --quiet --seeds 5..6 --out " + (root / "c").string());
  REQUIRE(c.exit_code == 0);
  auto bad = test::run_cli("search merge " + (root / "a").string() + " " + (root / "c").string() + " --out " + (root / "x").string());
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("/inputs/requests") != std::string::npos);
  CHECK_FALSE(fs::exists(root / "x" / "journal.jsonl"));
  // A union that is not every optimizer × one range of seeds is refused.
  auto d = test::run_cli("search --objective drain --model mixtral-8x7b --cluster dgx-h100:1 --optimizers megatron,random --budget 8 "
                         "--requests 40 --fidelity analytic --quiet --seeds 3..4 --out " + (root / "d").string());
  REQUIRE(d.exit_code == 0);
  auto skew = test::run_cli("search merge " + (root / "a").string() + " " + (root / "d").string() + " --out " + (root / "y").string());
  CHECK(skew.exit_code == 2);
  CHECK(skew.err.find("not every optimizer × one range of seeds") != std::string::npos);
  fs::remove_all(root);
}
