// sim/step/collective_pattern.hpp — the flows an all-reduce, reduce-scatter or all-gather moves.
//
// Owns: CollectivePattern, the one description of which GPU sends how many bytes to which for
// the algorithm collective_time() chose (collective_cost.hpp). Both consumers read it: the SimGrid
// task graph expands it into flows (scaled so that, alone, they take the price's bandwidth part:
// own_time() is the pattern's contention-free time at route speeds), and the link-traffic counter
// adds its bytes to the links they cross. The price itself stays NCCL's (collective_cost); the
// pattern says where its bytes go:
//   ring in one NVLink domain   p members, 2(p−1) steps (all-reduce) or p−1, S/p per step
//   across NVLink domains       (ring or tree; the same GPUs on every node) NCCL's ring over all p
//                               members with a channel per local index: every member sends
//                               2(p−1)/p·S in all ((p−1)/p·S for the others), (k−1)/k of it over
//                               NVLink to the next GPU of its node and 1/k over its NIC to the same
//                               local index of the next node — laid as a ring inside each node and
//                               one per local index across the nodes, all at once
//                               (unevenly spread groups: one ring through all members in order)
//   tree in one domain          a binomial reduction (⌈log2 p⌉ barrier-separated stages, position
//                               i sends S to i − 2^l), then the mirrored broadcast
//   NVLS                        two stages, each GPU sending to the next: S (into the switch's
//                               reduction), then S/p (its reduced shard, multicast): a GPU's
//                               NVLink port carries S + S/p each way, as in the price
//   one-shot (an engine's)      one stage: every member sends its S to every other
//   two-shot (an engine's)      two stages, each every member sending S/p to every other
// Bytes are real bytes; ring chunks are per member and step. Thread-safety: pure functions.
#pragma once

#include <tuple>
#include <vector>

#include "sim/step/collective_cost.hpp"

namespace shardsim {

class Cluster;

struct CollectivePattern {
  struct Ring {
    std::vector<int> gpus;  // in ring order; member i sends to member i+1
    int steps = 0;
    double chunk = 0;       // bytes each member sends per step
  };
  struct Flow {
    int src = 0, dst = 0;
    double bytes = 0;
  };
  std::vector<Ring> rings;                 // concurrent, each chained step by step
  std::vector<std::vector<Flow>> stages;   // one after the other, each a barrier-separated set of flows
  // Contention-free seconds of the pattern at its routes' effective bandwidths: the slowest ring
  // (steps × chunk over its slowest hop), or the stages' sum of their busiest GPU port (a GPU's
  // flows of one stage, out or in, share its port: one-shot's p−1 flows per GPU).
  double own_time(const Cluster& c, const CollectiveModel& m) const;
};

// The pattern of `t` (a collective_time() of the same arguments) over `gpus`.
CollectivePattern collective_pattern(const Cluster& c, CollKind kind, const std::vector<int>& gpus, double bytes,
                                     const CollectiveTime& t, const CollectiveModel& m = {});

}  // namespace shardsim
