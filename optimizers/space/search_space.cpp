// optimizers/space/search_space.cpp — decisions, decode/encode, canonical form, repair, enumeration.
#include "optimizers/space/search_space.hpp"

#include <algorithm>
#include <array>
#include <numeric>

#include "common/input_error.hpp"
#include "sim/plan/megatron_rule.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

namespace shardsim {

namespace {
// The dispatch gene's values, round-robin first (the default).
constexpr std::array<Dispatch, 3> kDispatches{Dispatch::RoundRobin, Dispatch::LeastLoaded, Dispatch::PrefixAffinity};
}  // namespace

namespace {

std::vector<int> prime_factors(int n) {
  std::vector<int> out;
  for (int p = 2; static_cast<long>(p) * p <= n; ++p)
    while (n % p == 0) out.push_back(p), n /= p;
  if (n > 1) out.push_back(n);
  return out;
}

const char* dim_name(Dim d) {
  switch (d) {
    case Dim::Tp: return "tp";
    case Dim::AttnDp: return "attn_dp";
    case Dim::Pp: return "pp";
    case Dim::Dp: return "dp";
  }
  return "?";
}

MapDim map_dim_of(int i) { return static_cast<MapDim>(i); }

// All 24 orders of the four mapping dimensions, in lexicographic order of their indices.
const std::vector<std::array<MapDim, 4>>& all_mappings() {
  static const std::vector<std::array<MapDim, 4>> perms = [] {
    std::vector<std::array<MapDim, 4>> out;
    std::array<int, 4> p{0, 1, 2, 3};
    do out.push_back({map_dim_of(p[0]), map_dim_of(p[1]), map_dim_of(p[2]), map_dim_of(p[3])});
    while (std::next_permutation(p.begin(), p.end()));
    return out;
  }();
  return perms;
}

int degree_of(MapDim d, const Degrees& deg) {
  switch (d) {
    case MapDim::Tp: return deg.tp;
    case MapDim::AttnDp: return deg.attn_dp;
    case MapDim::Pp: return deg.pp;
    case MapDim::Dp: return deg.dp;
  }
  return 1;
}

// The canonical mapping of `m` for degrees `deg`: dims of degree > 1 keep their relative order,
// then the degree-1 dims in index order.
std::array<MapDim, 4> canonical_mapping(const std::array<MapDim, 4>& m, const Degrees& deg) {
  std::array<MapDim, 4> out{};
  int k = 0;
  for (MapDim d : m)
    if (degree_of(d, deg) > 1) out[static_cast<std::size_t>(k++)] = d;
  for (int i = 0; i < 4; ++i)
    if (degree_of(map_dim_of(i), deg) <= 1) out[static_cast<std::size_t>(k++)] = map_dim_of(i);
  return out;
}

int mapping_index(const std::array<MapDim, 4>& m) {
  const auto& all = all_mappings();
  return static_cast<int>(std::find(all.begin(), all.end(), m) - all.begin());
}

std::string mapping_label(const std::array<MapDim, 4>& m) {
  std::string s;
  for (MapDim d : m) s += std::string(s.empty() ? "" : ",") + to_string(d);
  return s;
}

int nearest_index(const std::vector<int>& grid, int v) {
  int best = 0;
  for (int i = 1; i < static_cast<int>(grid.size()); ++i)
    if (std::abs(grid[static_cast<std::size_t>(i)] - v) < std::abs(grid[static_cast<std::size_t>(best)] - v)) best = i;
  return best;
}

Decision make_decision(std::string name, Decision::Kind kind, Block block, bool ordinal) {
  Decision d;
  d.name = std::move(name);
  d.kind = kind;
  d.block = block;
  d.ordinal = ordinal;
  return d;
}

}  // namespace

const char* to_string(Block b) {
  switch (b) {
    case Block::Degrees: return "degrees";
    case Block::Sharding: return "sharding";
    case Block::Mapping: return "mapping";
    case Block::Batching: return "batching";
    case Block::Routing: return "routing";
  }
  return "?";
}

SpaceOptions parse_space_options(const std::string& text, const std::string& source) {
  SpaceOptions o{false, false, false, false, false, false};
  std::size_t pos = 0;
  bool any = false;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item == "all") o.degrees = o.sharding = o.mapping = o.batching = any = true;
    else if (item == "degrees") o.degrees = any = true;
    else if (item == "sharding") o.sharding = any = true;
    else if (item == "mapping") o.mapping = any = true;
    else if (item == "batching") o.batching = any = true;
    else if (item == "routing") o.routing = any = true;
    else if (item == "pools") o.pools = true;
    else throw InputError(source, item, "unknown block (expected degrees, sharding, mapping, batching, all, routing or pools)");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (!any) throw InputError(source, text, "no block to search");
  if (o.pools && !o.degrees)
    throw InputError(source, text, "\"pools\" needs \"degrees\": each pool's parallelism is searched with its size");
  return o;
}

