// sim/step/step_program.hpp — one serving step of one replica as a DAG of operations on GPU ranks.
//
// Owns: StepProgram, the abstraction both executors run unchanged (docs/architecture.md). Ranks are the
// replica's GPUs (rank r sits on cluster GPU rank_gpu[r]). Operations:
//   compute(rank, kernel, rows, flops, hbm_bytes)   on the rank's compute stream (or, with a group,
//                                         the same kernel on each of the group's ranks at once)
//   collective(kind, group, bytes)        on the comm stream of every rank of the group; bytes is
//                                         the per-rank buffer (all-reduce: the full tensor; all-gather:
//                                         the gathered output; reduce-scatter: the input; all-to-all:
//                                         a per-pair byte matrix instead)
//   send(src, dst, bytes)                 pipeline point-to-point, on both ranks' comm streams
// Dependencies are explicit (indices of earlier operations), so operations are stored in a
// topological order by construction; two streams per rank make compute/communication overlap
// expressible. Every operation carries a class (what it is, for breakdowns) and its layer.
// Thread-safety: a value; build it on one thread, read it from any.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "sim/plan/allreduce_kernels.hpp"
#include "sim/plan/dtype.hpp"

namespace shardsim {

enum class OpType : std::uint8_t { Compute, Collective, Send };
enum class CollKind : std::uint8_t { AllReduce, ReduceScatter, AllGather, AllToAll };
// Collective algorithms; Auto lets the executor choose as NCCL would, or — for an all-reduce of a
// program whose engine has its own kernels (StepProgram::allreduce) — among those and NCCL's
// (see collective_cost.hpp). OneShot and TwoShot are the engines' in-domain all-reduce kernels.
enum class CollAlgo : std::uint8_t { Auto, Ring, Tree, Nvls, Hierarchical, Pairwise, OneShot, TwoShot };

enum class Stream : std::uint8_t { Compute = 0, Comm = 1 };
// The kernel a compute operation runs (its efficiency curve: sim/step/compute_cost.hpp).
// DecodeAttention: paged decode attention of grouped-query or multi-head attention (bandwidth-bound);
// MlaDecodeAttention: MLA decode with the absorbed projections (FlashMLA-class: every query head
// reads the one latent KV, so it is compute-bound once heads × query tokens ≥ 128).
enum class ComputeKind : std::uint8_t { Gemm, GroupedGemm, PrefillAttention, DecodeAttention, Memory, MlaDecodeAttention };
// What an operation is, for the breakdown of step time.
enum class OpClass : std::uint8_t {
  Embedding, Norm, QkvProj, Attention, AttnOutProj, Router, DenseFfn, Experts, SharedExperts, LmHead,
  TpComm,        // reductions / gathers of tensor parallelism (incl. resharding)
  EpDispatch,    // MoE all-to-all, tokens to experts
  EpCombine,     // MoE all-to-all, results back
  EtpComm,       // reductions inside the expert-TP group
  PipelineP2p,
  kCount
};
inline constexpr int kNumOpClasses = static_cast<int>(OpClass::kCount);
const char* to_string(OpType t);
const char* to_string(CollKind k);
const char* to_string(CollAlgo a);
const char* to_string(OpClass c);

struct StepOp {
  OpType type = OpType::Compute;
  OpClass cls = OpClass::Norm;
  int layer = -1;              // model layer, -1 for embedding / LM head
  int stage = 0;               // pipeline stage
  // Compute
  int rank = -1;               // Compute: the rank; Send: the sender
  double flops = 0;
  double hbm_bytes = 0;
  Dtype math = Dtype::BF16;    // Compute: the GEMM input type (peak flop/s depend on it)
  ComputeKind kernel = ComputeKind::Memory;  // Compute: which kernel curve applies
  double rows = 0;             // Compute: the kernel's shape (GEMM M; tokens per expert; KV length per sequence)
  // Collective
  int group = -1;              // index into StepProgram::groups (Collective; Compute: its TP group, or −1)
  CollKind coll = CollKind::AllReduce;
  CollAlgo algo = CollAlgo::Auto;
  double bytes = 0;            // Collective: per-rank bytes (see header); Send: bytes
  int matrix = -1;             // AllToAll: index into StepProgram::a2a
  int peer = -1;               // Send: the receiver
  // Layers this operation stands for (the fast path's folded layers: one representative layer
  // lowered for `weight` identical ones). The analytic executor multiplies the duration; SimGrid
  // programs are never folded (encode() refuses weights other than 1).
  double weight = 1;
  // Release time: seconds from the program's start before which the operation may not start (0 =
  // as soon as its dependencies and streams allow). Steps never set it; the KV-transfer program of
  // a disaggregated plan (sim/serving/kv_transfer.hpp) releases each transfer when its prefill ends.
  double not_before = 0;
  // Dependencies: deps[dep_begin, dep_end) of StepProgram::deps
  std::uint32_t dep_begin = 0, dep_end = 0;

