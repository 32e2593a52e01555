// tests/fuzz/checks.hpp — what the fuzz targets check on a value that loaded (checks.cpp).
//
// Each target runs its loader through fuzz::load (fuzz_common.hpp); when the loader returns, the
// value goes through the matching check below: the invariants its header promises, the queries
// the simulator makes on it, and writing it back and reading it again. Any violation is a
// finding (fuzz::finding aborts, libFuzzer saves the input). Compiled once into the fuzz library,
// so the targets themselves stay small.
#pragma once

#include <cstdint>
#include <vector>

#include "fuzz_common.hpp"

namespace shardsim {  // only references here, so the targets need not parse every header
struct Plan;
struct PlanDefaults;
class Cluster;
struct ModelSpec;
struct RequestTrace;
class RoutingSource;
}  // namespace shardsim

namespace fuzz {

// Plans are loaded for, and checked against, a fixed model and cluster: mixtral-8x7b on
// dgx-h100:2 (16 GPUs in 2 NVLink domains). Its GPU count and the model's plan defaults:
int plan_gpus();
const shardsim::PlanDefaults& plan_defaults();

// plan_to_json loads back equal; plan_to_string loads; check_plan answers without throwing.
void check_loaded_plan(const shardsim::Plan& p);

// Node / rail / leaf / injection queries, routes (and bisection on small clusters) answer;
// cluster_to_json (both styles) loads back to a cluster of the same size; to_dot works.
void check_loaded_cluster(const shardsim::Cluster& c);

// Parameter counts (positive, active ≤ total), KV bytes, the routing shape of a MoE model passes
// validate_routing_shape; model_to_json loads back equal.
void check_loaded_model(const shardsim::ModelSpec& m);

// ≥ 1 request, arrivals finite, ascending, first at 0, prompt ≥ 1, output ≥ 0; statistics finite.
void check_loaded_trace(const shardsim::RequestTrace& t);

// Routes of the given requests × positions (3 tokens from each): ids < experts (and distinct
// within a top-k when `distinct`), route_tokens = route_token per token = route per layer,
// route_layers answers, load statistics and EP placements work.
void check_routing(const shardsim::RoutingSource& src, const std::vector<std::uint32_t>& requests,
                   const std::vector<std::uint32_t>& positions, bool distinct);

}  // namespace fuzz
