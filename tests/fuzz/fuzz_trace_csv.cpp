// tests/fuzz/fuzz_trace_csv.cpp — an Azure request trace CSV (docs/trace-formats.md):
// parse_azure_csv, then check_loaded_trace (checks.hpp); a trace that loaded is also written to a
// file and loaded through load_request_trace (format detection, read_text_file).
#include "checks.hpp"
#include "workloads/request_trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  shardsim::RequestTrace t;
  if (!fuzz::load("parse_azure_csv", [&] { t = shardsim::parse_azure_csv(text, "trace.csv"); })) return 0;
  fuzz::check_loaded_trace(t);
  const std::string path = fuzz::temp_dir().write("trace.csv", text);
  shardsim::RequestTrace from_file;
  if (fuzz::load("load_request_trace(file)", [&] { from_file = shardsim::load_request_trace(path); }))
    fuzz::check_loaded_trace(from_file);
  return 0;
}
