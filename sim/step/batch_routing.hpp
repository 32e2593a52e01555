// sim/step/batch_routing.hpp — which experts one step's tokens visit at each lowered MoE layer:
// the tokens each expert slot receives, the experts each slot must read, and the unit's dispatch
// matrix, from which the MoE lowering makes grouped-GEMM work and all-to-all sizes.
//
// Owns: LayerRouting (one layer's accumulators and its dispatch/combine matrices) and
// route_batch. Each sequence's first `window` new tokens are routed through the RoutingSource, in
// one call for the whole step — all of them for decode tokens, short chunks, and on the exact path.
// The rest of a longer prompt chunk is estimated, not drawn (docs/simulation.md, "Routing window"): the
// expected picks of each expert are the posterior mean of a Dirichlet-multinomial — the window's
// picks plus the source's population shares (RoutingSource::pick_shares) weighted by its measured
// concentration κ (RoutingSource::pick_concentration), so a window of n picks and the population
// weigh n : κ; an expert that no routed token picked is active unless every estimated token
// passes it by (chance (1 − k·q)^tokens, q its expected share of the picks); and the copies sent to each EP rank follow each rank's chance of being hit
// by a token, scaled so that a token reaches as many ranks as the window's tokens did on
// average. With one EP rank (no expert parallelism) each token reaches every expert-TP member
// whatever it picks, so only the number of experts read depends on the routing; once an attention
// group holds ≥ 4·E/k tokens that number is nearly certain and the fast path takes it from the
// population shares without drawing a token. Scaling the window's own counts instead (the former rule) left a 2,000-token chunk
// with the window's ~160 of 256 experts active and spread its rank loads as 256 picks do.
// Thread-safety: route_batch is pure given its inputs; a LayerRouting is one thread's scratch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/step/step_program.hpp"

namespace shardsim {

class Cluster;
class ExpertLayout;
class RoutingSource;
struct ReplicaBatch;

// How a unit's ranks sit on nodes, for the node-level all-to-all (DeepEP's normal kernels): each
// rank's node (0 … nodes−1 among the unit's) and rail, and for each (node, rail) the unit rank
// there (−1: none). Empty (nodes = 0): every token copy goes to its rank.
struct UnitNodes {
  int nodes = 0;
  std::vector<int> node, rail;  // per unit rank
  std::vector<int> at;          // [node · rails + rail] → unit rank, or −1
  int rails = 0;
  bool empty() const { return nodes == 0; }
  int proxy(int n, int r) const { return at[static_cast<std::size_t>(n * rails + r)]; }
};

// A unit laid out on `gpus` (unit rank u on cluster GPU gpus[u]): nodes in order of first appearance.
UnitNodes unit_nodes_of(const Cluster& c, const std::vector<int>& gpus);

// Routing loads of one MoE layer for one stage's unit of U ranks.
struct LayerRouting {
  struct Pair {
    std::uint32_t from, to;
  };
  std::vector<double> dispatch;     // U×U token copies (row = source unit index), before etp fan-out
  std::vector<Pair> touched;        // the dispatch entries that hold copies, in first-touch order
  std::vector<double> slot_tokens;  // per expert slot (ExpertLayout): routed picks + expected ones
  std::vector<double> slot_routed;  // per slot: routed picks only
  std::vector<double> slot_log_idle;  // per slot: log of the chance no estimated token picks it
  // With UnitNodes (route_batch's `nodes`): U × nodes tokens each unit rank sends to each node at
  // least once (the node-level all-to-all's RDMA copies); else empty.
  std::vector<double> node_copies;

  // Empty, for a unit of U ranks, `slots` expert slots and `nodes` nodes (0: no node copies).
  void reset(std::size_t U, std::size_t slots, std::size_t nodes = 0);
  void add(std::uint32_t from, std::uint32_t to, std::size_t U, double copies) {
    double& x = dispatch[from * U + to];
    if (x == 0) touched.push_back({from, to});  // copies > 0
    x += copies;
  }
  // The chance that slot s holds a picked expert: 1 when a routed token picked it.
  double active(std::size_t slot) const;
  // The dispatch and combine matrices (`to_bytes` and `back_bytes` turn copies into bytes each
  // way), skipping `drop`ped pairs, and their totals, each summed in its (sender, receiver) order.
  template <class ToBytes, class BackBytes, class Drop>
  void matrices(std::size_t U, ToBytes to_bytes, BackBytes back_bytes, Drop drop, A2aMatrix& there, A2aMatrix& back,
                double& there_total, double& back_total);