std::string to_string(const SpaceOptions& o) {
  std::string s;
  auto add = [&](bool on, const char* n) {
    if (on) s += std::string(s.empty() ? "" : ",") + n;
  };
  add(o.degrees, "degrees");
  add(o.sharding, "sharding");
  add(o.mapping, "mapping");
  add(o.batching, "batching");
  add(o.routing, "routing");
  add(o.pools, "pools");
  return s;
}

PoolSpace::PoolSpace(const ModelSpec& model, const Cluster& cluster, const Plan& base, SpaceOptions options, PoolGpus pool)
    : model_(model), cluster_(cluster), base_(base), options_(options), pool_(pool) {
  if (pool_.gpus <= 0) pool_ = PoolGpus{cluster.num_gpus(), 0};
  options_.pools = false;
  base_.decode_pool.clear();
  base_.first_gpu = pool_.first;
  primes_ = prime_factors(pool_.gpus);
  dims_ = model.is_moe() ? std::vector<Dim>{Dim::Tp, Dim::AttnDp, Dim::Pp, Dim::Dp}
                         : std::vector<Dim>{Dim::Tp, Dim::Pp, Dim::Dp};
  // The batching ladders hold the base plan's own limits too (the engine preset's, or the user's):
  // a space without them could not express the default plan, so `compare --plan megatron` (the
  // preset's 1,024 sequences) sustained 110 req/s where the best rule plan of the space, cut to
  // 512, sustained 96.5 and a searched plan 102 (DeepSeek-V3 on dgx-h100:8).
  auto with = [](std::vector<int> ladder, int v) {
    if (v > 0 && std::find(ladder.begin(), ladder.end(), v) == ladder.end()) {
      ladder.push_back(v);
      std::sort(ladder.begin(), ladder.end());
    }
    return ladder;
  };
  max_seqs_values_ = with({32, 64, 128, 256, 512}, seqs_per_group(base_.engine, base_.deg.attn_dp));
  max_tokens_values_ = with({2048, 4096, 8192, 16384}, base_.engine.max_batch_tokens);
  if (options_.degrees) {
    for (std::size_t i = 0; i < primes_.size(); ++i) {
      Decision d = make_decision("factor " + std::to_string(i + 1) + " (×" + std::to_string(primes_[i]) + ")",
                                 Decision::Kind::Factor, Block::Degrees, false);
      for (Dim dim : dims_) d.labels.push_back(dim_name(dim));
      d.prime = primes_[i];
      decisions_.push_back(d);
    }
    if (model.is_moe()) {
      Decision d = make_decision("etp split", Decision::Kind::EtpSplit, Block::Degrees, true);
      for (std::size_t k = 0; k <= primes_.size(); ++k) d.labels.push_back(std::to_string(k));
      decisions_.push_back(d);
    }
    Decision sp = make_decision("sp", Decision::Kind::Sp, Block::Degrees, false);
    sp.labels = {"off", "on"};
    decisions_.push_back(sp);
    if (model.is_moe()) {
      Decision r = make_decision("redundant experts", Decision::Kind::Redundant, Block::Degrees, true);
      r.labels = {"0", "1 per EP rank", "2 per EP rank"};
      decisions_.push_back(r);
    }
  }
  if (options_.sharding) {
    for (int i = 0; i < kNumOps; ++i) {
      Op op = static_cast<Op>(i);
      bool present = true;
      switch (op) {
        case Op::Router:
        case Op::ExpertUp:
        case Op::ExpertDown: present = model.is_moe(); break;
        case Op::SharedExpert: present = model.shared_experts > 0; break;
        case Op::DenseUp:
        case Op::DenseDown: present = model.num_dense_layers() > 0; break;
        case Op::LmHead: present = !model.tied_embeddings; break;
        default: break;
      }
      if (!present) continue;
      Decision d = make_decision(to_string(op), Decision::Kind::Shard, Block::Sharding, false);
      for (Shard s : allowed_shards(op)) d.labels.push_back(to_string(s));
      d.op = op;
      decisions_.push_back(d);
    }
  }
  if (options_.mapping) {
    Decision d = make_decision("mapping", Decision::Kind::Mapping, Block::Mapping, false);
    for (const auto& m : all_mappings()) d.labels.push_back(mapping_label(m));
    decisions_.push_back(d);
  }
  if (options_.batching) {
    Decision s = make_decision("max_seqs", Decision::Kind::MaxSeqs, Block::Batching, true);
    for (int v : max_seqs_values_) s.labels.push_back(std::to_string(v));
    decisions_.push_back(s);
    Decision t = make_decision("max_batch_tokens", Decision::Kind::MaxBatchTokens, Block::Batching, true);
    for (int v : max_tokens_values_) t.labels.push_back(std::to_string(v));
    decisions_.push_back(t);
  }
  if (options_.routing) {
    Decision d = make_decision("dispatch", Decision::Kind::Dispatch, Block::Routing, false);
    for (Dispatch x : kDispatches) d.labels.push_back(to_string(x));
    decisions_.push_back(d);
  }
}

