// sim/collective_cost.hpp — contention-free alpha-beta times of collectives on a cluster.
//
// Owns: the per-algorithm formulas of the analytic executor and the choice NCCL would make when a
// step program says CollAlgo::Auto. Per step of an algorithm the cost is α + bytes / B, where α is
// the route latency plus a per-step software overhead and B the route's bottleneck bandwidth times
// the cluster's collective efficiency (NVLink for NVLink-only routes, network otherwise):
//   ring all-reduce           2(p−1) (α + S/(p·B))
//   ring all-gather/RS        (p−1) (α + S/(p·B))           (S = the gathered / reduced tensor)
//   tree all-reduce           2·⌈log2 p⌉·α + 2·S/B           (pipelined double binary tree)
//   NVLS all-reduce           2α + 2(p−1)/p · S / busbw_nvls  (in-switch reduction, one NVLink domain)
//   hierarchical              RS inside each NVLink domain, ring all-reduce of S/g across domains
//                             on each rail, AG inside each domain; chunks pipeline through the
//                             phases, so time = Σ latencies + max(intra bytes term, inter bytes term)
//   pairwise all-to-all       α + the busiest NVLink port or NIC: with PXN forwarding, a NIC
//                             (node, rail) carries all its node's bytes to rail-r GPUs elsewhere
//                             and all bytes to its own GPU; NVLink carries intra-node and
//                             forwarded bytes (a2a efficiency on NVLink)
// Calibration constants and their sources: docs/validation.md. Units: bytes, seconds.
// Thread-safety: pure functions of a const Cluster.
#pragma once

#include <vector>

#include "sim/step_program.hpp"

namespace shardsim {

class Cluster;

struct CollectiveModel {
  double step_overhead = 0.0;       // software overhead per algorithm step, seconds (on top of route latency)
  double nvls_busbw_fraction = 480.0 / 450.0;  // NVLS all-reduce bus bandwidth / NVLink bandwidth (8×H100: 480 GB/s)
  double a2a_nvlink_efficiency = 0.65;         // achieved fraction of NVLink bandwidth in all-to-all (797 µs @ 256 MiB)
  double nvls_min_bytes = 1 << 20;  // NCCL picks NVLS only for large messages
};

struct CollectiveTime {
  double seconds = 0;
  CollAlgo algo = CollAlgo::Auto;   // the algorithm used (resolved when asked for Auto)
};

// Time of a collective among `gpus` (cluster GPU ids) with `bytes` per rank (see step_program.hpp).
CollectiveTime collective_time(const Cluster& c, CollKind kind, const std::vector<int>& gpus, double bytes,
                               CollAlgo algo = CollAlgo::Auto, const CollectiveModel& m = {});
// Time of an all-to-all with a per-pair byte matrix (row = sender), p × p.
double all_to_all_time(const Cluster& c, const std::vector<int>& gpus, const std::vector<double>& matrix,
                       const CollectiveModel& m = {});
// Time of a point-to-point transfer.
double p2p_time(const Cluster& c, int src, int dst, double bytes, const CollectiveModel& m = {});

}  // namespace shardsim
