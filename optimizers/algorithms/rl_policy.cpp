// optimizers/algorithms/rl_policy.cpp — the attention decoder, its hand-written backward pass, Adam, save/load.
//
// Backward pass (per decoded decision d with allowed values V_d, chosen value g, weights w = w_ed, λ):
//   G_v = dL/dz_v = w (π_v − [v = g]) + λ π_v (log π_v + H_d)                 for v ∈ V_d
//   o = W_o x + b_o, x = [q; c]:   de[d,v] += G_v o,  db[d,v] += G_v,  do = Σ_v G_v e[d,v],
//                                  dW_o += do xᵀ,  db_o += do,  dx = W_oᵀ do
//   copy term:                     da_i += β Σ_v G_v [g_id = v],  dβ += Σ_v G_v Σ_i a_i [g_id = v]
//   c = Σ_i a_i v_i:               da_i += dc·v_i,  dv_i += a_i dc
//   a = softmax(σ), σ_i = k_i·q/√D: dσ_i = a_i (da_i − Σ_j a_j da_j),  dq += Σ_i dσ_i k_i / √D,
//                                  dk_i += dσ_i q / √D
//   q = tanh(u):                   du = dq ⊙ (1 − q²),  dQ_d += du,  dQ_pos += φ_d du,  dW_s += du s_dᵀ
//   s_d = (1/d) Σ_{j<d} e[j,g_j]:  de[j,g_j] += Σ_{d>j} W_sᵀ du_d / d
// and once per batch through the elite tokens (T = [t_i], M = [m_i], F = [f_i]):
//   dT = W_kᵀ dK + W_vᵀ dV,  dW_k += dK Tᵀ,  dW_v += dV Tᵀ,  dP = dT ⊙ (1 − T²),
//   dW_t += dP Mᵀ,  dw_r += dP Fᵀ,  db_t += Σ_i dP_i,  de[j, g_ij] += (W_tᵀ dP)_i / n.
#include "optimizers/algorithms/rl_policy.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "optimizers/algorithms/optimizer.hpp"

namespace shardsim {

using Eigen::MatrixXd;
using Eigen::VectorXd;

namespace {

constexpr const char* kFormat = "shardsim-rl-policy";

// A disaggregated space's decisions are named "prefill …" / "decode …": each pool has its own entries.
std::string pool_of(const Decision& dec) {
  for (const char* p : {"prefill ", "decode "})
    if (dec.name.rfind(p, 0) == 0 && dec.kind != Decision::Kind::Shard) return p;
  return "";
}

std::string kind_key(const Decision& dec) {
  switch (dec.kind) {
    case Decision::Kind::Factor: return "factor";
    case Decision::Kind::EtpSplit: return "etp split";
    case Decision::Kind::Sp: return "sp";
    case Decision::Kind::Redundant: return "redundant experts";
    case Decision::Kind::Shard: return "shard " + dec.name;
    case Decision::Kind::Mapping: return "mapping";
    case Decision::Kind::MaxSeqs: return "max_seqs";
    case Decision::Kind::MaxBatchTokens: return "max_batch_tokens";
    case Decision::Kind::Dispatch: return "dispatch";
    case Decision::Kind::PoolSplit: return "pool split";
  }
  return dec.name;
}

std::string decision_key(const Decision& dec) { return pool_of(dec) + kind_key(dec); }

// The shape an entry of a `dim`-wide policy must have; {-1, -1} for an unknown key.
std::pair<int, int> shape_of(const std::string& key, int dim) {
  if (key == "W_s" || key == "W_t" || key == "W_k" || key == "W_v") return {dim, dim};
  if (key == "w_r") return {dim, 2};
  if (key == "b_t" || key == "b_o") return {dim, 1};
  if (key == "W_o") return {dim, 2 * dim};
  if (key == "beta") return {1, 1};
  auto starts = [&](const char* p) { return key.rfind(p, 0) == 0 && key.size() > 2; };
  if (starts("q:") || starts("e:")) return {dim, 1};
  if (starts("b:")) return {1, 1};
  return {-1, -1};
}

// log-softmax of z (finite entries only).
VectorXd log_softmax(const VectorXd& z) {
  const double mx = z.maxCoeff();
  const double lse = mx + std::log((z.array() - mx).exp().sum());
  return (z.array() - lse).matrix();
}

}  // namespace

// ---- ParamTable ----------------------------------------------------------------------------

int ParamTable::find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? -1 : it->second;
}

