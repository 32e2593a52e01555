// sim/step/micro_batches.hpp — two-batch overlap: one step as two micro-batches whose MoE
// all-to-alls run while the other micro-batch computes.
//
// Owns: split_micro_batches() and interleave_micro_batches(). DeepSeek and SGLang
// (--enable-two-batch-overlap) split each step's batch in two; while one micro-batch's tokens are
// on the wire (dispatch, combine), the other's attention and experts keep the GPU busy. Here the
// Lowering lowers each half as its own program and interleave_micro_batches() merges the two into
// one, in the staggered order
//     A: attention, dispatch | B: attention, dispatch | A: experts, combine | B: experts, combine
// per layer. Both executors follow program order on each stream (list scheduling), so A's
// dispatch runs on the comm streams while B's attention runs on the compute streams, and so on.
// Dependencies stay those of each half: the halves never wait for each other except through
// stream order. Each half reads the weights again: the price of the overlap in small,
// weight-bound decode batches.
// Thread-safety: pure functions.
#pragma once

#include <utility>

#include "sim/step/step_program.hpp"

namespace shardsim {

struct ReplicaBatch;

// Each attention group's tokens cut in two halves: whole sequences, and the prompt chunk across
// the cut split in a head (first half) and a tail that attends to it (second half), as SGLang
// splits prefill tokens. Returns false when either half would have no tokens (run it whole).
bool split_micro_batches(const ReplicaBatch& batch, ReplicaBatch& first, ReplicaBatch& second);

// Merges the programs of the two halves (same replica, same plan) into `out` in the staggered
// order above; operations keep their dependencies, a2a matrices and groups.
void interleave_micro_batches(const StepProgram& a, const StepProgram& b, StepProgram& out);

}  // namespace shardsim
