// optimizers/space/search_space.hpp — the decisions a plan search makes, their encoding as integer
// genes, and the maps between genes and plans (decode, encode, canonical form, repair).
//
// Owns: SearchSpace, the interface every optimizer searches through, and PoolSpace, the space of
// one pool of GPUs: a colocated plan on the whole cluster, or one pool of a disaggregated plan
// (optimizers/space/disaggregated_space.hpp composes two). make_search_space() picks the one the options
// ask for. A genome is a vector of integers, one per Decision, each in [0, size).
// Decisions, in decoding order (a block is left out when the user does not search it; its
// values then come from the base plan):
//   degrees   one gene per prime factor of the GPU count (smallest first), naming the dimension
//             that factor multiplies: tp, attn_dp (MoE only), pp or dp — so dp×pp×tp×attn_dp is the
//             GPU count by construction (docs/references.md §C.1); then, for MoE models, "etp split" k:
//             etp = the product of the k smallest prime factors of the unit (tp × attn_dp), ep the
//             rest (k is clamped to the unit's factor count); then "sp" (off | on = tp); then,
//             for MoE models, "redundant experts": 0, 1 or 2 extra expert slots per EP rank
//             (Plan::redundant_experts = value × ep; EPLB), clamped to ≤ experts, 0 when ep = 1.
//   sharding  one gene per operator type the model has (allowed_shards order; 0 = Megatron's).
//   mapping   one of the 24 orders of (tp, attn_dp, pp, dp), fastest-varying first.
//   batching  max_seqs and max_batch_tokens, ordinal.
//   routing   (opt-in, not in "all") dispatch: how requests are dealt to the dp replicas —
//             round-robin, least-loaded or prefix affinity (EngineSettings::dispatch); only with dp > 1.
// Canonical form: equal plans have equal canonical genes (and key()). Rules: the factor genes of
// equal primes are sorted (which copy of a 2 goes where does not matter); the etp split is
// clamped; sp is off when tp = 1; an operator sharded over a group of one GPU (tp = 1 for
// attention, dense, shared-expert, router, embedding and LM-head operators; etp = 1 for routed
// experts) takes choice 0; the mapping keeps only the relative order of dimensions of degree > 1
// (degree-1 dimensions follow in default order).
// Sizes: raw_size() is the product of the decision sizes; canonical_size() counts distinct
// canonical genomes exactly (by enumerating canonical degree assignments, ≤ a few hundred).
// Thread-safety: immutable after construction; all methods are const and may run concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"

namespace shardsim {

struct ModelSpec;
class Cluster;

using Genes = std::vector<int>;

enum class Block { Degrees, Sharding, Mapping, Batching, Routing };
const char* to_string(Block b);

struct Decision {
  enum class Kind { Factor, EtpSplit, Sp, Redundant, Shard, Mapping, MaxSeqs, MaxBatchTokens, Dispatch, PoolSplit };
  std::string name;                  // e.g. "factor 1 (×2)", "etp split", "qkv", "mapping", "max_seqs"
  Kind kind = Kind::Factor;
  Block block = Block::Degrees;
  bool ordinal = false;              // values are ordered (a ±1 step is a small move)
  std::vector<std::string> labels;   // one per value
  int prime = 0;                     // Factor: the prime this gene places
  Op op = Op::Qkv;                   // Shard: the operator
  int size() const { return static_cast<int>(labels.size()); }
};

// Which blocks of decisions are searched ("degrees,sharding,mapping,batching" by default), whether
// the router's dispatch is searched too ("routing": it matters only on traces with shared
// prefixes, so it is asked for), and whether plans are disaggregated into a prefill and a decode
// pool ("pools": the split and each pool's own decisions; optimizers/space/disaggregated_space.hpp).
struct SpaceOptions {
  bool degrees = true, sharding = true, mapping = true, batching = true;
  bool routing = false;
  bool pools = false;
};
// Parses a comma list of block names ("all" = the four blocks; "routing" adds the dispatch gene,
// "pools" disaggregation).
// Throws InputError(source, value, reason).
SpaceOptions parse_space_options(const std::string& text, const std::string& source);
std::string to_string(const SpaceOptions& o);

// The degree dimensions a factor gene can name.
enum class Dim { Tp, AttnDp, Pp, Dp };

// What optimizers search: decisions, and the maps between genomes and plans.
class SearchSpace {
 public:
  virtual ~SearchSpace() = default;
  const std::vector<Decision>& decisions() const { return decisions_; }
  int num_decisions() const { return static_cast<int>(decisions_.size()); }
  virtual const ModelSpec& model() const = 0;
  virtual const Cluster& cluster() const = 0;
  // The plan that supplies what is not searched.
  virtual const Plan& base() const = 0;
  virtual const SpaceOptions& options() const = 0;

