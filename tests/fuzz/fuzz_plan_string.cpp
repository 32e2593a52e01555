// tests/fuzz/fuzz_plan_string.cpp — the compact plan string ("tp=2,dp=4,weights=fp8,engine=vllm"):
// plan_from_string, then check_loaded_plan (checks.hpp: JSON round trip, string reloads, check_plan).
#include "checks.hpp"
#include "sim/plan/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  shardsim::Plan p;
  if (!fuzz::load("plan_from_string", [&] { p = shardsim::plan_from_string(text, fuzz::plan_gpus(), fuzz::plan_defaults()); }))
    return 0;
  fuzz::check_loaded_plan(p);
  return 0;
}
