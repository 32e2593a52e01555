// sim/step/collective_cost.hpp — contention-free alpha-beta times of collectives on a cluster.
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
// Every call also pays CollectiveModel::call_latency of its kind (both executors).
// Calibration constants and their sources: docs/validation.md. Units: bytes, seconds.
// Thread-safety: pure functions of a const Cluster.
#pragma once

#include <cstdint>

#include <array>
#include <vector>

#include "sim/step/step_program.hpp"

namespace shardsim {

class Cluster;

struct CollectiveModel {
  // Fixed cost of one collective call (kernel launch, channel setup, the first chunk's pipeline
  // fill), by CollKind: fitted to NCCL 2.29.2 nccl-tests on 8×H100 SXM (AIConfigurator's measured
  // tables) from 1 KiB to 512 MiB; docs/validation.md. Added before the algorithm's own steps.
  std::array<double, 4> call_latency{10.1e-6, 2.2e-6, 4.7e-6, 11.5e-6};  // all-reduce, reduce-scatter, all-gather, all-to-all
  // NVLS (in-switch reduction) pays a further set-up cost: NCCL uses it only above a few MiB, and
  // 1 MiB with NVLS forced takes ≈42 µs (Azure ND H100 v5 sweep) against 25 µs by ring.
  double nvls_latency = 40e-6;
  // Groups of fewer than 5 GPUs inside one NVLink domain reach less ring bandwidth than 8 (NCCL
  // runs fewer channels): fraction = min(1, small_group_base + small_group_step · (p − 2)),
  // fitted to 256 MiB all-gathers on 2 and 4 GPUs (AIConfigurator NCCL tables); 1 from 7 GPUs on.
  double small_group_base = 0.667;
  double small_group_step = 0.0815;
  // Software overhead per algorithm step on top of the route latency (NCCL LL/LL128 protocol
  // hand-off): with call_latency, fitted to 1 MiB all-reduces on 2 and 8 GPUs (the 2-GPU point
  // separates the per-call from the per-step part).
  double step_overhead = 0.41e-6;
  double nvls_busbw_fraction = 480.0 / 450.0;  // NVLS all-reduce bus bandwidth / NVLink bandwidth (8×H100: 480 GB/s)
  double a2a_nvlink_efficiency = 0.65;         // achieved fraction of NVLink bandwidth in all-to-all (797 µs @ 256 MiB)
  double nvls_min_bytes = 1 << 20;  // NCCL picks NVLS only for large messages
};

struct CollectiveTime {
  double seconds = 0;
  CollAlgo algo = CollAlgo::Auto;   // the algorithm used (resolved when asked for Auto)
};

// Ring/tree bandwidth fraction of a group of p GPUs inside one NVLink domain (1 for p ≥ 5 or
// for groups spanning domains). Both executors divide the ring/tree bytes by it.
double small_group_fraction(int p, bool one_domain, const CollectiveModel& m);
// One algorithm step between GPUs a and b as the formulas price it: α (route latency + the
// per-step overhead) and the effective bandwidth (route bottleneck × the link class's efficiency).
struct Hop {
  double alpha = 0;  // seconds per algorithm step
  double bw = 0;     // effective bytes/s
};
Hop hop(const Cluster& c, int a, int b, const CollectiveModel& m);
// The slowest hop of a ring through `gpus` in the given order (its largest α, smallest bandwidth).
Hop ring_hop(const Cluster& c, const std::vector<int>& gpus, const CollectiveModel& m);
// `gpus` grouped by NVLink domain, domains in order of first appearance.
std::vector<std::vector<int>> by_domain(const Cluster& c, const std::vector<int>& gpus);
// Fixed cost of one call of `kind`.
double call_latency(CollKind kind, const CollectiveModel& m);
// The algorithm's own time, without the call latency (what the SimGrid expansion simulates).
CollectiveTime algorithm_time(const Cluster& c, CollKind kind, const std::vector<int>& gpus, double bytes,
                              CollAlgo algo = CollAlgo::Auto, const CollectiveModel& m = {});
// Time of a collective among `gpus` (cluster GPU ids) with `bytes` per rank (see step_program.hpp):
// call latency + algorithm time.
CollectiveTime collective_time(const Cluster& c, CollKind kind, const std::vector<int>& gpus, double bytes,
                               CollAlgo algo = CollAlgo::Auto, const CollectiveModel& m = {});
// How an all-to-all's inter-node bytes (a on node i, rail r → b on node j, rail r') cross the nodes:
//   SendSide     NCCL's PXN: NVLink to node i's GPU on rail r', then rail r' to b; b's own NIC
//                receives everything sent to it;
//   ReceiveSide  DeepEP's forwarding: rail r to node j's GPU on rail r, then NVLink to b; a GPU
//                that receives far more than it sends spreads its inbound bytes over every rail.
// all_to_all_routing() picks the one whose busiest NVLink port or NIC finishes first (ties: SendSide);
// both executors route by it.
enum class A2aRouting : std::uint8_t { SendSide, ReceiveSide };
A2aRouting all_to_all_routing(const Cluster& c, const std::vector<int>& gpus, const A2aMatrix& matrix,
                              const CollectiveModel& m = {});
// Time of an all-to-all with a per-pair byte matrix over `gpus`, call latency included.
double all_to_all_time(const Cluster& c, const std::vector<int>& gpus, const A2aMatrix& matrix,
                       const CollectiveModel& m = {});
// Time of a point-to-point transfer.
double p2p_time(const Cluster& c, int src, int dst, double bytes, const CollectiveModel& m = {});

}  // namespace shardsim
