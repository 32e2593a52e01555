// tests/fuzz/fuzz_synthetic_routing.cpp — synthetic routing specs through make_routing.
// Input: byte 0 picks the model's routing shape from kShapes (the presets' shapes and some edge
// cases); the rest is the spec: "uniform", "synthetic" or "synthetic:k=v,…" (anything else would be
// a file path and is skipped). A source that loaded must answer the queries of check_routing (checks.hpp)
// with valid, distinct experts from at most topk_group groups, and encode to a loadable SSRT image.
#include <algorithm>
#include <limits>
#include <optional>

#include "checks.hpp"
#include "workloads/routing_trace.hpp"

namespace {

using shardsim::RoutingShape;
// {moe_layers, experts, top_k, n_group, topk_group}
const RoutingShape kShapes[] = {
    {1, 1, 1, 1, 1},        // smallest
    {32, 8, 2, 1, 1},       // Mixtral 8x7B
    {48, 128, 8, 1, 1},     // Qwen3-30B-A3B
    {58, 256, 8, 8, 4},     // DeepSeek-V3 (group-limited)
    {36, 128, 4, 1, 1},     // gpt-oss-120b
    {60, 384, 8, 1, 1},     // Kimi-K2
    {3, 6, 3, 3, 2},        // small group-limited
    {2, 100, 64, 1, 1},     // largest top_k the generator takes
    {2, 4096, 16, 64, 8},   // many experts, 64 groups
    {24, 16, 4, 1, 1},      // DBRX
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardsim;
  if (size < 1) return 0;
  const RoutingShape& shape = kShapes[data[0] % (sizeof kShapes / sizeof kShapes[0])];
  const std::string spec = fuzz::as_string(data + 1, size - 1);
  if (!is_synthetic_routing_spec(spec)) return 0;
  // The generator precomputes (drift epochs + domains) × layers × experts table entries and
  // refuses specs above 16,777,216 of them. Valid specs above 500,000 entries are skipped unless
  // SHARDSIM_FUZZ_STRICT=1: they are correct but take seconds under ASan, which would starve the
  // fuzzer; specs beyond the limit are kept (they must be refused with one line).
  if (!fuzz::strict() && spec != "uniform") {
    try {
      const SyntheticRoutingParams p = parse_synthetic_routing(spec.size() > 10 ? std::string_view(spec).substr(10) : "", spec);
      const double entries = ((p.drift > 0 ? 64.0 : 1.0) + (p.beta > 0 ? p.domains : 0)) * shape.moe_layers * shape.experts;
      if (entries > 5e5 && entries <= 16.0 * 1024 * 1024) return 0;
    } catch (const std::exception&) {
      // make_routing reports it below
    }
  }
  std::unique_ptr<RoutingSource> src;
  if (!fuzz::load("make_routing(synthetic)", [&] { src = make_routing(spec, shape); })) return 0;
  FUZZ_CHECK(src->shape() == shape, "shape changed");
  const auto* syn = dynamic_cast<const SyntheticRouting*>(src.get());
  FUZZ_CHECK(syn != nullptr, "make_routing(synthetic spec) is not a SyntheticRouting");
  fuzz::check_routing(*src, {0, 1, 499, 500, 123457, std::numeric_limits<std::uint32_t>::max()},
                      {0, 1, 4096, std::numeric_limits<std::uint32_t>::max()}, true);
  // Group limits: each (token, layer) uses experts from at most topk_group groups.
  const int G = syn->n_group(), TG = syn->topk_group();
  FUZZ_CHECK(G >= 1 && TG >= 1 && TG <= G && shape.experts % G == 0, "group limits " + std::to_string(TG) + " of " + std::to_string(G));
  fuzz::must("group limits", [&] {
    const std::size_t k = static_cast<std::size_t>(shape.top_k);
    std::vector<ExpertId> ids(8 * shape.ids_per_token());
    src->route_tokens(7, 0, 8, ids);
    for (std::size_t at = 0; at < ids.size(); at += k) {
      std::vector<int> groups;
      for (std::size_t j = 0; j < k; ++j) groups.push_back(ids[at + j] / (shape.experts / G));
      std::sort(groups.begin(), groups.end());
      const auto used = std::unique(groups.begin(), groups.end()) - groups.begin();
      FUZZ_CHECK(used <= TG, std::to_string(used) + " groups used, topk_group " + std::to_string(TG));
    }
  });
  fuzz::must("encode_routing_trace(synthetic)", [&] {
    const std::vector<std::uint32_t> counts = {3, 1, 2};
    RoutingTraceFile f(encode_routing_trace(*src, counts), "encoded");
    std::vector<ExpertId> a(shape.ids_per_token()), b(a.size());
    src->route_token(2, 1, a);
    f.route_token(2, 1, b);
    FUZZ_CHECK(a == b, "the encoded trace routes differently from its source");
  });
  return 0;
}
