// tests/fuzz/fuzz_cluster_shorthand.cpp — the cluster shorthand ("dgx-h100:32,oversub=2",
// "torus:4x4x2,gpus=4", …): cluster_from_shorthand, then check_loaded_cluster (checks.hpp).
// Text that is not a shorthand would be a file path for load_cluster; that is not fuzzed.
#include <optional>

#include "checks.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  bool shorthand = false;
  fuzz::must("is_cluster_shorthand", [&] { shorthand = shardsim::is_cluster_shorthand(text); });
  if (!shorthand) return 0;
  std::optional<shardsim::Cluster> c;
  if (!fuzz::load("cluster_from_shorthand", [&] { c.emplace(shardsim::cluster_from_shorthand(text)); })) return 0;
  fuzz::check_loaded_cluster(*c);
  return 0;
}
