// sim/step/link_traffic.hpp — which links a step's communication crosses, and how hard.
//
// Owns: LinkTrafficCounter, the analytic account of a step program's bytes per link and link
// class. Each operation's traffic follows what NCCL moves: an all-reduce, reduce-scatter or
// all-gather the flows of the pattern of the algorithm NCCL would pick (collective_pattern.hpp,
// the same flows the SimGrid tier expands: a ring's 2(p−1)/p or (p−1)/p of the buffer per member;
// across nodes rings inside each node and one per rail across them; a tree's or NVLS's stages);
// an all-to-all sends its matrix pair by pair; a send goes once. A pair of GPUs on different nodes and different rails of a rail-optimised fabric stays on
// one rail: sends and collectives go as NCCL's PXN sends them (over NVLink to the sender's GPU on
// the receiver's rail, then along that rail); an all-to-all goes the way all_to_all_routing()
// picks for it, as both executors route it (send side, or receive side: along the sender's rail,
// then over NVLink on the receiver's node). Bytes follow the
// cluster's shortest routes, per link direction; folded operations count `weight` times. The
// figures explain where traffic goes (which class carries it, how busy its busiest link is); the
// step's time still comes from the executors' collective models.
// Thread-safety: one counter per thread (it caches routes, in a table of the pairs of the GPUs it
// has routed between — a replica's, not the cluster's: its memory follows the traffic, not the
// cluster's size).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/step/collective_cost.hpp"
#include "sim/step/step_program.hpp"
#include "topologies/link_class.hpp"

namespace shardsim {

class Cluster;

struct LinkTraffic {
  std::array<double, kNumLinkClasses> bytes{};    // carried by links of the class, summed over links and directions
  std::array<double, kNumLinkClasses> busiest{};  // seconds the class's busiest link direction needs: its bytes / bandwidth
};

class LinkTrafficCounter {
 public:
  explicit LinkTrafficCounter(const Cluster& cluster, const CollectiveModel& model = {});
  LinkTraffic count(const StepProgram& program);

 private:
  // The link directions (2 × link id, + 1 when traversed from link_ends().second to .first) of
  // the route src → dst: [first, last) of hops_, filled on first use.
  std::pair<const int*, const int*> hops(int src_gpu, int dst_gpu);
  void flow(int src_gpu, int dst_gpu, double bytes, A2aRouting routing = A2aRouting::SendSide);
  void carry(int src_gpu, int dst_gpu, double bytes);
  void collective(const StepProgram& p, const StepOp& op);

  const Cluster& c_;
  CollectiveModel model_;
  // GPU → its index among the GPUs routed so far (−1: none yet); grows the pair table on a new one.
  int local(int gpu);
  std::vector<std::int32_t> local_;     // [gpu] (the cluster's GPUs, 4 bytes each)
  int seen_ = 0, cap_ = 0;              // GPUs indexed; the table's row length (≥ seen_)
  std::vector<std::int32_t> route_at_;  // [local src · cap_ + local dst]: offset in hops_ (+1; 0 = not yet routed)
  std::vector<int> hops_;               // link directions of the routes found, each route's preceded by its length
  std::map<std::tuple<std::vector<int>, int, double, int, int>, CollectiveTime> choice_;  // (GPUs, kind, bytes, algo, all-reduce kernels) → the choice
  std::vector<double> load_;     // bytes per link direction (2 × link id + backward)
  std::vector<int> touched_;
};

}  // namespace shardsim
