// sim/step/collective_cost.hpp — contention-free times of collectives on a cluster.
//
// Owns: the price of every collective algorithm and the choice NCCL would make when a step
// program says CollAlgo::Auto. All-reduce, reduce-scatter and all-gather follow NCCL's own
// tuning model (src/graph/tuning.cc: a latency and a bus bandwidth per algorithm × protocol, the
// fastest pair chosen per call), on this cluster's bandwidths:
//   time = latency(algo, proto) + bytes / algBw(algo, proto)
//   ring     latency = base + (nsteps − nInter)·max(NVLink hop, net overhead) + nInter·NET hop,
//            nsteps = 2(p−1) for all-reduce, p−1 otherwise; nInter = 2(n−1) / n−1 across n nodes;
//            algBw = busBw · p / nsteps (so the bytes term is 2(p−1)/p·S/busBw for all-reduce)
//   tree     (all-reduce) latency = base + 2((p/n − 1)·NVLink hop + log2(n)·NET hop);
//            algBw = busBw / 2, times NCCL's per-size tree correction
//   NVLS     (all-reduce, one NVLink domain) latency + S·(1 + 1/p) / NVLS link bandwidth: each GPU
//            sends its S to the switch's reduction and receives its reduced S/p, then multicasts
//            S/p and receives S
// busBw starts from the group's ring bandwidth — the slowest NVLink hop × NVLink efficiency ×
// the small-group fraction inside one domain; across domains also the network: the group's GPUs
// per node × their NIC bandwidth × network efficiency (NCCL runs a ring channel per NIC) — and
// each protocol caps it as NCCL's tuner does (LL: half of it, at most the LL ceiling; LL128:
// 92%, at most channels × 36.7 GB/s; tree: 92%, at most channels × the tree cap …).
//   pairwise all-to-all       α + the busiest NVLink port or NIC: with PXN forwarding, a NIC
//                             (node, rail) carries all its node's bytes to rail-r GPUs elsewhere
//                             and all bytes to its own GPU; NVLink carries intra-node and
//                             forwarded bytes (a2a efficiency on NVLink); α = route latency + the
//                             per-step overhead, plus the all-to-all's call latency
// An engine's own all-reduce (StepProgram::allreduce ≠ Nccl) competes with NCCL's choice for an
// Auto all-reduce inside one NVLink domain, where the engine allows it (its group sizes, its
// workspace), and the faster is taken — as the engines' own heuristics pick (TensorRT-LLM's
// strategy table, vLLM's and SGLang's size rules; docs/communication.md):
//   one-shot  every rank reads its p−1 peers' whole buffers and reduces them itself:
//             α + (p−1)·S / (η₁·NVLink)
//   two-shot  a reduce-scatter and an all-gather through the peers' buffers, two barriers:
//             2α + two_shot_per_peer·(p−1) + 2(p−1)/p·S / (η₂·NVLink)
//   α = base (by NVLink generation) + per_peer·(p−1): the flag exchange and the kernel
// Constants and their sources: docs/communication.md ("NCCL's collectives") and
// docs/validation.md. Units: bytes, seconds (NCCL's tables are in µs and GB/s and stay so here).
// Thread-safety: pure functions of a const Cluster.
#pragma once

#include <cstdint>

#include <array>
#include <vector>

#include "sim/step/step_program.hpp"