 private:
  void sort_touched(std::size_t U, std::vector<Pair>& by_to);  // touched in (from, to), by_to in (to, from) order
};

// What route_batch needs of the replica: which MoE layers it lowers and how its unit is laid out.
struct BatchRoutingContext {
  const RoutingSource* source = nullptr;
  const ExpertLayout* experts = nullptr;
  std::span<const int> layers;  // routed MoE layers, ascending
  bool every_layer = false;     // layers are all the model's MoE layers
  int tp = 1, etp = 1, unit = 1;  // ranks of an attention group's TP group, of an expert-TP group, of the unit
  const UnitNodes* nodes = nullptr;  // set (etp = 1): count each token's distinct destination nodes too
};

// Fills out[j] (reset by the caller) with the routing of `batch` at MoE layer ctx.layers[j]. A
// token of attention group a is owned by TP rank a·tp + (its index in the group mod tp) and sends
// one copy to each distinct EP rank among its experts, to every expert-TP member of that rank.
// At most `window` tokens of each sequence are routed (0 = every token), the rest estimated.
void route_batch(const BatchRoutingContext& ctx, const ReplicaBatch& batch, int window, std::span<LayerRouting> out);

// The node-level all-to-all of one layer as plain per-pair flows (DeepEP's normal kernels,
// docs/communication.md): a token goes once to each destination node, over RDMA to the unit rank
// on the sender's rail there, which forwards it over NVLink to each destination rank on its node;
// ranks on the sender's own node get it over NVLink directly. `copies` (U×U token copies to
// ranks, L.dispatch) and `node_copies` (U×nodes) in, `flow` (U×U token copies per link pair:
// sender's RDMA to proxies, proxies' forwards, NVLink sends) out. A destination node without a
// unit rank on the sender's rail gets its copies directly. Combine runs the same flows backwards.
void node_level_flows(std::size_t U, const UnitNodes& un, const std::vector<double>& copies,
                      const std::vector<double>& node_copies, std::vector<double>& flow);
// Those flows as an all-to-all matrix (`to_bytes` turns copies into bytes) in (sender, receiver)
// order — or backwards, the combine's; returns its bytes.
template <class ToBytes>
double flow_matrix(std::size_t U, const std::vector<double>& flow, ToBytes to_bytes, bool backwards, A2aMatrix& out) {
  out = A2aMatrix(U);
  double total = 0;
  for (std::size_t a = 0; a < U; ++a)
    for (std::size_t b = 0; b < U; ++b)
      if (const double c = backwards ? flow[b * U + a] : flow[a * U + b]; c > 0) {
        out.push(static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b), to_bytes(c));
        total += to_bytes(c);
      }
  return total;
}

template <class ToBytes, class BackBytes, class Drop>
void LayerRouting::matrices(std::size_t U, ToBytes to_bytes, BackBytes back_bytes, Drop drop, A2aMatrix& there,
                            A2aMatrix& back, double& there_total, double& back_total) {
  std::vector<Pair> by_to;
  sort_touched(U, by_to);
  there = A2aMatrix(U);
  back = A2aMatrix(U);
  there.reserve(touched.size());
  back.reserve(touched.size());
  there_total = back_total = 0;
  for (const Pair& x : touched) {
    if (drop(x.from, x.to)) continue;
    const double b = to_bytes(dispatch[x.from * U + x.to]);
    there.push(x.from, x.to, b);
    there_total += b;
  }
  for (const Pair& x : by_to) {  // the combine matrix is the transpose
    if (drop(x.from, x.to)) continue;
    const double b = back_bytes(dispatch[x.from * U + x.to]);
    back.push(x.to, x.from, b);
    back_total += b;
  }
}

}  // namespace shardsim