int ParamTable::add(const std::string& key, MatrixXd value) {
  if (index_.count(key)) throw std::logic_error("ParamTable::add: duplicate key " + key);
  const int i = size();
  keys_.push_back(key);
  values_.push_back(std::move(value));
  index_.emplace(key, i);
  return i;
}

std::vector<MatrixXd> ParamTable::zeros() const {
  std::vector<MatrixXd> out;
  out.reserve(values_.size());
  for (const auto& m : values_) out.push_back(MatrixXd::Zero(m.rows(), m.cols()));
  return out;
}

// ---- masks -------------------------------------------------------------------------------

std::vector<char> decision_mask(const SearchSpace& space, int d, const Genes& prefix) {
  std::vector<char> ok = space.valid_values(d, prefix);
  const auto& decs = space.decisions();
  const Decision& dec = decs[static_cast<std::size_t>(d)];
  std::vector<char> canon = ok;
  if (dec.kind == Decision::Kind::Factor) {
    if (d > 0 && decs[static_cast<std::size_t>(d - 1)].kind == Decision::Kind::Factor &&
        decs[static_cast<std::size_t>(d - 1)].prime == dec.prime)
      for (int v = 0; v < prefix[static_cast<std::size_t>(d - 1)] && v < dec.size(); ++v)
        canon[static_cast<std::size_t>(v)] = 0;
  } else if (dec.kind == Decision::Kind::Shard || dec.kind == Decision::Kind::Mapping) {
    Genes g(prefix.begin(), prefix.begin() + d);
    g.resize(static_cast<std::size_t>(space.num_decisions()), 0);
    for (int v = 0; v < dec.size(); ++v) {
      if (!canon[static_cast<std::size_t>(v)]) continue;
      g[static_cast<std::size_t>(d)] = v;
      canon[static_cast<std::size_t>(v)] = space.canonical(g)[static_cast<std::size_t>(d)] == v;
    }
  }
  if (std::find(canon.begin(), canon.end(), 1) != canon.end()) return canon;
  return ok;
}

// ---- the policy --------------------------------------------------------------------------

struct RlPolicy::Step {
  int d = 0;
  std::vector<int> values;  // allowed values, ascending
  std::vector<int> slot;    // per value of the decision: its index in `values`, or −1
  VectorXd s, q, x, o, a, z, logp;
  double entropy = 0;
};

RlPolicy::RlPolicy(int dim, bool attention, std::uint64_t seed) : dim_(dim), attention_(attention), seed_(seed) {
  if (dim < 1) throw std::invalid_argument("RlPolicy: dim must be ≥ 1");
}