namespace shardsim {

class Cluster;

// NCCL's protocols: LL (8-byte flag+data stores, lowest latency, half the bandwidth), LL128
// (128-byte lines with a flag, 120/128 of it), Simple (bulk copies with fences, full bandwidth,
// highest latency). NVLS and all-to-all have none to choose (Simple).
enum class CollProto : std::uint8_t { LL, LL128, Simple };
const char* to_string(CollProto p);

// NCCL's tuning constants (NVIDIA/nccl src/graph/tuning.cc, master of 2026-06; Hopper/Intel
// rows): latencies in µs, bandwidths in GB/s, per protocol {LL, LL128, Simple}.
struct NcclTuning {
  std::array<double, 3> base_ring{6.6, 14.0, 8.4}, base_tree{6.8, 14.0, 8.4};  // per call
  std::array<double, 3> nvlink_ring{0.6, 1.9, 3.4}, nvlink_tree{0.6, 1.25, 4.0};  // per step over NVLink
  std::array<double, 3> net_ring{2.7, 4.0, 14.0}, net_tree{5.0, 8.5, 14.0};       // per step over the network
  double net_overhead = 1.0;             // per ring step once a ring crosses nodes (×3 for Simple); x86 Intel hosts
  double ring_plateau = 1.4;             // multi-node Simple ring all-reduce latency factor (NCCL's "plateau effect")
  // LL's bandwidth ceiling: inside one node it scales with the GPU generation (Hopper 141 GB/s on
  // 450 GB/s NVLink, Blackwell 282 on 900, Ampere 87.7 on 300: ≈ 0.31 of NVLink); across nodes
  // it is the host's (Intel: 39 GB/s on 2 nodes, 20.4 on more).
  double ll_max_nvlink_fraction = 141.0 / 450.0;
  double ll_max_two_nodes = 39.0, ll_max_more_nodes = 20.4;
  int channels = 16;                      // rings/trees NCCL runs on an 8-GPU NVSwitch node (caps below × this)
  double ring_ll128_per_channel = 36.7;
  std::array<double, 3> tree_per_channel{38.7, 41.4, 36.0};        // by nodes: 1, 2, more
  std::array<double, 3> tree_ll128_per_channel{36.7, 36.7, 29.0};  // by nodes: 1, 2, more
  // Tree all-reduce bandwidth correction by ⌊log2(bytes / 64)⌋ (0..22), per protocol.
  std::array<std::array<double, 23>, 3> tree_correction{{
      {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
      {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
      {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}}};
};

struct CollectiveModel {
  NcclTuning nccl;
  // Fixed cost of one all-to-all call (kernel launch, channel setup, the first chunk's pipeline
  // fill): fitted to NCCL 2.29.2 nccl-tests on 8×H100 SXM at 1 MiB (AIConfigurator's measured
  // tables); docs/validation.md. The other collectives' latencies are NCCL's (above).
  double a2a_call_latency = 11.5e-6;
  // NCCL's send/recv (which its all-to-all is) takes the LL protocol when a peer's bytes fit
  // NCCL_P2P_LL_THRESHOLD (16 KiB per channel, one channel at such sizes; src/enqueue.cc): such a
  // call costs what LL saves on a ring call with one NVLink step in NCCL's tuner — 1.8 µs of base
  // latency and 2.8 µs of step latency (NcclTuning) — less. (LL's halved bandwidth is left out:
  // under 16 KiB a peer it is a few ns.)
  double p2p_ll_threshold = 16384;
  // NVLS (in-switch reduction): the whole call's latency, from an Azure ND H100 v5 sweep (1 MiB
  // with NVLS forced takes ≈42 µs, of which 3.8 µs is bytes), and the bandwidth of a GPU's
  // NVLink port in it: 480 GB/s NVLS bus bandwidth on 8×H100 (NCCL maintainers' figure) is
  // S·2(p−1)/p / t with t = S·(1 + 1/p) / port, so port = 480 · (9/8) · (8/14) GB/s = 0.686 of NVLink.
  double nvls_latency = 38e-6;
  double nvls_port_fraction = 480.0 * 9.0 / 14.0 / 450.0;
  // Groups of fewer than 5 GPUs inside one NVLink domain reach less ring bandwidth than 8 (NCCL
  // runs fewer channels): fraction = min(1, small_group_base + small_group_step · (p − 2)),
  // fitted to 256 MiB all-gathers on 2 and 4 GPUs (AIConfigurator NCCL tables); 1 from 7 GPUs on.
  double small_group_base = 0.667;
  double small_group_step = 0.0815;
  // Software overhead per point-to-point or all-to-all hop on top of the route latency.
  double step_overhead = 0.41e-6;
  double a2a_nvlink_efficiency = 0.65;         // achieved fraction of NVLink bandwidth in all-to-all (797 µs @ 256 MiB)
};

// One engine's custom all-reduce kernels (see above), fitted per library on AIConfigurator's
// measured custom all-reduce tables (CUDA-graph replay, BF16; H100 and B200 SXM, TensorRT-LLM
// 1.3.0rc20, vLLM 0.24.0, SGLang 0.5.14), where they beat NCCL: calibration rows in `validate`,
// the H200 tables check rows. Seconds, fractions of the GPU's NVLink bandwidth, bytes.
struct CustomAllReduce {
  double alpha_nvlink4 = 0;   // base latency on NVLink 4 (Hopper)
  double alpha_nvlink5 = 0;   // … on NVLink 5 (Blackwell: the GPU's NVLink ≥ 900 GB/s)
  double per_peer = 0;        // added per peer
  double one_shot_eff = 0;    // η₁
  double two_shot_eff = 0;    // η₂
  double two_shot_per_peer = 0;  // added per peer to the two-shot's 2α
  double max_bytes_two = 0;   // largest all-reduce on 2 GPUs (the workspace); above it, NCCL
  double max_bytes = 0;       // … on more
  unsigned group_sizes = 0;   // bit p set: a group of p GPUs may use them
};
// The constants of `k`'s kernels (k ≠ Nccl).
const CustomAllReduce& custom_allreduce(AllReduceKernels k);

struct CollectiveTime {
  double seconds = 0;               // latency + bandwidth (and an all-to-all's call latency)
  CollAlgo algo = CollAlgo::Auto;   // the algorithm used (resolved when asked for Auto)
  CollProto proto = CollProto::Simple;
  double latency = 0;               // the fixed part (what the SimGrid tier waits before the flows)
  double bandwidth = 0;             // the bytes part (what the SimGrid tier's flows take alone)
};

// Ring/tree bandwidth fraction of a group of p GPUs inside one NVLink domain (1 for p ≥ 5 or
// for groups spanning domains).
double small_group_fraction(int p, bool one_domain, const CollectiveModel& m);
// One point-to-point or all-to-all step between GPUs a and b: α (route latency + the per-step
// overhead) and the effective bandwidth (route bottleneck × the link class's efficiency).
struct Hop {
  double alpha = 0;  // seconds per algorithm step
  double bw = 0;     // effective bytes/s
};
Hop hop(const Cluster& c, int a, int b, const CollectiveModel& m);
// The slowest hop of a ring through `gpus` in the given order (its largest α, smallest bandwidth).
Hop ring_hop(const Cluster& c, const std::vector<int>& gpus, const CollectiveModel& m);
// `gpus` grouped by NVLink domain, domains in order of first appearance.
std::vector<std::vector<int>> by_domain(const Cluster& c, const std::vector<int>& gpus);
// Fixed cost of one all-to-all call paid before its flows: a2a_call_latency, or less when every
// peer's bytes fit NCCL's LL threshold (above). The other collectives' latency is their algorithm's.
double all_to_all_call_latency(const A2aMatrix& matrix, const CollectiveModel& m);
// Time of a collective among `gpus` (cluster GPU ids) with `bytes` per rank (see step_program.hpp),
// by `algo` (Auto: NCCL's choice of algorithm and protocol; a forced algorithm gets its fastest
// protocol; Hierarchical is the ring, whose flows the SimGrid tier lays per rail across domains;
// NVLS outside one NVLink domain or for other kinds falls back to the ring).
// `kernels`: whose all-reduce kernels an Auto all-reduce may also run (above).
CollectiveTime collective_time(const Cluster& c, CollKind kind, const std::vector<int>& gpus, double bytes,
                               CollAlgo algo = CollAlgo::Auto, const CollectiveModel& m = {},
                               AllReduceKernels kernels = AllReduceKernels::Nccl);
// Every (algorithm, protocol) collective_time() weighs for the same arguments, in a fixed order
// (ring LL, LL128, Simple; tree LL, LL128, Simple; NVLS; then the engine's one-shot and two-shot
// where allowed), each priced: NCCL's tuning table for this call, and the engine's kernels beside
// it (`shardsim collective` prints it). An all-to-all has one entry.
std::vector<CollectiveTime> collective_candidates(const Cluster& c, CollKind kind, const std::vector<int>& gpus,
                                                  double bytes, CollAlgo algo = CollAlgo::Auto,
                                                  const CollectiveModel& m = {},
                                                  AllReduceKernels kernels = AllReduceKernels::Nccl);
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
