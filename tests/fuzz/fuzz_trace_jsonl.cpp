// tests/fuzz/fuzz_trace_jsonl.cpp — a Mooncake-style JSONL request trace (docs/trace-formats.md):
// parse_mooncake_jsonl, then check_loaded_trace (checks.hpp); a trace that loaded is also written to
// a file and loaded through load_request_trace (format detection, read_text_file).
#include "checks.hpp"
#include "workloads/request_trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  shardsim::RequestTrace t;
  if (!fuzz::load("parse_mooncake_jsonl", [&] { t = shardsim::parse_mooncake_jsonl(text, "trace.jsonl"); })) return 0;
  fuzz::check_loaded_trace(t);
  const std::string path = fuzz::temp_dir().write("trace.jsonl", text);
  shardsim::RequestTrace from_file;
  if (fuzz::load("load_request_trace(file)", [&] { from_file = shardsim::load_request_trace(path); }))
    fuzz::check_loaded_trace(from_file);
  return 0;
}
