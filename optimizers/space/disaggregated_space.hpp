// optimizers/space/disaggregated_space.hpp — searching disaggregated plans: the pool split and each pool's plan.
//
// Owns: DisaggregatedSpace, the SearchSpace of `--space …,pools`. Its genome is
//   [pool split] [prefill pool's genes] [decode pool's genes]
// The split gene picks how many GPUs prefill (whole NVLink domains: 1 … n−1 nodes; on one node,
// a quarter, half or three quarters of it); the decode pool takes the rest. On a mixed cluster
// (nodes of two GPU types) it picks among the splits whose pools each lie on one type, in both
// orders, so it chooses which type prefills and which decodes. Each pool's genes are a
// PoolSpace's (optimizers/space/search_space.hpp) on that pool's GPUs, so every pool chooses its own
// degrees, sharding, mapping and batching. Pools of different sizes have different numbers of
// prime factors: each pool's factor genes are padded to the widest split (a padding gene is always
// 0 in canonical form) so that the genome has one length and gene i always means the same kind of
// decision. Decision names carry the pool ("prefill factor 1 (×2)", "decode max_seqs").
// Canonical form, keys, repair and validity are the pools' own, per pool; check() is check_plan of
// the whole plan (both pools and that they fill the cluster).
// Thread-safety: immutable after construction; all methods are const and may run concurrently.
#pragma once

#include <memory>
#include <vector>

#include "optimizers/space/search_space.hpp"

namespace shardsim {

class DisaggregatedSpace final : public SearchSpace {
 public:
  // `base` supplies what is not searched: a disaggregated plan's pools, or one colocated plan for both.
  DisaggregatedSpace(const ModelSpec& model, const Cluster& cluster, const Plan& base, SpaceOptions options);

  const ModelSpec& model() const override { return model_; }
  const Cluster& cluster() const override { return cluster_; }
  const Plan& base() const override { return base_; }
  const SpaceOptions& options() const override { return options_; }
  // The values of the split gene, and the space of pool k (0 prefill, 1 decode) at split s.
  int splits() const { return static_cast<int>(splits_.size()); }
  const PoolSpace& pool(int s, int k) const { return *splits_.at(static_cast<std::size_t>(s)).pools[k]; }

  Plan decode(const Genes& g) const override;
  // False for a colocated plan, or one whose prefill pool is not one of the splits.
  bool encode(const Plan& plan, Genes& out) const override;
  Genes canonical(const Genes& g) const override;
  std::string key(const Genes& g) const override;
  PlanCheck check_decoded(const Plan& decoded) const override;
  Genes repair(const Genes& g) const override;
  std::vector<char> valid_values(int d, const Genes& prefix) const override;
  double canonical_size() const override;
  void for_each_canonical(const std::function<bool(const Genes&)>& visit) const override;
  Genes random(const std::function<std::uint64_t()>& next) const override;

 private:
  struct Split {
    int prefill_gpus = 0;
    bool decode_first = false;            // the decode pool on the first GPUs (mixed clusters)
    std::unique_ptr<PoolSpace> pools[2];  // prefill, decode
    int factors[2] = {0, 0};              // each pool's factor genes (before padding)
  };
  // Where pool `pool`'s gene `child` of split `s` sits in the genome; and the reverse (−1 = padding).
  int slot_of(int s, int pool, int child) const;
  int child_of(int s, int pool, int slot) const;
  int split_of(const Genes& g) const;
  Genes child_genes(const Genes& g, int s, int pool) const;
  void put(Genes& g, int s, int pool, const Genes& child) const;
  // The genome with each pool's genes replaced by f of them (canonical, repair); the split kept.
  Genes each_pool(const Genes& g, Genes (PoolSpace::*f)(const Genes&) const) const;

  const ModelSpec& model_;
  const Cluster& cluster_;
  Plan base_;
  SpaceOptions options_;
  std::vector<Split> splits_;
  int first_[2] = {1, 1};        // first gene of each pool
  int factors_[2] = {0, 0};      // padded factor genes of each pool
};

}  // namespace shardsim
