// tests/fuzz/fuzz_plan_json.cpp — a plan JSON file (docs/plan-format.md): parse_json +
// plan_from_json, as load_plan does for a path, then check_loaded_plan (checks.hpp).
#include "checks.hpp"
#include "sim/plan/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  shardsim::Plan p;
  if (!fuzz::load("plan_from_json", [&] {
        p = shardsim::plan_from_json(shardsim::parse_json(text, "plan.json"), "plan.json", fuzz::plan_gpus(),
                                     fuzz::plan_defaults());
      }))
    return 0;
  fuzz::check_loaded_plan(p);
  return 0;
}