  Stream stream() const { return type == OpType::Compute ? Stream::Compute : Stream::Comm; }
  // The fast path's shorthands, which only an analytic executor reads: a folded layer (weight ≠ 1)
  // or one kernel for a whole TP group (LoweringOptions::group_compute). SimGrid refuses them.
  bool analytic_only() const { return weight != 1 || (type == OpType::Compute && group >= 0); }
};

// An all-to-all's bytes per (sender, receiver) pair of a p-member group, stored sparsely: a wide
// expert-parallel step fills a few hundred of 64² or 128² pairs, and every pass over the matrix
// (pricing, the routing choice, link traffic, SimGrid flows) visits only those, in ascending
// (sender, receiver) order — the order a dense row-major scan would meet them. A pair without
// an entry carries +0.0 bytes; from_dense keeps every other value (−0.0 and NaN included), so a
// dense matrix comes back from dense() bit for bit.
class A2aMatrix {
 public:
  struct Entry {
    std::uint32_t from = 0, to = 0;  // member indices in the group
    double bytes = 0;
  };
  A2aMatrix() = default;
  explicit A2aMatrix(std::size_t members) : p_(members) {}
  // From p×p row-major bytes; std::invalid_argument unless the size is a square.
  static A2aMatrix from_dense(const std::vector<double>& dense);
  // `bytes` from every member to every other one.
  static A2aMatrix uniform(std::size_t members, double bytes);

  std::size_t members() const { return p_; }
  const std::vector<Entry>& entries() const { return e_; }
  // Whether (from, to) may come next: inside the group and after the last pair.
  bool fits(std::uint32_t from, std::uint32_t to) const {
    return from < p_ && to < p_ && (e_.empty() || e_.back().from < from || (e_.back().from == from && e_.back().to < to));
  }
  // Appends a pair; it must fit (std::logic_error otherwise).
  void push(std::uint32_t from, std::uint32_t to, double bytes);
  void reserve(std::size_t n) { e_.reserve(n); }
  double at(std::size_t from, std::size_t to) const;
  std::vector<double> dense() const;

 private:
  std::size_t p_ = 0;
  std::vector<Entry> e_;  // ascending (from, to)
};

struct StepProgram {
  std::vector<int> rank_gpu;                       // cluster GPU id of each rank
  std::vector<std::vector<int>> groups;            // ranks of each collective group
  std::vector<A2aMatrix> a2a;                      // all-to-all bytes, members = the op's group
  std::vector<StepOp> ops;
  std::vector<int> deps;
  // Fraction of each GPU's SMs its compute kernels get (flop rate): below 1 when communication
  // kernels that hold SMs stay resident beside them (DeepEP's normal kernels under two-batch
  // overlap, EngineSettings::comm_sms). Memory-bound time is not scaled.
  double compute_share = 1;
  // Whose all-reduce kernels the program's CollAlgo::Auto all-reduces may run (the plan's engine).
  AllReduceKernels allreduce = AllReduceKernels::Nccl;

  int num_ranks() const { return static_cast<int>(rank_gpu.size()); }
  // Empties the program, keeping its buffers' capacity.
  void clear() {
    rank_gpu.clear();
    groups.clear();
    a2a.clear();
    ops.clear();
    deps.clear();
    compute_share = 1;
    allreduce = AllReduceKernels::Nccl;
  }
  int add_group(std::vector<int> ranks);
  // Appends `op` depending on `after` (indices of earlier ops; negative entries are ignored).
  int add(StepOp op, std::initializer_list<int> after);
  int add(StepOp op, const std::vector<int>& after);
  // Dependencies of op i.
  const int* deps_begin(int i) const { return deps.data() + ops[static_cast<std::size_t>(i)].dep_begin; }
  const int* deps_end(int i) const { return deps.data() + ops[static_cast<std::size_t>(i)].dep_end; }
};

}  // namespace shardsim
