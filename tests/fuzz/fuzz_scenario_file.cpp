// tests/fuzz/fuzz_scenario_file.cpp — a `compare --scenarios` file (sim/whatif/scenario):
// parse_scenario_file, then scenarios_of and label_scenarios as compare does. A file that loads
// yields at least one scenario, each naming a model and a cluster, with a printable label.
#include "checks.hpp"
#include "common/display_text.hpp"
#include "sim/whatif/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  shardsim::ScenarioFile f;
  if (!fuzz::load("parse_scenario_file", [&] { f = shardsim::parse_scenario_file(text, "scenarios.json"); })) return 0;
  std::vector<shardsim::Scenario> s;
  if (!fuzz::load("scenarios_of", [&] { s = shardsim::scenarios_of(f, "offline", "megatron"); })) return 0;
  if (s.size() > 4096) return 0;  // a large product of axes: valid, but slow to label under ASan
  fuzz::must("label_scenarios", [&] { shardsim::label_scenarios(s); });
  for (const auto& x : s) {
    FUZZ_CHECK(!x.model.empty() && !x.cluster.empty(), "a scenario without a model or a cluster");
    FUZZ_CHECK(shardsim::terminal_safe(x.label) == x.label, "a label that is not printable: " + shardsim::terminal_safe(x.label));
  }
  return 0;
}