int PoolSpace::gene_index(Decision::Kind kind) const {
  for (int i = 0; i < num_decisions(); ++i)
    if (decisions_[static_cast<std::size_t>(i)].kind == kind) return i;
  return -1;
}

bool SearchSpace::in_range(const Genes& g) const {
  if (static_cast<int>(g.size()) != num_decisions()) return false;
  for (int i = 0; i < num_decisions(); ++i)
    if (g[static_cast<std::size_t>(i)] < 0 || g[static_cast<std::size_t>(i)] >= decisions_[static_cast<std::size_t>(i)].size())
      return false;
  return true;
}

PoolSpace::DegreeParts PoolSpace::degree_parts(const Genes& g) const {
  DegreeParts p;
  if (!options_.degrees) {
    p.tp = base_.deg.tp, p.attn_dp = base_.deg.attn_dp, p.pp = base_.deg.pp, p.dp = base_.deg.dp;
    p.unit_primes = prime_factors(p.tp * p.attn_dp);
    return p;
  }
  for (std::size_t i = 0; i < primes_.size(); ++i) {
    int prime = primes_[i];
    switch (dims_[static_cast<std::size_t>(g[i])]) {
      case Dim::Tp: p.tp *= prime, p.unit_primes.push_back(prime); break;
      case Dim::AttnDp: p.attn_dp *= prime, p.unit_primes.push_back(prime); break;
      case Dim::Pp: p.pp *= prime; break;
      case Dim::Dp: p.dp *= prime; break;
    }
  }
  std::sort(p.unit_primes.begin(), p.unit_primes.end());
  return p;
}

int PoolSpace::redundant_limit(int ep) const {
  if (ep <= 1) return 0;
  return std::min(2, model_.experts / ep);
}

