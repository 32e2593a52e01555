// tests/fuzz/fuzz_cluster_json.cpp — a cluster JSON file (docs/cluster-format.md): parse_json +
// cluster_from_json, as load_cluster_file does, then check_loaded_cluster (checks.hpp).
#include <optional>

#include "checks.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  std::optional<shardsim::Cluster> c;
  if (!fuzz::load("cluster_from_json", [&] {
        c.emplace(shardsim::cluster_from_json(shardsim::parse_json(text, "cluster.json"), "cluster.json", "cluster"));
      }))
    return 0;
  fuzz::check_loaded_cluster(*c);
  return 0;
}
