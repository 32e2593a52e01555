// sim/step/lowering.hpp — plan + model + one serving step → a StepProgram for one replica.
//
// Owns: the translation of a batch (each attention-DP group's sequences: their new tokens, KV
// lengths and — through the routing source — the experts each token picked in each MoE layer)
// into compute operations (flops and HBM bytes per rank) and collectives, following the plan's
// degrees and per-operator sharding. Layout rules (docs/simulation.md "Lowering"): an operator's
// input layout is Full (every TP rank holds the whole tensor), Split (feature- or sequence-split
// across the TP group) or Partial (summands awaiting a reduction); a mismatch between what one
// operator produces and what the next needs becomes a collective: Partial→Full all-reduce,
// Partial→Split reduce-scatter, Split→Full all-gather, Full→Split a free local slice.
// MoE layers dispatch each token to the EP ranks of its experts (one copy per distinct rank, sent
// to every expert-TP member), compute each rank's real expert load, reduce inside expert-TP, and
// combine back; uneven routing makes uneven all-to-all matrices and uneven expert compute. Which
// rank holds an expert (and which replica serves a token, with redundant experts) is the
// ExpertLayout's (sim/step/expert_layout.hpp).
// Routing cost control: at most LoweringOptions::max_routed_tokens_per_seq tokens of a sequence are
// routed per step (a contiguous window) and the rest estimated (sim/step/batch_routing.hpp).
// Folding (the fast scoring path): each stage lowers one dense layer standing for all its dense
// layers and its share of the model's `fold_moe_layers` MoE representatives (at least one; each
// the middle layer of an equal slice) standing for the rest (StepOp::weight); only those MoE
// layers are routed (RoutingSource::route_layers). Dense layers are identical, so folding them
// only drops the overlap between neighbours; MoE layers differ by their routing, so folding them
// samples it. Under two-batch overlap folding also biases the step (a folded layer stretches the
// two streams' stagger; docs/performance-log.md), so the serving loop does not fold such plans.
// Thread-safety: lower_step is a pure function of its inputs (the routing source is const).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/plan/plan_layout.hpp"
#include "sim/step/expert_layout.hpp"
#include "sim/step/batch_routing.hpp"
#include "sim/step/executor.hpp"
#include "sim/step/step_program.hpp"

namespace shardsim {

class AnalyticExecutor;

struct ModelSpec;
class Cluster;
class RoutingSource;

// One sequence's work in one step.
struct SeqWork {
  std::uint32_t request = 0;   // routing address of the sequence
  std::uint32_t first_pos = 0; // position of its first new token (prompt tokens first, then output)
  int new_tokens = 0;          // tokens processed this step: a prefill chunk, or 1 when decoding
  int context = 0;             // tokens already in the KV cache before this step
  bool emits = false;          // produces an output token this step (decode, or the last prefill chunk)
  int draft = 0;               // speculative decoding: draft tokens verified beside the decode token (new_tokens = 1 + draft)
  // One token (and its drafts) on a context: a decode; anything else is (part of) a prompt chunk.
  bool decodes() const { return new_tokens == 1 + draft && context > 0; }
};

// A replica's step: the sequences of each attention-DP group (size = plan attn_dp).
struct ReplicaBatch {
  std::vector<std::vector<SeqWork>> groups;
  int tokens() const;
  bool has_chunks() const;  // any sequence's work is a prompt chunk
};

struct LoweringOptions {
  int max_routed_tokens_per_seq = 32;  // 0 = every token; the rest estimated (batch_routing.hpp)
  // When non-empty, only these model layers are lowered (the SimGrid tier's representative layers);
  // layer_weight scales nothing here — executors report per-layer times for extrapolation.
  std::vector<int> only_layers;
  // > 0: fold the model's MoE layers onto about this many representatives, shared out by the
  // stages (at least one each), and each stage's dense layers onto one; 0 lowers every layer.
  // Ignored when only_layers is set.
  int fold_moe_layers = 0;
  // One compute operation for the same kernel on every rank of a tensor-parallel group (over the
  // group's ranks, StepOp::group) instead of one per rank: the group's next collective waits for
  // its last rank either way, so the step's times are the same (to the last bit of a sum; tested)
  // while its program holds a fraction of the operations (the attention side of a TP group).
  // Not under two-batch overlap: there a rank that is ready early runs the other micro-batch's
  // work meanwhile, and one operation for the group would hold it back (TPOT p90 +2.7%).
  // Analytic executors only (SimGrid runs one activity per rank and refuses them).
  bool group_compute = false;
  // Where the experts live (EPLB); null = built by the Lowering (contiguous, or measured from the
  // routing when the plan has redundant experts). serve() builds it once for all replicas.
  std::shared_ptr<const ExpertLayout> experts;
};

// A lowered layer and how many model layers it stands for.
struct LoweredLayer {
  int layer = 0;
  double weight = 1;
};

// Whether a step of `plan` runs as two interleaved micro-batches: the engine's two-batch overlap,
// which needs expert parallelism (an all-to-all to hide) in a MoE model.
bool two_micro_batches(const Plan& plan, const ModelSpec& model);

// Static context of one replica: built once per (plan, model, cluster, replica), reused per step.
class Lowering {
 public:
  Lowering(const Plan& plan, const ModelSpec& model, const Cluster& cluster, const RoutingSource* routing,
           int replica = 0, LoweringOptions options = {});
  StepProgram lower(const ReplicaBatch& batch) const;
  // The same into `out`, reusing its buffers (the serving loop lowers thousands of steps).
  void lower(const ReplicaBatch& batch, StepProgram& out) const;
  // Only the core attention of `batch` — each group's kernels on its TP ranks, one per stage
  // standing for all the stage's layers, nothing between them — into `out`: run by an executor,
  // Σ stage_time is the attention on a step's critical path (the slowest group's, stage after
  // stage) and busy[Attention] the attention per GPU, with no routing drawn.
  void lower_attention(const ReplicaBatch& batch, StepProgram& out) const;
  // (The serving loop prices attention with price_attention below; this program is its
  // definition, which tests run through the executor to hold the two equal.)
  // The same attention priced at once, as `ex` prices lower_attention()'s program (Σ stage_time,
  // busy[Attention], the work at peak) — the same sums in the same order, so the same figures —
  // without building or running it: the serving loop prices the attention of every step it
  // interpolates (about one per request), and the program was most of that.
  AttentionCost price_attention(const ReplicaBatch& batch, const AnalyticExecutor& ex) const;