bool PoolSpace::op_relevant(Op op, int tp, int etp) const {
  if (op == Op::ExpertUp || op == Op::ExpertDown) return etp > 1;
  return tp > 1;
}

Plan PoolSpace::decode(const Genes& raw) const {
  const Genes g = canonical(raw);  // choices without effect take their default value
  Plan p = base_;
  if (options_.degrees) {
    DegreeParts d = degree_parts(g);
    p.deg.tp = d.tp, p.deg.attn_dp = d.attn_dp, p.deg.pp = d.pp, p.deg.dp = d.dp;
    int etp = 1;
    if (model_.is_moe()) {
      int k = std::min<int>(g[static_cast<std::size_t>(gene_index(Decision::Kind::EtpSplit))],
                            static_cast<int>(d.unit_primes.size()));
      for (int i = 0; i < k; ++i) etp *= d.unit_primes[static_cast<std::size_t>(i)];
      p.deg.etp = etp;
      p.deg.ep = d.tp * d.attn_dp / etp;
    } else {
      p.deg.ep = 1, p.deg.etp = d.tp * d.attn_dp;  // dense: the unit is the TP group (plan.hpp)
    }
    p.deg.sp = g[static_cast<std::size_t>(gene_index(Decision::Kind::Sp))] == 1 ? d.tp : 1;
    if (model_.is_moe()) p.redundant_experts = g[static_cast<std::size_t>(gene_index(Decision::Kind::Redundant))] * p.deg.ep;
  }
  for (int i = 0; i < num_decisions(); ++i) {
    const Decision& dec = decisions_[static_cast<std::size_t>(i)];
    int v = g[static_cast<std::size_t>(i)];
    switch (dec.kind) {
      case Decision::Kind::Shard: p.sharding[static_cast<int>(dec.op)] = allowed_shards(dec.op)[static_cast<std::size_t>(v)]; break;
      case Decision::Kind::Mapping: p.mapping = all_mappings()[static_cast<std::size_t>(v)]; break;
      case Decision::Kind::MaxSeqs:  // the gene is per attention group: the engine's limit is too, or the replica's
        p.engine.max_seqs = max_seqs_values_[static_cast<std::size_t>(v)] * (p.engine.rank_limits ? 1 : p.deg.attn_dp);
        break;
      case Decision::Kind::MaxBatchTokens:
        p.engine.max_batch_tokens = max_tokens_values_[static_cast<std::size_t>(v)];
        follow_user_settings(p.engine, false);  // an unset prefill chunk follows the new token budget
        break;
      case Decision::Kind::Dispatch: p.engine.dispatch = kDispatches[static_cast<std::size_t>(v)]; break;
      default: break;
    }
  }
  p.name = "search";
  return p;
}

