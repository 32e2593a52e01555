// tests/tools/round_trip_test.cpp — every file shardsim writes in one of its input formats loads back as
// that input, and writing it again gives the same file (issue 40: "any output shardsim writes
// loads back"): clusters (both JSON styles), models, routing traces, a search's best plan.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/cli_runner.hpp"

using namespace shardsim;
namespace fs = std::filesystem;

namespace {

// Runs `args`; the test stops here when it fails.
test::CliResult ok(const std::string& args) {
  test::CliResult r = test::run_cli(args);
  INFO(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

}  // namespace

TEST_CASE("round trip: a cluster written as JSON (both styles) loads back and writes the same file again") {
  const test::TempDir s("roundtrip");
  ok("topo --cluster dgx-h100:4,oversub=2 --json " + s("c.json") + " --json-links " + s("l.json"));
  const test::CliResult a = ok("topo --cluster " + s("c.json") + " --json " + s("c2.json") + " --json-links " + s("l2.json"));
  CHECK(test::slurp(s("c2.json")) == test::slurp(s("c.json")));
  CHECK(test::slurp(s("l2.json")) == test::slurp(s("l.json")));
  const test::CliResult b = ok("topo --cluster " + s("l.json") + " --json-links " + s("l3.json"));
  CHECK(test::slurp(s("l3.json")) == test::slurp(s("l.json")));
  CHECK(a.out.find("32 GPUs") != std::string::npos);
  CHECK(b.out.find("32 GPUs") != std::string::npos);
}

TEST_CASE("round trip: a model written as JSON loads back, writes the same file and simulates the same") {
  const test::TempDir s("roundtrip");
  for (const std::string m : {"mixtral-8x7b", "deepseek-v3"}) {
    CAPTURE(m);
    ok("models --show " + m + " --json " + s(m + ".json"));
    ok("models --show " + s(m + ".json") + " --json " + s(m + "-2.json"));
    CHECK(test::slurp(s(m + "-2.json")) == test::slurp(s(m + ".json")));
  }
  const std::string run = " --cluster dgx-h100:1 --requests 20 --offline --plan tp=8";
  const test::CliResult preset = ok("simulate --model mixtral-8x7b" + run);
  const test::CliResult file = ok("simulate --model " + s("mixtral-8x7b.json") + run);
  const auto tok_s = [](const std::string& out) { return out.substr(out.find("throughput")); };
  CHECK(tok_s(file.out).substr(0, 200) == tok_s(preset.out).substr(0, 200));
}

TEST_CASE("round trip: a routing trace written by trace generate loads back and re-encodes to the same bytes") {
  const test::TempDir s("roundtrip");
  ok("trace generate --routing synthetic:zipf=1.0,seed=7 --model mixtral-8x7b --requests 10 --out " + s("r.ssrt"));
  ok("trace generate --routing " + s("r.ssrt") + " --model mixtral-8x7b --requests 10 --out " + s("r2.ssrt"));
  CHECK(test::slurp(s("r2.ssrt")) == test::slurp(s("r.ssrt")));
  ok("trace stats --routing " + s("r.ssrt") + " --model mixtral-8x7b --ep 8");
}

TEST_CASE("round trip: a search's best-plan.json is a plan file that plan check and simulate take") {
  const test::TempDir s("roundtrip");
  ok("search --objective drain --model mixtral-8x7b --cluster dgx-h100:1 --requests 20 --optimizers megatron,random "
     "--budget 6 --seeds 1 --quiet --out " + s("study"));
  const std::string best = s("study/best-plan.json");
  REQUIRE(fs::exists(best));
  ok("simulate --model mixtral-8x7b --cluster dgx-h100:1 --requests 10 --plan " + best);
  ok("plan check --model mixtral-8x7b --cluster dgx-h100:1 --plan " + best);
}