int RlPolicy::ensure(const std::string& key, int rows, int cols, double scale) {
  int i = params_.find(key);
  if (i >= 0) return i;
  Rng rng("rl-init " + key, seed_);
  MatrixXd m(rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m(r, c) = scale == 0 ? 0.0 : scale * rng.normal();
  return params_.add(key, std::move(m));
}

void RlPolicy::bind(const SearchSpace& space) {
  const int D = dim_;
  const double inv = 1 / std::sqrt(static_cast<double>(D));
  w_s_ = ensure("W_s", D, D, inv);
  w_t_ = ensure("W_t", D, D, inv);
  w_r_ = ensure("w_r", D, 2, 1);
  b_t_ = ensure("b_t", D, 1, 0);
  w_k_ = ensure("W_k", D, D, inv);
  w_v_ = ensure("W_v", D, D, inv);
  w_o_ = ensure("W_o", D, 2 * D, 0.1 * inv);
  b_o_ = ensure("b_o", D, 1, 0);
  if (params_.find("beta") < 0) params_.add("beta", MatrixXd::Constant(1, 1, 1.0));
  beta_ = params_.find("beta");

  double log_gpus = 0;
  for (const auto& dec : space.decisions())
    if (dec.kind == Decision::Kind::Factor) log_gpus += std::log(static_cast<double>(dec.prime));
  double placed = 0;
  layout_.clear();
  for (const auto& dec : space.decisions()) {
    DecisionLayout l;
    const std::string dk = decision_key(dec);
    l.query = ensure("q:" + dk, D, 1, 0.5);
    if (dec.kind == Decision::Kind::Factor) {
      l.query_pos = ensure("q:factor#position", D, 1, 0.5);
      l.position = log_gpus > 0 ? placed / log_gpus : 0;
      placed += std::log(static_cast<double>(dec.prime));
    }
    for (const auto& label : dec.labels) {
      l.embed.push_back(ensure("e:" + dk + "=" + label, D, 1, inv));
      l.bias.push_back(ensure("b:" + dk + "=" + label, 1, 1, 0));
    }
    layout_.push_back(std::move(l));
  }
  space_ = &space;
}

RlPolicy::Context RlPolicy::encode(const std::vector<EliteToken>& elites) const {
  if (!space_) throw std::logic_error("RlPolicy: bind() a space first");
  const int D = dim_, K = static_cast<int>(elites.size());
  Context c;
  c.m = MatrixXd::Zero(D, K);
  c.f = MatrixXd::Zero(2, K);
  for (int i = 0; i < K; ++i) {
    const Genes& g = elites[static_cast<std::size_t>(i)].genes;
    if (!space_->in_range(g)) throw std::logic_error("RlPolicy::encode: an elite genome is out of range");
    c.genes.push_back(g);
    for (std::size_t j = 0; j < g.size(); ++j)
      c.m.col(i) += params_[layout_[j].embed[static_cast<std::size_t>(g[j])]].col(0);
    if (!g.empty()) c.m.col(i) /= static_cast<double>(g.size());
    c.f(0, i) = elites[static_cast<std::size_t>(i)].rank;
    c.f(1, i) = elites[static_cast<std::size_t>(i)].reward;
  }
  MatrixXd pre = params_[w_t_] * c.m + params_[w_r_] * c.f;
  pre.colwise() += params_[b_t_].col(0);
  c.t = pre.array().tanh().matrix();
  c.k = params_[w_k_] * c.t;
  c.v = params_[w_v_] * c.t;
  return c;
}

void RlPolicy::forward_step(const Context& ctx, int d, const VectorXd& s, const std::vector<char>& mask,
                            Step& st) const {
  const DecisionLayout& l = layout_[static_cast<std::size_t>(d)];
  const int D = dim_;
  const int n = static_cast<int>(mask.size());
  st.d = d;
  st.values.clear();
  st.slot.assign(static_cast<std::size_t>(n), -1);
  for (int v = 0; v < n; ++v)
    if (mask[static_cast<std::size_t>(v)]) {
      st.slot[static_cast<std::size_t>(v)] = static_cast<int>(st.values.size());
      st.values.push_back(v);
    }
  st.s = s;
  VectorXd u = params_[l.query].col(0) + params_[w_s_] * s;
  if (l.query_pos >= 0) u += l.position * params_[l.query_pos].col(0);
  st.q = u.array().tanh().matrix();
  st.x = VectorXd::Zero(2 * D);
  st.x.head(D) = st.q;
  const int K = attention_ ? ctx.size() : 0;
  if (K > 0) {
    VectorXd sc = ctx.k.transpose() * st.q / std::sqrt(static_cast<double>(D));
    st.a = (sc.array() - sc.maxCoeff()).exp().matrix();
    st.a /= st.a.sum();
    st.x.tail(D) = ctx.v * st.a;
  } else {
    st.a.resize(0);
  }
  st.o = params_[w_o_] * st.x + params_[b_o_].col(0);
  const int m = static_cast<int>(st.values.size());
  st.z.resize(m);
  for (int i = 0; i < m; ++i) {
    const int v = st.values[static_cast<std::size_t>(i)];
    st.z[i] = params_[l.embed[static_cast<std::size_t>(v)]].col(0).dot(st.o) +
              params_[l.bias[static_cast<std::size_t>(v)]](0, 0);
  }
  if (K > 0) {
    const double beta = params_[beta_](0, 0);
    for (int i = 0; i < K; ++i) {
      const int slot =
          st.slot[static_cast<std::size_t>(ctx.genes[static_cast<std::size_t>(i)][static_cast<std::size_t>(d)])];
      if (slot >= 0) st.z[slot] += beta * st.a[i];
    }
  }
  st.logp = log_softmax(st.z);
  st.entropy = 0;
  for (int i = 0; i < m; ++i) st.entropy -= std::exp(st.logp[i]) * st.logp[i];
}

Episode RlPolicy::sample(const Context& ctx, Rng& rng, PlanTrie* trie, double temperature, DecodeCache* cache,
                         const Genes* anchor) const {
  if (!space_) throw std::logic_error("RlPolicy: bind() a space first");
  if (trie && trie->exhausted()) throw std::logic_error("RlPolicy::sample: every reachable genome was proposed");
  const int n = space_->num_decisions();
  Episode ep;
  ep.genes.assign(static_cast<std::size_t>(n), 0);
  ep.masks.resize(static_cast<std::size_t>(n));
  VectorXd sum = VectorXd::Zero(dim_);
  Step st;
  std::vector<int> path;
  int node = 0, memo = 0;
  for (int d = 0; d < n; ++d) {
    // The decision mask: from the memo, the trie, or computed (and kept by both).
    DecodeCache::Node* cn = cache ? &cache->nodes_[static_cast<std::size_t>(memo)] : nullptr;
    PlanTrie::Node* tn = trie ? &trie->nodes_[static_cast<std::size_t>(node)] : nullptr;
    std::vector<char> full;
    if (cn && !cn->mask.empty())
      full = cn->mask;
    else if (tn && !tn->mask.empty())
      full = tn->mask;
    else
      full = decision_mask(*space_, d, ep.genes);
    if (cn && cn->mask.empty()) cn->mask = full, cn->child.assign(full.size(), -1);
    if (tn && tn->mask.empty()) tn->mask = full, tn->child.assign(full.size(), -1);
    std::vector<char> mask = full;
    if (tn) {
      path.push_back(node);
      for (std::size_t v = 0; v < mask.size(); ++v)
        if (tn->child[v] >= 0 && trie->nodes_[static_cast<std::size_t>(tn->child[v])].full) mask[v] = 0;
    }
    const int allowed = static_cast<int>(std::count(mask.begin(), mask.end(), 1));
    if (allowed == 0) throw std::logic_error("RlPolicy::sample: a decision has no allowed value");
    int g = static_cast<int>(std::find(mask.begin(), mask.end(), 1) - mask.begin());
    const int forced = anchor ? (*anchor)[static_cast<std::size_t>(d)] : -1;
    if (forced >= 0 && forced < static_cast<int>(mask.size()) && mask[static_cast<std::size_t>(forced)]) {
      g = forced;  // kept from the anchor (a local move changes only the free decisions)
    } else if (allowed > 1) {
      // Logits of every value the decision mask allows (they do not depend on the trie's mask).
      VectorXd z;
      if (cn && cn->z.size()) {
        z = cn->z;
      } else {
        forward_step(ctx, d, d > 0 ? VectorXd(sum / d) : VectorXd::Zero(dim_), full, st);
        z = VectorXd::Zero(static_cast<long>(full.size()));
        for (std::size_t i = 0; i < st.values.size(); ++i) z[st.values[i]] = st.z[static_cast<long>(i)];
        if (cn) cn->z = z;
      }
      std::vector<int> values;
      for (int v = 0; v < static_cast<int>(mask.size()); ++v)
        if (mask[static_cast<std::size_t>(v)]) values.push_back(v);
      VectorXd zv(static_cast<long>(values.size()));
      for (std::size_t i = 0; i < values.size(); ++i) zv[static_cast<long>(i)] = z[values[i]] / temperature;
      const VectorXd p = log_softmax(zv).array().exp().matrix();
      double u = rng.uniform(), acc = 0;
      g = values.back();
      for (long i = 0; i < p.size(); ++i) {
        acc += p[i];
        if (u < acc) {
          g = values[static_cast<std::size_t>(i)];
          break;
        }
      }
    }
    ep.genes[static_cast<std::size_t>(d)] = g;
    ep.masks[static_cast<std::size_t>(d)] = std::move(mask);
    sum += params_[layout_[static_cast<std::size_t>(d)].embed[static_cast<std::size_t>(g)]].col(0);
    if (trie) node = trie->child(node, g);
    if (cache) {
      int c = cache->nodes_[static_cast<std::size_t>(memo)].child[static_cast<std::size_t>(g)];
      if (c < 0) {
        c = static_cast<int>(cache->nodes_.size());
        cache->nodes_.emplace_back();  // may reallocate: index again
        cache->nodes_[static_cast<std::size_t>(memo)].child[static_cast<std::size_t>(g)] = c;
      }
      memo = c;
    }
  }
  if (trie) {
    path.push_back(node);
    trie->close(path);
  }
  return ep;
}

// ---- the trie of proposed genomes --------------------------------------------------------

int PlanTrie::child(int node, int v) {
  int c = nodes_[static_cast<std::size_t>(node)].child[static_cast<std::size_t>(v)];
  if (c >= 0) return c;
  c = static_cast<int>(nodes_.size());
  nodes_.emplace_back();  // may reallocate: index again below
  nodes_[static_cast<std::size_t>(node)].child[static_cast<std::size_t>(v)] = c;
  return c;
}

void PlanTrie::close(const std::vector<int>& path) {
  Node& leaf = nodes_[static_cast<std::size_t>(path.back())];
  if (!leaf.full) ++leaves_;
  leaf.full = true;
  for (std::size_t i = path.size() - 1; i-- > 0;) {
    Node& nd = nodes_[static_cast<std::size_t>(path[i])];
    bool full = true;
    for (std::size_t v = 0; v < nd.mask.size() && full; ++v)
      if (nd.mask[v]) full = nd.child[v] >= 0 && nodes_[static_cast<std::size_t>(nd.child[v])].full;
    if (!full) break;
    nd.full = true;
  }
}

void PlanTrie::insert(const SearchSpace& space, const Genes& genes) {
  std::vector<int> path;
  int node = 0;
  for (int d = 0; d < space.num_decisions(); ++d) {
    path.push_back(node);
    Node& nd = nodes_[static_cast<std::size_t>(node)];
    if (nd.mask.empty()) {
      nd.mask = decision_mask(space, d, genes);
      nd.child.assign(nd.mask.size(), -1);
    }
    const int g = genes[static_cast<std::size_t>(d)];
    if (g < 0 || g >= static_cast<int>(nd.mask.size()) || !nd.mask[static_cast<std::size_t>(g)]) return;
    node = child(node, g);
  }
  path.push_back(node);
  close(path);
}

Episode RlPolicy::episode_of(const Genes& genes) const {
  if (!space_) throw std::logic_error("RlPolicy: bind() a space first");
  if (!space_->in_range(genes)) throw std::logic_error("RlPolicy::episode_of: genome out of range");
  Episode ep;
  ep.genes = genes;
  for (int d = 0; d < space_->num_decisions(); ++d) ep.masks.push_back(decision_mask(*space_, d, genes));
  return ep;
}

std::vector<std::vector<double>> RlPolicy::probabilities(const Context& ctx, const Episode& ep) const {
  if (!space_) throw std::logic_error("RlPolicy: bind() a space first");
  const int n = space_->num_decisions();
  std::vector<std::vector<double>> out(static_cast<std::size_t>(n));
  VectorXd sum = VectorXd::Zero(dim_);
  Step st;
  for (int d = 0; d < n; ++d) {
    const auto& mask = ep.masks[static_cast<std::size_t>(d)];
    const int g = ep.genes[static_cast<std::size_t>(d)];
    auto& p = out[static_cast<std::size_t>(d)];
    p.assign(mask.size(), 0.0);
    const int allowed = static_cast<int>(std::count(mask.begin(), mask.end(), 1));
    if (allowed > 1) {
      forward_step(ctx, d, d > 0 ? VectorXd(sum / d) : VectorXd::Zero(dim_), mask, st);
      for (std::size_t i = 0; i < st.values.size(); ++i)
        p[static_cast<std::size_t>(st.values[i])] = std::exp(st.logp[static_cast<long>(i)]);
    } else {
      for (std::size_t v = 0; v < mask.size(); ++v) p[v] = mask[v] ? 1.0 : 0.0;
    }
    sum += params_[layout_[static_cast<std::size_t>(d)].embed[static_cast<std::size_t>(g)]].col(0);
  }
  return out;
}

double RlPolicy::loss(const std::vector<EliteToken>& elites, const std::vector<Episode>& episodes,
                      std::vector<MatrixXd>* grad) const {
  if (!space_) throw std::logic_error("RlPolicy: bind() a space first");
  if (grad && static_cast<int>(grad->size()) != params_.size())
    throw std::logic_error("RlPolicy::loss: gradient buffer does not match the parameters");
  const int D = dim_, n = space_->num_decisions();
  const double root_d = std::sqrt(static_cast<double>(D));
  const Context ctx = encode(elites);
  const int K = attention_ ? ctx.size() : 0;
  MatrixXd dk = MatrixXd::Zero(D, K), dv = MatrixXd::Zero(D, K);
  auto G = [&](int i) -> MatrixXd& { return (*grad)[static_cast<std::size_t>(i)]; };
  double total = 0;
  std::vector<Step> steps;
  std::vector<VectorXd> ds(static_cast<std::size_t>(n));
  for (const Episode& ep : episodes) {
    if (static_cast<int>(ep.genes.size()) != n || static_cast<int>(ep.masks.size()) != n ||
        (!ep.step_weights.empty() && static_cast<int>(ep.step_weights.size()) != n))
      throw std::logic_error("RlPolicy::loss: episode does not match the space");
    steps.clear();
    VectorXd sum = VectorXd::Zero(D);
    for (int d = 0; d < n; ++d) {
      const auto& mask = ep.masks[static_cast<std::size_t>(d)];
      const int g = ep.genes[static_cast<std::size_t>(d)];
      if (g < 0 || g >= static_cast<int>(mask.size()) || !mask[static_cast<std::size_t>(g)])
        throw std::logic_error("RlPolicy::loss: a gene is not allowed by its mask");
      if (std::count(mask.begin(), mask.end(), 1) > 1) {
        steps.emplace_back();
        Step& st = steps.back();
        forward_step(ctx, d, d > 0 ? VectorXd(sum / d) : VectorXd::Zero(D), mask, st);
        total += -ep.weight_at(d) * st.logp[st.slot[static_cast<std::size_t>(g)]] - ep.entropy * st.entropy;
      }
      sum += params_[layout_[static_cast<std::size_t>(d)].embed[static_cast<std::size_t>(g)]].col(0);
    }
    if (!grad) continue;
    for (auto& v : ds) v.resize(0);
    for (const Step& st : steps) {
      const int d = st.d;
      const DecisionLayout& l = layout_[static_cast<std::size_t>(d)];
      const int m = static_cast<int>(st.values.size());
      const int chosen = st.slot[static_cast<std::size_t>(ep.genes[static_cast<std::size_t>(d)])];
      VectorXd p = st.logp.array().exp().matrix();
      const double w = ep.weight_at(d);
      VectorXd gz = w * p + ep.entropy * p.cwiseProduct((st.logp.array() + st.entropy).matrix());
      gz[chosen] -= w;
      VectorXd d_o = VectorXd::Zero(D);
      for (int i = 0; i < m; ++i) {
        const int v = st.values[static_cast<std::size_t>(i)];
        const int e = l.embed[static_cast<std::size_t>(v)];
        d_o += gz[i] * params_[e].col(0);
        G(e).col(0) += gz[i] * st.o;
        G(l.bias[static_cast<std::size_t>(v)])(0, 0) += gz[i];
      }
      G(w_o_) += d_o * st.x.transpose();
      G(b_o_).col(0) += d_o;
      VectorXd dx = params_[w_o_].transpose() * d_o;
      VectorXd dq = dx.head(D);
      if (K > 0) {
        VectorXd dc = dx.tail(D);
        VectorXd da = ctx.v.transpose() * dc;
        const double beta = params_[beta_](0, 0);
        for (int i = 0; i < K; ++i) {
          const int slot =
              st.slot[static_cast<std::size_t>(ctx.genes[static_cast<std::size_t>(i)][static_cast<std::size_t>(d)])];
          if (slot < 0) continue;
          da[i] += beta * gz[slot];
          G(beta_)(0, 0) += gz[slot] * st.a[i];
        }
        dv += dc * st.a.transpose();
        VectorXd dsc = st.a.cwiseProduct((da.array() - st.a.dot(da)).matrix());
        dq += ctx.k * dsc / root_d;
        dk += st.q * dsc.transpose() / root_d;
      }
      VectorXd du = dq.cwiseProduct((1 - st.q.array().square()).matrix());
      G(l.query).col(0) += du;
      if (l.query_pos >= 0) G(l.query_pos).col(0) += l.position * du;
      G(w_s_) += du * st.s.transpose();
      if (d > 0) ds[static_cast<std::size_t>(d)] = params_[w_s_].transpose() * du / d;
    }
    VectorXd carry = VectorXd::Zero(D);
    for (int d = n - 1; d >= 1; --d) {
      if (ds[static_cast<std::size_t>(d)].size()) carry += ds[static_cast<std::size_t>(d)];
      const int prev = d - 1;
      G(layout_[static_cast<std::size_t>(prev)]
            .embed[static_cast<std::size_t>(ep.genes[static_cast<std::size_t>(prev)])])
          .col(0) += carry;
    }
  }
  if (grad && K > 0) {
    MatrixXd d_t = params_[w_k_].transpose() * dk + params_[w_v_].transpose() * dv;
    G(w_k_) += dk * ctx.t.transpose();
    G(w_v_) += dv * ctx.t.transpose();
    MatrixXd d_pre = d_t.cwiseProduct((1 - ctx.t.array().square()).matrix());
    G(w_t_) += d_pre * ctx.m.transpose();
    G(w_r_) += d_pre * ctx.f.transpose();
    G(b_t_).col(0) += d_pre.rowwise().sum();
    MatrixXd d_m = params_[w_t_].transpose() * d_pre;
    for (int i = 0; i < K; ++i) {
      const Genes& g = ctx.genes[static_cast<std::size_t>(i)];
      if (g.empty()) continue;
      VectorXd share = d_m.col(i) / static_cast<double>(g.size());
      for (std::size_t j = 0; j < g.size(); ++j) G(layout_[j].embed[static_cast<std::size_t>(g[j])]).col(0) += share;
    }
  }
  return total;
}

// ---- save / load -------------------------------------------------------------------------

std::string RlPolicy::save() const {
  std::string out = "{\n";
  out += " \"format\": " + json(kFormat).dump() + ",\n";
  out += " \"version\": 1,\n";
  out += " \"dim\": " + std::to_string(dim_) + ",\n";
  out += std::string(" \"attention\": ") + (attention_ ? "true" : "false") + ",\n";
  out += " \"params\": {";
  bool first = true;
  for (const auto& [key, i] : params_.index()) {
    const MatrixXd& m = params_[i];
    out += first ? "\n  " : ",\n  ";
    first = false;
    out += json(key).dump() + ": {\"shape\": [" + std::to_string(m.rows()) + ", " + std::to_string(m.cols()) +
           "], \"data\": [";
    for (long r = 0; r < m.rows(); ++r)
      for (long c = 0; c < m.cols(); ++c) out += (r || c ? ", " : "") + json(m(r, c)).dump();
    out += "]}";
  }
  out += "\n }\n}\n";
  return out;
}

RlPolicy RlPolicy::load(const std::string& text, const std::string& source, bool attention, std::uint64_t seed) {
  const json root_value = parse_json(text, source);
  JsonObject root(root_value, source);
  if (root.string("format") != kFormat) root.fail("format", std::string("expected \"") + kFormat + "\"");
  root.integer("version", 1, 1);
  const int dim = static_cast<int>(root.integer("dim", 2, 256));
  root.boolean_or("attention", true);  // which variant saved it; either variant may load it
  // What it was trained on (`search --policy-out` records it); kept by the file, unused here.
  if (root.has("trained_on") && !root.raw("trained_on").is_object())
    root.fail("trained_on", "expected an object (the problem, budget and seed the policy was trained on)");
  const json& ps = root.raw("params");
  if (!ps.is_object()) root.fail("params", "expected an object of parameter entries");
  root.finish();
  RlPolicy policy(dim, attention, seed);
  JsonObject params(ps, source, "/params");
  for (auto it = ps.begin(); it != ps.end(); ++it) {
    const std::string& key = it.key();
    const auto [rows, cols] = shape_of(key, dim);
    if (rows < 0)
      params.fail(key, "unknown parameter (expected W_s, W_t, w_r, b_t, W_k, W_v, W_o, b_o, beta, q:…, e:…, b:…)");
    JsonObject entry = params.object(key);
    const auto shape = entry.integer_array("shape", 1, 1 << 20);
    if (shape.size() != 2 || shape[0] != rows || shape[1] != cols)
      entry.fail("shape", "expected [" + std::to_string(rows) + ", " + std::to_string(cols) + "] for dim " +
                              std::to_string(dim));
    const json& data = entry.raw("data");
    if (!data.is_array() || static_cast<long>(data.size()) != static_cast<long>(rows) * cols)
      entry.fail("data", "expected an array of " + std::to_string(rows * cols) + " numbers");
    MatrixXd m(rows, cols);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const json& x = data[static_cast<std::size_t>(r * cols + c)];
        if (!x.is_number())
          throw InputError(source, entry.pointer("data") + "/" + std::to_string(r * cols + c), "expected a number");
        m(r, c) = x.get<double>();
      }
    entry.finish();
    policy.params_.add(key, std::move(m));
  }
  params.finish();
  return policy;
}

// ---- Adam --------------------------------------------------------------------------------

void Adam::step(ParamTable& params, const std::vector<MatrixXd>& grad) {
  constexpr double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  if (static_cast<int>(grad.size()) != params.size()) throw std::logic_error("Adam::step: gradient does not match");
  for (int i = static_cast<int>(m_.size()); i < params.size(); ++i) {
    m_.push_back(MatrixXd::Zero(params[i].rows(), params[i].cols()));
    v_.push_back(MatrixXd::Zero(params[i].rows(), params[i].cols()));
  }
  ++t_;
  const double c1 = 1 - std::pow(b1, static_cast<double>(t_)), c2 = 1 - std::pow(b2, static_cast<double>(t_));
  for (int i = 0; i < params.size(); ++i) {
    const MatrixXd& g = grad[static_cast<std::size_t>(i)];
    MatrixXd& m = m_[static_cast<std::size_t>(i)];
    MatrixXd& v = v_[static_cast<std::size_t>(i)];
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g.cwiseProduct(g);
    params[i].array() -= lr_ * (m.array() / c1) / ((v.array() / c2).sqrt() + eps);
  }
}

}  // namespace shardsim