bool PoolSpace::encode(const Plan& plan, Genes& out) const {
  out.assign(decisions_.size(), 0);
  if (options_.degrees) {
    // Hand out the primes: each dimension takes the primes its degree needs, smallest first.
    std::array<int, 4> left{plan.deg.tp, plan.deg.attn_dp, plan.deg.pp, plan.deg.dp};
    for (std::size_t i = 0; i < primes_.size(); ++i) {
      int placed = -1;
      for (std::size_t di = 0; di < dims_.size() && placed < 0; ++di) {
        int& rest = left[static_cast<std::size_t>(dims_[di])];
        if (rest % primes_[i] == 0) rest /= primes_[i], placed = static_cast<int>(di);
      }
      if (placed < 0) return false;
      out[i] = placed;
    }
    for (int r : left)
      if (r != 1) return false;
    if (model_.is_moe()) {
      DegreeParts d = degree_parts(out);
      int etp = 1, k = 0;
      while (etp < plan.deg.etp && k < static_cast<int>(d.unit_primes.size())) etp *= d.unit_primes[static_cast<std::size_t>(k++)];
      if (etp != plan.deg.etp) return false;
      out[static_cast<std::size_t>(gene_index(Decision::Kind::EtpSplit))] = k;
    }
    out[static_cast<std::size_t>(gene_index(Decision::Kind::Sp))] = plan.deg.sp > 1 ? 1 : 0;
    if (model_.is_moe()) {
      const int per_rank = plan.deg.ep > 1 ? plan.redundant_experts / plan.deg.ep : 0;
      if (per_rank * plan.deg.ep != plan.redundant_experts && plan.deg.ep > 1) return false;
      if (per_rank > 2) return false;
      out[static_cast<std::size_t>(gene_index(Decision::Kind::Redundant))] = per_rank;
    }
  }
  for (int i = 0; i < num_decisions(); ++i) {
    const Decision& dec = decisions_[static_cast<std::size_t>(i)];
    auto& v = out[static_cast<std::size_t>(i)];
    switch (dec.kind) {
      case Decision::Kind::Shard: {
        const auto& allowed = allowed_shards(dec.op);
        v = static_cast<int>(std::find(allowed.begin(), allowed.end(), plan.shard(dec.op)) - allowed.begin());
        if (v >= dec.size()) return false;
        break;
      }
      case Decision::Kind::Mapping: v = mapping_index(plan.mapping); break;
      case Decision::Kind::MaxSeqs: v = nearest_index(max_seqs_values_, seqs_per_group(plan.engine, plan.deg.attn_dp)); break;
      case Decision::Kind::MaxBatchTokens: v = nearest_index(max_tokens_values_, plan.engine.max_batch_tokens); break;
      case Decision::Kind::Dispatch:
        v = static_cast<int>(std::find(kDispatches.begin(), kDispatches.end(), plan.engine.dispatch) - kDispatches.begin());
        break;
      default: break;
    }
  }
  out = canonical(out);
  return true;
}

Genes PoolSpace::canonical(const Genes& in) const {
  Genes g = in;
  DegreeParts d = degree_parts(g);
  int etp = 1;
  if (options_.degrees) {
    // Sort the factor genes within each run of equal primes.
    for (std::size_t i = 0; i < primes_.size();) {
      std::size_t j = i;
      while (j < primes_.size() && primes_[j] == primes_[i]) ++j;
      std::sort(g.begin() + static_cast<long>(i), g.begin() + static_cast<long>(j));
      i = j;
    }
    if (model_.is_moe()) {
      auto& k = g[static_cast<std::size_t>(gene_index(Decision::Kind::EtpSplit))];
      k = std::min<int>(k, static_cast<int>(d.unit_primes.size()));
      for (int i = 0; i < k; ++i) etp *= d.unit_primes[static_cast<std::size_t>(i)];
    }
    if (d.tp == 1) g[static_cast<std::size_t>(gene_index(Decision::Kind::Sp))] = 0;
    if (model_.is_moe()) {  // none without EP; at most one extra copy of every expert
      auto& r = g[static_cast<std::size_t>(gene_index(Decision::Kind::Redundant))];
      r = std::min(r, redundant_limit(d.tp * d.attn_dp / etp));
    }
  } else {
    etp = base_.deg.etp;
  }
  Degrees deg = base_.deg;
  deg.tp = d.tp, deg.attn_dp = d.attn_dp, deg.pp = d.pp, deg.dp = d.dp;
  for (int i = 0; i < num_decisions(); ++i) {
    const Decision& dec = decisions_[static_cast<std::size_t>(i)];
    auto& v = g[static_cast<std::size_t>(i)];
    if (dec.kind == Decision::Kind::Shard && !op_relevant(dec.op, d.tp, etp)) v = 0;
    if (dec.kind == Decision::Kind::Mapping)
      v = mapping_index(canonical_mapping(all_mappings()[static_cast<std::size_t>(v)], deg));
    if (dec.kind == Decision::Kind::Dispatch && d.dp == 1) v = 0;  // one replica: nothing to dispatch
  }
  return g;
}

