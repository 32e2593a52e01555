// sim/plan/megatron_rule.hpp — the classic Megatron-style plan for a model on a cluster.
//
// Owns: megatron_plan — TP as large as valid inside one NVLink domain, PP across nodes only as
// far as memory needs, DP for the rest; MoE experts spread EP over the TP group (ep = tp when
// the expert count allows, the rest as expert-TP); Megatron column→row per-operator sharding.
// (docs/references.md §A.4 H1/H4. The optimizers' rule portfolio widens this into several plans.)
// When no pipeline depth fits in memory it returns the deepest candidate; check_plan says why.
// On a mixed cluster of two GPU types (Cluster::mixed) it is disaggregated: one pool per type,
// decode on the type with the faster HBM, each pool by the same rule.
#pragma once

#include "sim/plan/plan.hpp"

namespace shardsim {

struct ModelSpec;
class Cluster;

Plan megatron_plan(const ModelSpec& model, const Cluster& cluster);

// True when tp is a valid Megatron TP degree for the model on nodes of `gpus_per_node` GPUs.
bool megatron_valid_tp(const ModelSpec& model, int tp, int gpus_per_node, Dtype weights);

}  // namespace shardsim
