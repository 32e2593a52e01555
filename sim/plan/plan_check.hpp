// sim/plan/plan_check.hpp — is a plan valid for a model on a cluster, and why not.
//
// Owns: check_plan, which lists every violation (not only the first) with the plan field it
// concerns and a reason a user can act on: product of degrees vs GPU count, the MoE folding
// rule ep × etp = tp × attn_dp, divisibility of heads / kv heads / experts / FFN widths,
// FP8 block alignment, layers per stage, TP/ETP inside an NVLink domain, batching limits, and
// memory (sim/memory_model); for a disaggregated plan, each pool (fields under /prefill and
// /decode) and that the two pools fill the cluster. Notes are facts worth knowing that do not make a plan invalid.
// Thread-safety: pure function.
#pragma once

#include <string>
#include <vector>

#include "sim/plan/memory_model.hpp"
#include "sim/plan/plan.hpp"

namespace shardsim {

struct Violation {
  std::string field;   // JSON pointer into the plan, e.g. "/degrees/tp", or "/memory"
  std::string reason;
};

struct PlanCheck {
  std::vector<Violation> violations;
  std::vector<std::string> notes;
  MemoryReport memory;            // computed when the degrees are consistent (disaggregated: the decode pool's)
  bool memory_valid = false;
  std::vector<MemoryReport> pool_memory;  // disaggregated: {prefill, decode}; empty otherwise
  bool feasible() const { return violations.empty(); }
};

PlanCheck check_plan(const Plan& plan, const ModelSpec& model, const Cluster& cluster);
// One pool alone (its decode_pool ignored): `gpus` GPUs from plan.first_gpu on, which must lie
// on the cluster. check_plan(colocated plan) = check_pool(plan, …, cluster.num_gpus()).
PlanCheck check_pool(const Plan& plan, const ModelSpec& model, const Cluster& cluster, int gpus);

}  // namespace shardsim
