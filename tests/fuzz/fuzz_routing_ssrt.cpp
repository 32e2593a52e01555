// tests/fuzz/fuzz_routing_ssrt.cpp — an SSRT routing trace (binary, docs/trace-formats.md):
// RoutingTraceFile(bytes, source). A trace that loaded must answer the queries of check_routing (checks.hpp)
// (in range and beyond its stored requests / positions), encode back to the same bytes, and load
// the same from a file through make_routing (the path the command line takes).
#include <algorithm>
#include <limits>
#include <optional>

#include "checks.hpp"
#include "workloads/routing_trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardsim;
  const std::string bytes = fuzz::as_string(data, size);
  std::optional<RoutingTraceFile> f;
  if (!fuzz::load("RoutingTraceFile", [&] { f.emplace(bytes, "routing.ssrt"); })) return 0;
  const std::uint32_t R = f->num_requests();
  FUZZ_CHECK(R >= 1, "no requests");
  fuzz::check_routing(*f, {0, R - 1, R, 2 * R + 1, std::numeric_limits<std::uint32_t>::max()},
                      {0, f->stored_tokens(0), 1000, std::numeric_limits<std::uint32_t>::max()}, false);
  if (R <= 4096) {
    std::vector<std::uint32_t> counts(R);
    for (std::uint32_t r = 0; r < R; ++r) counts[r] = f->stored_tokens(r);
    std::string again;
    fuzz::must("encode_routing_trace", [&] { again = encode_routing_trace(*f, counts); });
    FUZZ_CHECK(again == bytes, "encode_routing_trace(trace, its token counts) differs from the trace's bytes");
  }
  const std::string path = fuzz::temp_dir().write("routing.ssrt", bytes);
  fuzz::must("make_routing(file)", [&] {
    std::unique_ptr<RoutingSource> again = make_routing(path, f->shape());
    std::vector<ExpertId> a(f->shape().ids_per_token()), b(a.size());
    f->route_token(R - 1, 0, a);
    again->route_token(R - 1, 0, b);
    FUZZ_CHECK(a == b, "make_routing(file) routes differently from RoutingTraceFile(bytes)");
  });
  return 0;
}
