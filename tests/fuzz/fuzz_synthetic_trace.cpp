// tests/fuzz/fuzz_synthetic_trace.cpp — the synthetic request-trace spec: the input is the text
// after "synthetic:" ("n=100,rate=5,arrival=gamma,cv=2,prompt=lognormal:1024:1.0,…"), given to
// load_request_trace("synthetic:" + input), then check_loaded_trace (checks.hpp).
// Specs asking for more than 20,000 requests are skipped (n is read with the loader's own
// SpecParams): the generator is linear in n (up to 10,000,000 allowed) and large n only costs time.
#include "checks.hpp"
#include "workloads/request_trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string params = fuzz::as_string(data, size);
  const std::string spec = "synthetic:" + params;
  try {
    shardsim::SpecParams p(spec, params);
    if (p.integer_or("n", 1000, 1, 10'000'000) > 20'000) return 0;
  } catch (const std::exception&) {
    // the loader below reports it (or the finding)
  }
  shardsim::RequestTrace t;
  if (!fuzz::load("load_request_trace(synthetic)", [&] { t = shardsim::load_request_trace(spec); })) return 0;
  fuzz::check_loaded_trace(t);
  return 0;
}
