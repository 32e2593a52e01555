// tests/fuzz/fuzz_model_hf.cpp — a Hugging Face config.json: parse_json + model_from_hf_config
// (what load_model does once is_hf_config says so), then check_loaded_model (checks.hpp).
#include "checks.hpp"
#include "workloads/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  shardsim::ModelSpec m;
  if (!fuzz::load("model_from_hf_config",
                  [&] { m = shardsim::model_from_hf_config(shardsim::parse_json(text, "config.json"), "config.json"); }))
    return 0;
  fuzz::check_loaded_model(m);
  return 0;
}
