// tests/tools/search_compare_test.cpp — `shardsim search compare`: arms of hand-made journals whose
// statistics are known (an arm that ends higher and gets to 99% sooner in every run), the cut to a
// budget, what may and may not differ between the studies.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/json_reader.hpp"
#include "tests/cli_runner.hpp"

using namespace shardsim;

namespace {

namespace fs = std::filesystem;

// A journal of one optimizer's runs (seeds 1…), run i evaluating the objectives runs[i] in order.
void write_study(const fs::path& dir, const std::string& optimizer, const std::vector<std::vector<double>>& runs,
                 const json& inputs) {
  fs::create_directories(dir);
  json header = {{"schema", "shardsim.search-journal/1"}, {"args", json::object()}, {"inputs", inputs}, {"runs", json::array()}};
  std::string lines;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    header["runs"].push_back({{"optimizer", optimizer}, {"seed", r + 1}, {"budget", 0}});
    for (std::size_t e = 0; e < runs[r].size(); ++e) {
      char hex[64];
      std::snprintf(hex, sizeof hex, "%a", runs[r][e]);
      const json line = {{"run", r}, {"optimizer", optimizer}, {"seed", r + 1}, {"eval", e + 1}, {"key", std::to_string(r) + "." + std::to_string(e)},
                         {"genes", json::array({static_cast<int>(e)})}, {"feasible", true}, {"objective", hex}, {"violation", "0x0p+0"},
                         {"failed", false}, {"reason", ""}, {"sampled", 0}, {"sample_failures", 0}, {"sample_error", ""}};
      lines += line.dump() + "\n";
    }
  }
  std::ofstream(dir / "journal.jsonl") << header.dump() << "\n" << lines;
}

json inputs_with(const std::string& params, int requests = 40) {
  return {{"model", "mixtral-8x7b"}, {"cluster", "dgx-h100:1"}, {"objective", "drain"}, {"budget", 5},
          {"requests", requests},    {"params", params},         {"policy_in", ""},           {"optimizers", "sa"},
          {"seeds", "1..4"}};
}

// The table row of `arm` (its cells, trimmed).
std::vector<std::string> row_of(const std::string& md, const std::string& arm) {
  std::istringstream in(md);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| " + arm + " |", 0) != 0) continue;
    std::vector<std::string> cells;
    std::size_t at = 1;
    for (std::size_t next; (next = line.find(" | ", at)) != std::string::npos; at = next + 2) cells.push_back(line.substr(at + 1, next - at - 1));
    cells.push_back(line.substr(at + 1, line.size() - at - 3));
    return cells;
  }
  return {};
}

}  // namespace

TEST_CASE("search compare: known arms — the better one ends higher and gets to 99% sooner, by hand-checked U, p and A12") {
  const fs::path root = fs::temp_directory_path() / ("shardsim_compare_" + std::to_string(::getpid()));
  fs::remove_all(root);
  // Reference: constant 90…93, never within 99% of the best known (100).
  write_study(root / "cold", "sa", {{90, 90, 90, 90, 90}, {91, 91, 91, 91, 91}, {92, 92, 92, 92, 92}, {93, 93, 93, 93, 93}},
              inputs_with(""));
  // The other arm reaches 99 at evaluations 2, 3, 4 and 5 and ends at 100, 99.8, 99.5, 99.2.
  write_study(root / "tuned", "sa",
              {{95, 100, 100, 100, 100}, {95, 96, 99.8, 99.8, 99.8}, {95, 96, 97, 99.5, 99.5}, {95, 96, 97, 98, 99.2}},
              inputs_with("sa.restart=0.5"));
  auto r = test::run_cli("search compare " + (root / "cold").string() + ":sa " + (root / "tuned").string() + " --out " +
                         (root / "table.md").string());
  REQUIRE(r.exit_code == 0);
  CHECK(test::slurp(root / "table.md") == r.out);
  CHECK(r.out.find("cut to 5 evaluations") != std::string::npos);
  CHECK(r.out.find("Best known within that: 100 (sa @ tuned, seed 1); target 99 (99%)") != std::string::npos);
  const auto ref = row_of(r.out, "sa @ cold"), tuned = row_of(r.out, "sa @ tuned");
  REQUIRE(ref.size() == 12);
  REQUIRE(tuned.size() == 12);
  CHECK(ref[1] == "default settings");
  CHECK(ref[3].rfind("91.5 ", 0) == 0);      // median of 90, 91, 92, 93
  CHECK(ref[4] == "0/4");
  CHECK(ref[5] == "–");
  CHECK(tuned[1] == "--param sa.restart=0.5");
  CHECK(tuned[3].rfind("99.65 ", 0) == 0);   // median of 100, 99.8, 99.5, 99.2
  CHECK(tuned[4] == "4/4");
  CHECK(tuned[5].rfind("3.5 ", 0) == 0);     // median of 2, 3, 4, 5
  // Best values: every tuned run beats every reference run, no ties: U = 16 of 16, A12 = 1, exact
  // two-sided p = 2 / C(8, 4) = 2/70.
  CHECK(tuned[6] == "0.0286");
  CHECK(tuned[7] == "1.00");
  CHECK(tuned[8] == "ends higher");
  // Evaluations to 99%: the reference never gets there (tied at "later than all"), so the normal
  // approximation with the tie correction: z = (16 − 8 − ½) / √(16/12 · (9 − 60/56)) = 2.307, p = 0.0211.
  CHECK(tuned[9] == "0.0211 ≈");
  CHECK(tuned[10] == "1.00");
  CHECK(tuned[11] == "sooner");

  // Cut to 3 evaluations: the tuned runs stand at 100, 99.8, 97, 97; two reached 99 (at 2 and 3).
  auto cut = test::run_cli("search compare " + (root / "tuned").string() + " " + (root / "cold").string() + " --budget 3");
  REQUIRE(cut.exit_code == 0);
  const auto t3 = row_of(cut.out, "sa @ tuned");
  REQUIRE(t3.size() == 12);
  CHECK(t3[3].rfind("98.4 ", 0) == 0);
  CHECK(t3[4] == "2/4");
  CHECK(t3[5].rfind("2.5 ", 0) == 0);
  CHECK(t3[11] == "the reference");

  // Another problem (more requests) is refused, naming the journal and the field; so is an
  // optimizer the study did not run; nothing is written.
  write_study(root / "other", "sa", {{90, 91, 92, 93, 94}}, inputs_with("", 41));
  auto bad = test::run_cli("search compare " + (root / "cold").string() + " " + (root / "other").string() + " --out " +
                           (root / "bad.md").string());
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("other/journal.jsonl: /inputs/requests") != std::string::npos);
  CHECK_FALSE(fs::exists(root / "bad.md"));
  auto none = test::run_cli("search compare " + (root / "cold").string() + ":ga " + (root / "tuned").string());
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("no run of optimizer \"ga\"") != std::string::npos);
  auto one = test::run_cli("search compare " + (root / "cold").string());
  CHECK(one.exit_code == 2);
  CHECK(one.err.find("one arm only") != std::string::npos);
  fs::remove_all(root);
}
