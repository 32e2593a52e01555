// tests/fuzz/fuzz_model_json.cpp — a model in shardsim's JSON format (docs/model-format.md):
// parse_json + model_from_json, then check_loaded_model (checks.hpp).
#include "checks.hpp"
#include "workloads/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  shardsim::ModelSpec m;
  if (!fuzz::load("model_from_json", [&] { m = shardsim::model_from_json(shardsim::parse_json(text, "model.json"), "model.json"); }))
    return 0;
  fuzz::check_loaded_model(m);
  return 0;
}