std::string PoolSpace::key(const Genes& g) const {
  Genes c = canonical(g);
  std::string k;
  k.reserve(c.size() * 2);
  for (int v : c) k += std::to_string(v) + ".";
  return k;
}

PlanCheck PoolSpace::check_decoded(const Plan& decoded) const { return check_pool(decoded, model_, cluster_, pool_.gpus); }

Genes PoolSpace::repair(const Genes& in) const {
  Genes g = canonical(in);
  if (!options_.degrees && !options_.batching && !options_.mapping) return g;
  auto move_factor = [&](Dim from, Dim to) {
    if (!options_.degrees) return false;
    int to_idx = static_cast<int>(std::find(dims_.begin(), dims_.end(), to) - dims_.begin());
    int from_idx = static_cast<int>(std::find(dims_.begin(), dims_.end(), from) - dims_.begin());
    if (to_idx >= static_cast<int>(dims_.size()) || from_idx >= static_cast<int>(dims_.size())) return false;
    for (std::size_t i = 0; i < primes_.size(); ++i)
      if (g[i] == from_idx) {
        g[i] = to_idx;
        return true;
      }
    return false;
  };
  for (int step = 0; step < 12; ++step) {
    PlanCheck chk = check(g);
    if (chk.feasible()) break;
    const std::string& field = chk.violations.front().field;
    bool moved = false;
    const int etp_gene = gene_index(Decision::Kind::EtpSplit);
    if (field == "/degrees/tp") {
      moved = move_factor(Dim::Tp, model_.is_moe() ? Dim::AttnDp : Dim::Dp);
      if (!moved && options_.mapping) {
        int mi = gene_index(Decision::Kind::Mapping);
        moved = g[static_cast<std::size_t>(mi)] != 0, g[static_cast<std::size_t>(mi)] = 0;
      }
    } else if (field == "/degrees/ep" && etp_gene >= 0) {
      auto& k = g[static_cast<std::size_t>(etp_gene)];
      if (k < static_cast<int>(degree_parts(g).unit_primes.size())) ++k, moved = true;
      else moved = move_factor(Dim::AttnDp, Dim::Dp);
    } else if (field == "/degrees/etp" && etp_gene >= 0) {
      auto& k = g[static_cast<std::size_t>(etp_gene)];
      if (k > 0) --k, moved = true;
      if (!moved && options_.mapping) {
        int mi = gene_index(Decision::Kind::Mapping);
        moved = g[static_cast<std::size_t>(mi)] != 0, g[static_cast<std::size_t>(mi)] = 0;
      }
    } else if (field == "/degrees/pp") {
      moved = move_factor(Dim::Pp, Dim::Dp);
    } else if (field == "/memory") {
      moved = move_factor(Dim::Dp, Dim::Pp);
      if (!moved && model_.is_moe()) moved = move_factor(Dim::AttnDp, Dim::Pp);
      if (!moved && options_.batching) {
        for (Decision::Kind kind : {Decision::Kind::MaxBatchTokens, Decision::Kind::MaxSeqs}) {
          auto& v = g[static_cast<std::size_t>(gene_index(kind))];
          if (!moved && v > 0) --v, moved = true;
        }
      }
    }
    if (!moved) break;
    g = canonical(g);
  }
  return canonical(g);
}