  // True when every gene is in range and the genome has num_decisions() genes.
  bool in_range(const Genes& g) const;
  // The plan a genome stands for (requires in_range); decode(g) == decode(canonical(g)), and
  // equal keys ⇔ equal decoded plans.
  virtual Plan decode(const Genes& g) const = 0;
  // The genome of `plan`, or false when the space cannot express it.
  virtual bool encode(const Plan& plan, Genes& out) const = 0;
  virtual Genes canonical(const Genes& g) const = 0;
  // A compact text key of the canonical genome (equal plans ⇔ equal keys).
  virtual std::string key(const Genes& g) const = 0;
  // check_plan of a plan this space decoded (with what the space's GPUs and pools allow).
  virtual PlanCheck check_decoded(const Plan& decoded) const = 0;
  // check_plan of the decoded genome (an evaluation that needs the plan too decodes it once and
  // calls check_decoded).
  PlanCheck check(const Genes& g) const { return check_decoded(decode(g)); }
  // Moves the genome toward the nearest valid plan; returns a canonical genome (maybe still invalid).
  virtual Genes repair(const Genes& g) const = 0;
  // Which values of decision `d` are not obviously invalid given the genes before it (`prefix`
  // holds at least d genes; later genes are ignored). At least one value is always allowed.
  virtual std::vector<char> valid_values(int d, const Genes& prefix) const = 0;
  double raw_size() const;
  virtual double canonical_size() const = 0;
  // Visits every canonical genome once (in a fixed order); stops early when `visit` returns false.
  virtual void for_each_canonical(const std::function<bool(const Genes&)>& visit) const = 0;
  // Uniform over raw genomes (then canonicalised), from one 64-bit random draw per gene.
  virtual Genes random(const std::function<std::uint64_t()>& next) const = 0;

 protected:
  std::vector<Decision> decisions_;
};

// A colocated space on the whole cluster, or a disaggregated one when options.pools.
std::unique_ptr<SearchSpace> make_search_space(const ModelSpec& model, const Cluster& cluster, const Plan& base,
                                               SpaceOptions options = {});

// The GPUs a PoolSpace lays its plans on: `gpus` of them from `first` on (gpus = 0: the cluster).
struct PoolGpus {
  int gpus = 0, first = 0;
};

class PoolSpace final : public SearchSpace {
 public:
  // `base` supplies everything not searched (dtypes, max_context, mem_util, and any block left out).
  // The model and cluster must outlive the space. options.pools is ignored (one pool).
  PoolSpace(const ModelSpec& model, const Cluster& cluster, const Plan& base, SpaceOptions options = {}, PoolGpus pool = {});

  const ModelSpec& model() const override { return model_; }
  const Cluster& cluster() const override { return cluster_; }
  const Plan& base() const override { return base_; }
  const SpaceOptions& options() const override { return options_; }
  const PoolGpus& pool() const { return pool_; }
  // The dimension each value of a Factor gene names.
  const std::vector<Dim>& factor_dims() const { return dims_; }

  Plan decode(const Genes& g) const override;
  // False when its degrees cannot be expressed (e.g. etp is not a product of the unit's smallest
  // primes, or a searched batching value is not on the grid: the nearest grid value is taken then
  // and the result is still true). Blocks not searched are ignored.
  bool encode(const Plan& plan, Genes& out) const override;
  Genes canonical(const Genes& g) const override;
  std::string key(const Genes& g) const override;
  // check_plan of the decoded genome (for a pool: check_pool on its GPUs).
  PlanCheck check_decoded(const Plan& decoded) const override;
  // Moves the genome toward the nearest valid plan, a few steps at most (docs/references.md §C.2):
  // TP too large or not dividing the heads → a tp factor moves to dp; EP not dividing the experts →
  // the etp split grows; etp too large → it shrinks; pp beyond the layers → a pp factor to dp;
  // memory overflow → a dp factor (else attn_dp) to pp, then smaller batching limits; a group
  // spanning NVLink domains → the default mapping. Returns a canonical genome (maybe still invalid).
  Genes repair(const Genes& g) const override;

  // Which values of decision `d` are not obviously invalid given the genes before it (`prefix`
  // holds at least d genes; later genes are ignored). Cheap structural rules only: tp within an
  // NVLink domain and dividing the heads (and kv heads / FFN width, FP8 alignment), pp ≤ layers,
  // ep dividing the experts. At least one value is always allowed.
  std::vector<char> valid_values(int d, const Genes& prefix) const override;

  double canonical_size() const override;
  void for_each_canonical(const std::function<bool(const Genes&)>& visit) const override;
  Genes random(const std::function<std::uint64_t()>& next) const override;

 private:
  struct DegreeParts {
    int tp = 1, attn_dp = 1, pp = 1, dp = 1;
    std::vector<int> unit_primes;  // prime factors of tp × attn_dp, ascending
  };
  DegreeParts degree_parts(const Genes& g) const;
  int gene_index(Decision::Kind kind) const;  // first decision of that kind, −1 if absent
  // Redundant-expert values (per EP rank) allowed with `ep` EP ranks: 0 without EP, ≤ experts / ep.
  int redundant_limit(int ep) const;
  bool op_relevant(Op op, int tp, int etp) const;

  const ModelSpec& model_;
  const Cluster& cluster_;
  Plan base_;
  SpaceOptions options_;
  PoolGpus pool_;
  std::vector<int> primes_;         // prime factors of the pool's GPU count, ascending
  std::vector<Dim> dims_;
  std::vector<int> max_seqs_values_, max_tokens_values_;
};

}  // namespace shardsim
