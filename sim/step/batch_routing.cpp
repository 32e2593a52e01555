// sim/step/batch_routing.cpp — routing a step's window of tokens and estimating the rest (see
// batch_routing.hpp and docs/simulation.md "Routing window").
#include "sim/step/batch_routing.hpp"

#include <algorithm>
#include <cmath>

#include "sim/step/expert_layout.hpp"
#include "sim/step/lowering.hpp"
#include "topologies/cluster.hpp"
#include "workloads/routing_trace.hpp"

namespace shardsim {

namespace {

// The pairs `in` holds, stably ordered by key(pair) in [0, keys), into `out` (a counting sort).
template <class Pair, class Key>
void counting_sort(const std::vector<Pair>& in, std::vector<Pair>& out, std::size_t keys, Key key) {
  std::vector<std::uint32_t> first(keys + 1, 0);
  for (const Pair& x : in) ++first[key(x) + 1];
  for (std::size_t k = 0; k < keys; ++k) first[k + 1] += first[k];
  out.resize(in.size());
  for (const Pair& x : in) out[first[key(x)]++] = x;
}

// One sequence's routed window, kept per layer for estimating its unrouted tokens.
struct WindowPicks {
  std::vector<double> picks;     // [layer j · experts + expert]
  std::vector<double> fan;       // [layer j]: distinct EP ranks summed over the window's tokens
  std::vector<double> node_fan;  // [layer j]: distinct nodes summed over them (BatchRoutingContext::nodes)
  void reset(std::size_t layers, std::size_t experts) {
    picks.assign(layers * experts, 0);
    fan.assign(layers, 0);
    node_fan.assign(layers, 0);
  }
};

// Adds the expected routing of `rest` unrouted tokens of one sequence of attention group `a`,
// whose window of `routed` tokens picked `w`, to every layer of `out`; with routed = 0 (`w` unused)
// they follow the population shares alone (any number of the group's sequences at once).
void estimate_rest(const BatchRoutingContext& ctx, int a, int routed, double rest,
                   const WindowPicks& w, std::span<LayerRouting> out) {
  const RoutingShape& shape = ctx.source->shape();
  const std::size_t E = static_cast<std::size_t>(shape.experts);
  const int k = shape.top_k;
  const ExpertLayout& ex = *ctx.experts;
  const std::span<const double> shares = ctx.source->pick_shares();
  const double prior = ctx.source->pick_concentration();  // in picks
  const double denom = routed * k + prior;
  std::vector<double> rank_share(static_cast<std::size_t>(ex.ep()));
  const UnitNodes* un = ctx.nodes;
  std::vector<double> node_share(un ? static_cast<std::size_t>(un->nodes) : 0);
  for (std::size_t j = 0; j < ctx.layers.size(); ++j) {
    const int layer = ctx.layers[j];
    LayerRouting& L = out[j];
    std::fill(rank_share.begin(), rank_share.end(), 0.0);
    std::fill(node_share.begin(), node_share.end(), 0.0);
    for (std::size_t x = 0; x < E; ++x) {
      const double share = shares[static_cast<std::size_t>(layer) * E + x];
      const double q = routed > 0 ? (w.picks[j * E + x] + prior * share) / denom : share;
      if (q <= 0) continue;
      const int r = ex.replicas(layer, static_cast<int>(x));
      const double picks = rest * k * q / r;
      // A token picks k distinct experts, so it picks this one with chance k·q (≤ 1), and the
      // slot stays idle through all `rest` tokens with chance (1 − k·q/r)^rest.
      const double idle = rest * std::log1p(-std::min(k * q / r, 1 - 1e-12));
      for (int i = 0; i < r; ++i) {
        const auto slot = static_cast<std::size_t>(ex.slot_of(layer, static_cast<int>(x), i));
        L.slot_tokens[slot] += picks;
        L.slot_log_idle[slot] += idle;
        const int e = ex.rank_of_slot(static_cast<int>(slot));
        rank_share[static_cast<std::size_t>(e)] += q / r;
        if (un) node_share[static_cast<std::size_t>(un->node[static_cast<std::size_t>(e)])] += q / r;
      }
    }
    // The same for nodes: a token reaches node n with chance 1 − (1 − share_n)^k, scaled to the
    // window's mean node fan-out.
    if (un) {
      double node_hits = 0;
      for (double& s : node_share) node_hits += (s = 1 - std::pow(1 - std::min(1.0, s), k));
      const double node_fan = routed > 0 ? w.node_fan[j] / routed : node_hits;
      if (node_hits > 0)
        for (int n = 0; n < un->nodes; ++n)
          for (int t = 0; t < ctx.tp; ++t)
            L.node_copies[static_cast<std::size_t>((a * ctx.tp + t) * un->nodes + n)] +=
                node_share[static_cast<std::size_t>(n)] * rest * node_fan / node_hits / ctx.tp;
    }
    // A token reaches rank e with chance 1 − (1 − share_e)^k, scaled to the window's mean fan-out.
    double hits = 0;
    for (double& s : rank_share) hits += (s = 1 - std::pow(1 - std::min(1.0, s), k));
    if (hits <= 0) continue;
    const double fan = routed > 0 ? w.fan[j] / routed : hits;  // EP ranks a token reaches, on average
    const double scale = rest * fan / hits / ctx.tp;
    for (int e = 0; e < ex.ep(); ++e) {
      const double copies = rank_share[static_cast<std::size_t>(e)] * scale;
      if (copies <= 0) continue;
      for (int t = 0; t < ctx.tp; ++t)
        for (int kk = 0; kk < ctx.etp; ++kk)
          L.add(static_cast<std::uint32_t>(a * ctx.tp + t), static_cast<std::uint32_t>(e * ctx.etp + kk),
                static_cast<std::size_t>(ctx.unit), copies);
    }
  }
}

}  // namespace

void LayerRouting::reset(std::size_t U, std::size_t slots, std::size_t nodes) {
  node_copies.assign(U * nodes, 0);
  if (dispatch.size() != U * U) {
    dispatch.assign(U * U, 0);
  } else {
    for (const Pair& x : touched) dispatch[x.from * U + x.to] = 0;
  }
  touched.clear();
  slot_tokens.assign(slots, 0);
  slot_routed.assign(slots, 0);
  slot_log_idle.assign(slots, 0);
}

double LayerRouting::active(std::size_t slot) const {
  if (slot_routed[slot] > 0) return 1;
  return -std::expm1(slot_log_idle[slot]);
}

void LayerRouting::sort_touched(std::size_t U, std::vector<Pair>& by_to) {
  counting_sort(touched, by_to, U, [](const Pair& x) { return x.to; });
  counting_sort(by_to, touched, U, [](const Pair& x) { return x.from; });  // (from, to) order
  counting_sort(touched, by_to, U, [](const Pair& x) { return x.to; });    // (to, from) order
}

namespace {

// Whether attention group `a` is taken from the population shares without drawing a token: with
// one EP rank, which experts a token picks changes only how many experts are read (each token goes
// to every expert-TP member either way). Once a group has 4·E/k tokens or more, at most e^−4 ≈ 2%
// of the experts are expected idle (uniform shares; more when skewed), so the fast path takes the
// expected count and draws no token; smaller groups are drawn.
bool expected_group(const BatchRoutingContext& ctx, const std::vector<SeqWork>& group, int window, double& tokens) {
  tokens = 0;
  if (window <= 0 || ctx.experts->ep() != 1) return false;
  for (const SeqWork& sq : group) tokens += std::max(0, sq.new_tokens);
  const RoutingShape& shape = ctx.source->shape();
  return tokens * shape.top_k >= 4.0 * static_cast<double>(shape.experts);
}

// The tokens of `sq` routed this step: its first `window` new tokens (0 = all of them).
int routed_of(const SeqWork& sq, int window) { return window > 0 ? std::min(sq.new_tokens, window) : sq.new_tokens; }

// The routed tokens of every sequence (routed_of), in batch order.
void draw_window(const BatchRoutingContext& ctx, const ReplicaBatch& batch, int window, std::vector<ExpertId>& ids) {
  thread_local std::vector<RoutingSource::TokenSpan> spans;
  spans.clear();
  std::size_t tokens = 0;
  for (const auto& group : batch.groups) {
    double expected = 0;
    if (expected_group(ctx, group, window, expected)) continue;
    for (const SeqWork& sq : group) {
      if (sq.new_tokens <= 0) continue;
      const int c = routed_of(sq, window);
      spans.push_back({sq.request, sq.first_pos, static_cast<std::uint32_t>(c)});
      tokens += static_cast<std::size_t>(c);
    }
  }
  const std::size_t per = ctx.layers.size() * static_cast<std::size_t>(ctx.source->shape().top_k);
  ids.resize(tokens * per);
  if (!ctx.every_layer) {
    ctx.source->route_layers(spans, ctx.layers, ids);
    return;
  }
  std::size_t at = 0;
  for (const auto& s : spans) {
    ctx.source->route_tokens(s.request, s.first, s.count, std::span<ExpertId>(ids).subspan(at, s.count * per));
    at += s.count * per;
  }
}

}  // namespace

void route_batch(const BatchRoutingContext& ctx, const ReplicaBatch& batch, int window, std::span<LayerRouting> out) {
  const RoutingSource& source = *ctx.source;
  const ExpertLayout& ex = *ctx.experts;
  const int k = source.shape().top_k;
  const std::size_t nr = ctx.layers.size(), E = static_cast<std::size_t>(source.shape().experts);
  const auto U = static_cast<std::size_t>(ctx.unit);
  long step_token = 0;  // picks a replica per token (ExpertLayout::slot_of)
  thread_local std::vector<ExpertId> all_ids;
  draw_window(ctx, batch, window, all_ids);
  const ExpertId* ids = all_ids.data();
  std::vector<int> dest, nodes_hit;
  thread_local WindowPicks picks;
  for (std::size_t a = 0; a < batch.groups.size(); ++a) {
    double tokens = 0;
    if (expected_group(ctx, batch.groups[a], window, tokens)) {
      estimate_rest(ctx, static_cast<int>(a), 0, tokens, picks, out);
      continue;
    }
    long token_index = 0;
    for (const SeqWork& sq : batch.groups[a]) {
      if (sq.new_tokens <= 0) continue;
      const int c = routed_of(sq, window);  // as draw_window drew them
      const bool estimate = c < sq.new_tokens;
      if (estimate) picks.reset(nr, E);
      for (int i = 0; i < c; ++i, ++token_index, ++step_token) {
        const auto src = static_cast<std::uint32_t>(static_cast<long>(a) * ctx.tp + token_index % ctx.tp);
        for (std::size_t j = 0; j < nr; ++j, ids += k) {
          const ExpertId* x = ids;
          LayerRouting& L = out[j];
          dest.clear();
          for (int q = 0; q < k; ++q) {
            const auto slot = static_cast<std::size_t>(ex.slot_of(ctx.layers[j], x[q], step_token));
            L.slot_tokens[slot] += 1;
            L.slot_routed[slot] += 1;
            if (estimate) picks.picks[j * E + x[q]] += 1;
            const int e = ex.rank_of_slot(static_cast<int>(slot));
            if (std::find(dest.begin(), dest.end(), e) == dest.end()) dest.push_back(e);
          }
          if (estimate) picks.fan[j] += static_cast<double>(dest.size());
          for (int e : dest)
            for (int kk = 0; kk < ctx.etp; ++kk) L.add(src, static_cast<std::uint32_t>(e * ctx.etp + kk), U, 1.0);
          if (ctx.nodes) {  // its distinct destination nodes (etp = 1: unit rank = EP rank)
            const UnitNodes& un = *ctx.nodes;
            nodes_hit.clear();
            for (int e : dest) {
              const int n = un.node[static_cast<std::size_t>(e)];
              if (std::find(nodes_hit.begin(), nodes_hit.end(), n) == nodes_hit.end()) nodes_hit.push_back(n);
            }
            for (int n : nodes_hit) L.node_copies[src * static_cast<std::size_t>(un.nodes) + static_cast<std::size_t>(n)] += 1;
            if (estimate) picks.node_fan[j] += static_cast<double>(nodes_hit.size());
          }
        }
      }
      if (estimate) estimate_rest(ctx, static_cast<int>(a), c, sq.new_tokens - c, picks, out);
    }
  }
}

void node_level_flows(std::size_t U, const UnitNodes& un, const std::vector<double>& copies,
                      const std::vector<double>& node_copies, std::vector<double>& flow) {
  flow.assign(U * U, 0.0);
  const auto N = static_cast<std::size_t>(un.nodes);
  for (std::size_t i = 0; i < U; ++i) {
    const int ni = un.node[i], ri = un.rail[i];
    for (std::size_t j = 0; j < U; ++j) {
      const double c = copies[i * U + j];
      if (!(c > 0) || i == j) continue;
      const int nj = un.node[j];
      const int p = nj == ni ? -1 : un.proxy(nj, ri);
      if (p < 0) {
        flow[i * U + j] += c;  // its own node (NVLink), or no rank on its rail there: straight to j
      } else if (static_cast<std::size_t>(p) != j) {
        flow[static_cast<std::size_t>(p) * U + j] += c;  // the proxy forwards it over NVLink
      }
    }
    for (std::size_t n = 0; n < N; ++n) {  // one RDMA copy per token and destination node
      const int p = static_cast<int>(n) == ni ? -1 : un.proxy(static_cast<int>(n), ri);
      if (p >= 0) flow[i * U + static_cast<std::size_t>(p)] += node_copies[i * N + n];
    }
  }
}

UnitNodes unit_nodes_of(const Cluster& c, const std::vector<int>& gpus) {
  UnitNodes un;
  un.rails = c.gpus_per_node();
  std::vector<int> nodes;  // cluster node ids in order of appearance
  for (int gpu : gpus) {
    const int n = c.node_of(gpu);
    auto it = std::find(nodes.begin(), nodes.end(), n);
    un.node.push_back(static_cast<int>(it - nodes.begin()));
    if (it == nodes.end()) nodes.push_back(n);
    un.rail.push_back(c.rail_of(gpu));
  }
  un.nodes = static_cast<int>(nodes.size());
  un.at.assign(static_cast<std::size_t>(un.nodes * un.rails), -1);
  for (std::size_t u = 0; u < gpus.size(); ++u)
    un.at[static_cast<std::size_t>(un.node[u] * un.rails + un.rail[u])] = static_cast<int>(u);
  return un;
}

}  // namespace shardsim