  const Plan& plan() const { return plan_; }
  int num_ranks() const { return static_cast<int>(rank_gpu_.size()); }
  // The layers lowered in each stage (all of them, the only_layers, or the folded representatives).
  const std::vector<std::vector<LoweredLayer>>& lowered_layers() const { return lowered_; }
  int num_lowered_layers() const;  // over all stages: the layers of one step's program
  const ExpertLayout& experts() const { return *experts_; }

 private:
  class WholeStep;  // lowering.cpp: one micro-batch, block by block
  void lower_whole(const ReplicaBatch& batch, StepProgram& out) const;  // one micro-batch
  // lower_attention()'s walk, stage by stage and group by group, with `b` building or pricing.
  template <class B>
  void attention_walk(const ReplicaBatch& batch, B& b, StepProgram* prog) const;
  template <class B>
  void attention(B& b, int layer, int stage, const std::vector<int>& ranks, int group, const std::vector<SeqWork>& seqs) const;
  std::vector<LoweredLayer> choose_layers(const LayerRange& range, int model_moe_layers) const;
  bool two_batch_overlap() const { return two_micro_batches(plan_, model_); }
  // Whether `batch`'s all-to-alls run node-level (EngineSettings::a2a: every step, or with auto
  // those with prompt chunks, as SGLang's DeepEP "auto" mode runs prefill on the normal kernels).
  bool node_level(const ReplicaBatch& batch) const;
  // The compute share of `batch`'s program (StepProgram::compute_share): DeepEP's normal kernels
  // hold comm_sms of the GPU's SMs while two-batch overlap computes beside them; 1 otherwise.
  double compute_share(const ReplicaBatch& batch, bool split) const;
  double attention_share(const ReplicaBatch& batch) const;  // the attention kernels' compute share

  Plan plan_;
  const ModelSpec& model_;
  const Cluster& cluster_;
  const RoutingSource* routing_;
  LoweringOptions options_;
  PlanLayout layout_;
  std::vector<int> rank_gpu_;
  std::vector<LayerRange> stages_;
  std::vector<int> moe_index_;   // model layer → MoE layer index (−1 for dense layers)
  std::vector<std::vector<LoweredLayer>> lowered_;  // per stage
  std::vector<int> routed_;      // MoE layer indices routed (ascending)
  std::vector<int> route_slot_;  // MoE layer index → position in routed_, −1 when not routed
  std::shared_ptr<const ExpertLayout> experts_;
  // How the unit's ranks sit on nodes, when its all-to-alls can run node-level (EP across nodes,
  // no expert-TP, every stage's unit laid out alike); empty otherwise. WholeStep uses it for the
  // steps EngineSettings::a2a sends node-level.
  UnitNodes unit_nodes_;
};

// The plan's expert layout: contiguous, or EPLB from `routing`'s measured loads when the plan has
// redundant experts (and the model is MoE with a routing source).
std::shared_ptr<const ExpertLayout> expert_layout_for(const Plan& plan, const ModelSpec& model, const RoutingSource* routing);

}  // namespace shardsim