std::vector<char> PoolSpace::valid_values(int d, const Genes& prefix) const {
  const Decision& dec = decisions_[static_cast<std::size_t>(d)];
  std::vector<char> ok(static_cast<std::size_t>(dec.size()), 1);
  const ModelSpec& m = model_;
  if (dec.kind == Decision::Kind::Factor) {
    // Degrees so far from the earlier factor genes.
    std::array<int, 4> deg{1, 1, 1, 1};
    for (int i = 0; i < d; ++i)
      if (decisions_[static_cast<std::size_t>(i)].kind == Decision::Kind::Factor)
        deg[static_cast<std::size_t>(dims_[static_cast<std::size_t>(prefix[static_cast<std::size_t>(i)])])] *=
            decisions_[static_cast<std::size_t>(i)].prime;
    for (int v = 0; v < dec.size(); ++v) {
      Dim dim = dims_[static_cast<std::size_t>(v)];
      long next = static_cast<long>(deg[static_cast<std::size_t>(dim)]) * dec.prime;
      bool good = true;
      if (dim == Dim::Tp) {
        good = (base_.allow_cross_node_tp || next <= cluster_.gpus_per_node()) && m.heads % next == 0 &&
               (m.kv_heads % next == 0 || next % m.kv_heads == 0) &&
               (m.dense_ffn == 0 || m.num_dense_layers() == 0 || m.dense_ffn % next == 0);
      } else if (dim == Dim::Pp) {
        good = next <= m.layers;
      } else if (dim == Dim::AttnDp) {
        good = !m.is_moe() || next * deg[static_cast<std::size_t>(Dim::Tp)] <= static_cast<long>(m.experts) * 64;
      }
      ok[static_cast<std::size_t>(v)] = good;
    }
  } else if (dec.kind == Decision::Kind::EtpSplit) {
    DegreeParts p = degree_parts(prefix);
    const int unit = p.tp * p.attn_dp;
    for (int k = 0; k < dec.size(); ++k) {
      if (k > static_cast<int>(p.unit_primes.size())) {
        ok[static_cast<std::size_t>(k)] = 0;
        continue;
      }
      int etp = 1;
      for (int i = 0; i < k; ++i) etp *= p.unit_primes[static_cast<std::size_t>(i)];
      int ep = unit / etp;
      ok[static_cast<std::size_t>(k)] = m.experts % ep == 0 && m.expert_ffn % etp == 0 &&
                                        (base_.allow_cross_node_tp || etp <= cluster_.gpus_per_node());
    }
  } else if (dec.kind == Decision::Kind::Sp) {
    if (degree_parts(prefix).tp == 1) ok[1] = 0;
  } else if (dec.kind == Decision::Kind::Dispatch) {
    if (degree_parts(prefix).dp == 1) std::fill(ok.begin() + 1, ok.end(), 0);
  } else if (dec.kind == Decision::Kind::Redundant) {
    DegreeParts p = degree_parts(prefix);
    const int k = std::min<int>(prefix[static_cast<std::size_t>(gene_index(Decision::Kind::EtpSplit))],
                                static_cast<int>(p.unit_primes.size()));
    int etp = 1;
    for (int i = 0; i < k; ++i) etp *= p.unit_primes[static_cast<std::size_t>(i)];
    const int limit = redundant_limit(p.tp * p.attn_dp / etp);
    for (int v = limit + 1; v < dec.size(); ++v) ok[static_cast<std::size_t>(v)] = 0;
  }
  if (std::find(ok.begin(), ok.end(), 1) == ok.end()) std::fill(ok.begin(), ok.end(), 1);
  return ok;
}

double SearchSpace::raw_size() const {
  double s = 1;
  for (const auto& d : decisions_) s *= d.size();
  return s;
}

