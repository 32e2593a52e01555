// optimizers/space/disaggregated_space.cpp — the pool split and the two pools' genes (see disaggregated_space.hpp).
#include "optimizers/space/disaggregated_space.hpp"

#include <algorithm>

#include "common/input_error.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

namespace {

int count_factors(const PoolSpace& s) {
  int n = 0;
  for (const auto& d : s.decisions()) n += d.kind == Decision::Kind::Factor;
  return n;
}

// Prefill pool sizes: whole NVLink domains (1 … n−1 of them), or on one domain ¼, ½ and ¾ of it.
std::vector<int> split_sizes(const Cluster& c) {
  const int g = c.gpus_per_node(), n = c.num_gpus();
  std::vector<int> out;
  if (n / g >= 2) {
    for (int p = g; p < n; p += g) out.push_back(p);
  } else {
    for (int q = 1; q <= 3; ++q)
      if (n * q % 4 == 0 && n * q / 4 >= 1) out.push_back(n * q / 4);
    if (out.empty() && n >= 2) out.push_back(n / 2);
  }
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

DisaggregatedSpace::DisaggregatedSpace(const ModelSpec& model, const Cluster& cluster, const Plan& base, SpaceOptions options)
    : model_(model), cluster_(cluster), base_(base), options_(options) {
  options_.pools = true;
  if (!options_.degrees) throw InputError("--space", to_string(options_), "\"pools\" needs \"degrees\"");
  const std::vector<int> sizes = split_sizes(cluster);
  if (sizes.empty()) throw InputError("--space", "pools", "a disaggregated plan needs at least 2 GPUs");
  const Plan bases[2] = {base.disaggregated() ? base.prefill() : base, base.disaggregated() ? base.decode() : base};
  SpaceOptions pool_options = options_;
  pool_options.pools = false;
  SpaceOptions decode_options = pool_options;
  decode_options.routing = false;  // the decode pool is dealt round-robin as prefills end (disaggregated.cpp deal())
  const int n = cluster.num_gpus();
  // On a mixed cluster the splits are those whose pools each lie on one GPU type, in both orders
  // (prefill on the first GPUs, or decode): the split gene then chooses each pool's GPU type.
  std::vector<std::string> labels;
  for (const bool decode_first : {false, true}) {
    if (decode_first && !cluster.mixed()) break;  // (on one GPU type the order changes nothing)
    for (int p : sizes) {
      const int pre_first = decode_first ? n - p : 0, dec_first = decode_first ? 0 : p;
      if (cluster.mixed() && !(cluster.one_gpu_type(pre_first, p) && cluster.one_gpu_type(dec_first, n - p))) continue;
      Split s;
      s.prefill_gpus = p;
      s.decode_first = decode_first;
      s.pools[0] = std::make_unique<PoolSpace>(model, cluster, bases[0], pool_options, PoolGpus{p, pre_first});
      s.pools[1] = std::make_unique<PoolSpace>(model, cluster, bases[1], decode_options, PoolGpus{n - p, dec_first});
      for (int k = 0; k < 2; ++k) {
        s.factors[k] = count_factors(*s.pools[k]);
        factors_[k] = std::max(factors_[k], s.factors[k]);
      }
      const std::string P = std::to_string(p) + "P", D = std::to_string(n - p) + "D";
      labels.push_back(decode_first ? D + P : P + D);
      if (cluster.mixed())
        labels.back() += " (" + cluster.gpu_of(pre_first).name + " prefill)";
      splits_.push_back(std::move(s));
    }
  }
  if (splits_.empty())
    throw InputError("--space", "pools", "no split of " + cluster.gpus_text() + " puts each pool on one GPU type");
  Decision split;
  split.name = "pool split";
  split.kind = Decision::Kind::PoolSplit;
  split.block = Block::Degrees;
  split.ordinal = true;
  split.labels = labels;
  decisions_.push_back(split);
  for (int k = 0; k < 2; ++k) {
    first_[k] = static_cast<int>(decisions_.size());
    const int rest = splits_.front().pools[k]->num_decisions() - splits_.front().factors[k];
    for (int slot = 0; slot < factors_[k] + rest; ++slot) {
      const Decision* widest = nullptr;
      for (std::size_t s = 0; s < splits_.size(); ++s) {
        const int c = child_of(static_cast<int>(s), k, first_[k] + slot);
        if (c < 0) continue;
        const Decision& d = splits_[s].pools[k]->decisions()[static_cast<std::size_t>(c)];
        if (widest == nullptr || d.size() > widest->size()) widest = &d;
      }
      Decision d = *widest;
      d.name = std::string(k == 0 ? "prefill " : "decode ") + d.name;
      decisions_.push_back(d);
    }
  }
}

int DisaggregatedSpace::slot_of(int s, int pool, int child) const {
  const int f = splits_[static_cast<std::size_t>(s)].factors[pool];
  return first_[pool] + (child < f ? child : factors_[pool] + child - f);
}

int DisaggregatedSpace::child_of(int s, int pool, int slot) const {
  const int f = splits_[static_cast<std::size_t>(s)].factors[pool];
  const int local = slot - first_[pool];
  if (local < factors_[pool]) return local < f ? local : -1;
  return f + local - factors_[pool];
}

int DisaggregatedSpace::split_of(const Genes& g) const {
  return std::clamp(g.empty() ? 0 : g[0], 0, static_cast<int>(splits_.size()) - 1);
}

Genes DisaggregatedSpace::child_genes(const Genes& g, int s, int pool) const {
  const PoolSpace& c = *splits_[static_cast<std::size_t>(s)].pools[pool];
  Genes out(static_cast<std::size_t>(c.num_decisions()), 0);
  for (int i = 0; i < c.num_decisions(); ++i) {
    const auto slot = static_cast<std::size_t>(slot_of(s, pool, i));
    const int size = c.decisions()[static_cast<std::size_t>(i)].size();
    out[static_cast<std::size_t>(i)] = slot < g.size() ? ((g[slot] % size) + size) % size : 0;
  }
  return out;
}

void DisaggregatedSpace::put(Genes& g, int s, int pool, const Genes& child) const {
  const int end = pool == 0 ? first_[1] : num_decisions();
  for (int slot = first_[pool]; slot < end; ++slot) {
    const int c = child_of(s, pool, slot);
    g[static_cast<std::size_t>(slot)] = c < 0 ? 0 : child[static_cast<std::size_t>(c)];
  }
}

Genes DisaggregatedSpace::each_pool(const Genes& g, Genes (PoolSpace::*f)(const Genes&) const) const {
  const int s = split_of(g);
  Genes out(static_cast<std::size_t>(num_decisions()), 0);
  out[0] = s;
  for (int k = 0; k < 2; ++k) put(out, s, k, (splits_[static_cast<std::size_t>(s)].pools[k].get()->*f)(child_genes(g, s, k)));
  return out;
}

Genes DisaggregatedSpace::canonical(const Genes& g) const { return each_pool(g, &PoolSpace::canonical); }

std::string DisaggregatedSpace::key(const Genes& g) const {
  const int s = split_of(g);
  const Split& sp = splits_[static_cast<std::size_t>(s)];
  std::string k = sp.decode_first ? "D" : "P";  // appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "P" + to_string(…)
  k += std::to_string(sp.prefill_gpus);
  k += '|';
  k += sp.pools[0]->key(child_genes(g, s, 0));
  k += '|';
  k += sp.pools[1]->key(child_genes(g, s, 1));
  return k;
}

Plan DisaggregatedSpace::decode(const Genes& g) const {
  const int s = split_of(g);
  const Split& sp = splits_[static_cast<std::size_t>(s)];
  Plan p = disaggregated_plan(sp.pools[0]->decode(child_genes(g, s, 0)), sp.pools[1]->decode(child_genes(g, s, 1)),
                              sp.decode_first);
  p.name = "search";
  return p;
}

bool DisaggregatedSpace::encode(const Plan& plan, Genes& out) const {
  out.assign(static_cast<std::size_t>(num_decisions()), 0);
  if (!plan.disaggregated() || plan.total_gpus() != cluster_.num_gpus()) return false;
  for (std::size_t s = 0; s < splits_.size(); ++s) {
    if (splits_[s].prefill_gpus != plan.deg.gpus() || splits_[s].decode_first != plan.decode_first()) continue;
    Genes pre, dec;
    if (!splits_[s].pools[0]->encode(plan.prefill(), pre) || !splits_[s].pools[1]->encode(plan.decode(), dec)) return false;
    out[0] = static_cast<int>(s);
    put(out, static_cast<int>(s), 0, pre);
    put(out, static_cast<int>(s), 1, dec);
    return true;
  }
  return false;
}

PlanCheck DisaggregatedSpace::check_decoded(const Plan& decoded) const { return check_plan(decoded, model_, cluster_); }

Genes DisaggregatedSpace::repair(const Genes& g) const { return each_pool(g, &PoolSpace::repair); }

std::vector<char> DisaggregatedSpace::valid_values(int d, const Genes& prefix) const {
  std::vector<char> out(static_cast<std::size_t>(decisions_[static_cast<std::size_t>(d)].size()), 0);
  if (d == 0) {
    std::fill(out.begin(), out.end(), 1);
    return out;
  }
  const int s = split_of(prefix);
  const int pool = d < first_[1] ? 0 : 1;
  const int c = child_of(s, pool, d);
  if (c < 0) {  // padding: only its canonical 0
    out[0] = 1;
    return out;
  }
  const PoolSpace& child = *splits_[static_cast<std::size_t>(s)].pools[pool];
  Genes before = child_genes(prefix, s, pool);  // genes after position c are ignored by the child
  const std::vector<char> ok = child.valid_values(c, before);
  bool any = false;
  for (std::size_t v = 0; v < ok.size() && v < out.size(); ++v) any |= (out[v] = ok[v]) != 0;
  if (!any) out[0] = 1;
  return out;
}

double DisaggregatedSpace::canonical_size() const {
  double n = 0;
  for (const auto& s : splits_) n += s.pools[0]->canonical_size() * s.pools[1]->canonical_size();
  return n;
}

void DisaggregatedSpace::for_each_canonical(const std::function<bool(const Genes&)>& visit) const {
  for (std::size_t s = 0; s < splits_.size(); ++s) {
    bool go = true;
    splits_[s].pools[0]->for_each_canonical([&](const Genes& pre) {
      splits_[s].pools[1]->for_each_canonical([&](const Genes& dec) {
        Genes g(static_cast<std::size_t>(num_decisions()), 0);
        g[0] = static_cast<int>(s);
        put(g, static_cast<int>(s), 0, pre);
        put(g, static_cast<int>(s), 1, dec);
        go = visit(g);
        return go;
      });
      return go;
    });
    if (!go) return;
  }
}

Genes DisaggregatedSpace::random(const std::function<std::uint64_t()>& next) const {
  Genes g(static_cast<std::size_t>(num_decisions()));
  for (int i = 0; i < num_decisions(); ++i)
    g[static_cast<std::size_t>(i)] = static_cast<int>(next() % static_cast<std::uint64_t>(decisions_[static_cast<std::size_t>(i)].size()));
  return canonical(g);
}

std::unique_ptr<SearchSpace> make_search_space(const ModelSpec& model, const Cluster& cluster, const Plan& base,
                                               SpaceOptions options) {
  if (cluster.mixed() && !options.pools) {  // every colocated plan would span two GPU types (plan_check refuses that)
    if (!options.degrees)
      throw InputError("--space", to_string(options),
                       cluster.name() + " mixes " + cluster.gpus_text() + ": its plans are disaggregated, one pool per GPU type, "
                       "and the pool split is a degrees decision (add \"degrees\")");
    options.pools = true;
  }
  if (options.pools) return std::make_unique<DisaggregatedSpace>(model, cluster, base, options);
  return std::make_unique<PoolSpace>(model, cluster, base, options);
}

}  // namespace shardsim
