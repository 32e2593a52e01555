// optimizers/space/megatron_portfolio.hpp — the Megatron rule portfolio (docs/references.md §A.4, H1–H6).
//
// Owns: megatron_portfolio(), the expert rules as plans: H1 TP-max (experts TP-sharded, EP = 1),
// H2 minimal model parallelism + DP, H3 TP = node × PP, H4 TP + EP (EP = TP) and H4' TP·EP folding
// (EP ∈ {2, 4}, ETP = TP / EP), H5 attention-DP + EP over one node-sized unit (or the smallest
// multiple that fits; TP_attn ∈ {1, 2, 4}, 1 for MLA), H6 DeepSeek-style wide-EP units of 32–256
// GPUs (TP_attn 1 or 4). Each rule then applies the common post-rules: pipeline depth raised until
// the weights fit (MCore rule 3), DP for the remaining GPUs, column→row per-operator sharding,
// sequence parallelism with and without (both are offered when TP > 1). Plans that do not fit even
// at the deepest pipeline are dropped; duplicates are dropped. H4–H6 apply to MoE models only.
// Thread-safety: pure function.
#pragma once

#include <string>
#include <vector>

#include "optimizers/space/search_space.hpp"
#include "sim/plan/plan.hpp"

namespace shardsim {

struct ModelSpec;
class Cluster;

struct RulePlan {
  std::string rule;   // "H1 TP-max", …
  Plan plan;
};

// `base` supplies dtypes, batching and max_context. `pool`: the rules on one pool of a
// disaggregated plan instead of the whole cluster.
std::vector<RulePlan> megatron_portfolio(const ModelSpec& model, const Cluster& cluster, const Plan& base, PoolGpus pool = {});

// The portfolio of the space's model and cluster (base = the space's base plan) as canonical
// genomes; rule plans the space cannot express are left out. For a disaggregated space: at every
// pool split, each rule applied to both pools ("H5 attn-DP+EP 16P16D").
struct RuleGenes {
  std::string rule;
  Genes genes;
};
std::vector<RuleGenes> portfolio_genes(const SearchSpace& space);

}  // namespace shardsim