void PoolSpace::for_each_canonical(const std::function<bool(const Genes&)>& visit) const {
  // Canonical degree genes: non-decreasing within each run of equal primes. Enumerate them as
  // one odometer over all factor genes, skipping non-canonical combinations.
  Genes g(decisions_.size(), 0);
  const int nf = options_.degrees ? static_cast<int>(primes_.size()) : 0;
  const int nd = static_cast<int>(dims_.size());
  auto next_degrees = [&]() {
    for (;;) {
      int i = nf - 1;
      while (i >= 0 && g[static_cast<std::size_t>(i)] == nd - 1) g[static_cast<std::size_t>(i--)] = 0;
      if (i < 0) return false;
      ++g[static_cast<std::size_t>(i)];
      bool canon = true;
      for (int j = 1; j < nf && canon; ++j)
        if (primes_[static_cast<std::size_t>(j)] == primes_[static_cast<std::size_t>(j - 1)] &&
            g[static_cast<std::size_t>(j)] < g[static_cast<std::size_t>(j - 1)])
          canon = false;
      if (canon) return true;
    }
  };
  bool more = true;
  while (more) {
    // For these degrees, odometer over the remaining genes, keeping canonical genomes only.
    std::vector<int> rest;
    for (int i = nf; i < num_decisions(); ++i) rest.push_back(i);
    for (int i : rest) g[static_cast<std::size_t>(i)] = 0;
    for (;;) {
      if (canonical(g) == g && !visit(g)) return;
      int r = static_cast<int>(rest.size()) - 1;
      while (r >= 0) {
        auto& v = g[static_cast<std::size_t>(rest[static_cast<std::size_t>(r)])];
        if (++v < decisions_[static_cast<std::size_t>(rest[static_cast<std::size_t>(r)])].size()) break;
        v = 0;
        --r;
      }
      if (r < 0) break;
    }
    more = nf > 0 && next_degrees();
  }
}

double PoolSpace::canonical_size() const {
  // Per canonical degree assignment (and etp split, sp), multiply the distinct values the other
  // genes can take: relevant sharding genes, distinct canonical mappings, batching.
  double total = 0;
  const int nf = options_.degrees ? static_cast<int>(primes_.size()) : 0;
  const int etp_gene = gene_index(Decision::Kind::EtpSplit), sp_gene = gene_index(Decision::Kind::Sp);
  Genes g(decisions_.size(), 0);
  const int nd = static_cast<int>(dims_.size());
  for (bool more = true; more;) {
    bool canon = true;
    for (int j = 1; j < nf && canon; ++j)
      if (primes_[static_cast<std::size_t>(j)] == primes_[static_cast<std::size_t>(j - 1)] &&
          g[static_cast<std::size_t>(j)] < g[static_cast<std::size_t>(j - 1)])
        canon = false;
    if (canon) {
      DegreeParts d = degree_parts(g);
      const int ks = etp_gene >= 0 ? static_cast<int>(d.unit_primes.size()) + 1 : 1;
      for (int k = 0; k < ks; ++k) {
        int etp = 1;
        for (int i = 0; i < k; ++i) etp *= d.unit_primes[static_cast<std::size_t>(i)];
        if (!options_.degrees) etp = base_.deg.etp;
        double n = (sp_gene >= 0 && d.tp > 1) ? 2 : 1;
        if (options_.degrees && model_.is_moe()) n *= redundant_limit(d.tp * d.attn_dp / etp) + 1;
        int nontrivial = 0;
        for (int v : {d.tp, d.attn_dp, d.pp, d.dp}) nontrivial += v > 1;
        for (const auto& dec : decisions_) {
          if (dec.kind == Decision::Kind::Shard && op_relevant(dec.op, d.tp, etp)) n *= dec.size();
          if (dec.kind == Decision::Kind::Mapping) n *= std::tgamma(nontrivial + 1);
          if (dec.kind == Decision::Kind::MaxSeqs || dec.kind == Decision::Kind::MaxBatchTokens) n *= dec.size();
          if (dec.kind == Decision::Kind::Dispatch && d.dp > 1) n *= dec.size();
        }
        total += n;
      }
    }
    int i = nf - 1;
    while (i >= 0 && g[static_cast<std::size_t>(i)] == nd - 1) g[static_cast<std::size_t>(i--)] = 0;
    if (i < 0) more = false;
    else ++g[static_cast<std::size_t>(i)];
  }
  return total;
}

Genes PoolSpace::random(const std::function<std::uint64_t()>& next) const {
  Genes g(decisions_.size());
  for (std::size_t i = 0; i < g.size(); ++i)
    g[i] = static_cast<int>(next() % static_cast<std::uint64_t>(decisions_[i].size()));
  return canonical(g);
}

}  // namespace shardsim
