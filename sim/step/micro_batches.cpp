// sim/step/micro_batches.cpp — splitting a step in two and interleaving the halves' programs.
#include "sim/step/micro_batches.hpp"

#include <algorithm>
#include <tuple>
#include <vector>

#include "sim/step/lowering.hpp"

namespace shardsim {

bool split_micro_batches(const ReplicaBatch& batch, ReplicaBatch& first, ReplicaBatch& second) {
  first.groups.assign(batch.groups.size(), {});
  second.groups.assign(batch.groups.size(), {});
  long tokens[2] = {0, 0};
  for (std::size_t g = 0; g < batch.groups.size(); ++g) {
    const auto& seqs = batch.groups[g];
    long total = 0;
    for (const auto& s : seqs) total += s.new_tokens;
    const long half = (total + 1) / 2;
    long so_far = 0;
    for (const auto& s : seqs) {
      const long need = half - so_far;  // tokens the first half still takes
      if (need <= 0) {
        second.groups[g].push_back(s);
        tokens[1] += s.new_tokens;
      } else if (s.new_tokens <= need || s.decodes()) {  // (a decode and its drafts stay whole)
        first.groups[g].push_back(s);
        tokens[0] += s.new_tokens;
      } else {  // a prompt chunk across the cut: its head in the first half, its tail in the second
        SeqWork head = s, tail = s;
        head.new_tokens = static_cast<int>(need);
        head.emits = false;
        tail.first_pos = s.first_pos + static_cast<std::uint32_t>(need);
        tail.context = s.context + static_cast<int>(need);
        tail.new_tokens = s.new_tokens - static_cast<int>(need);
        first.groups[g].push_back(head);
        second.groups[g].push_back(tail);
        tokens[0] += head.new_tokens;
        tokens[1] += tail.new_tokens;
      }
      so_far += s.new_tokens;
    }
  }
  return tokens[0] > 0 && tokens[1] > 0;
}

namespace {

// Where an operation sits in its layer: 0 attention and router, 1 dispatch, 2 experts, 3 combine.
int phase_of(const StepOp& op) {
  switch (op.cls) {
    case OpClass::EpDispatch: return 1;
    case OpClass::Experts:
    case OpClass::SharedExperts:
    case OpClass::EtpComm: return 2;
    case OpClass::EpCombine: return 3;
    default: return 0;
  }
}

using Key = std::tuple<int, int, int>;  // (stage, layer, slot)

// Per operation, its merge key: (stage, layer, phase) made non-decreasing along the program (the
// LM head, layer −1 at the end, keeps the last key), the phase mapped to the half's slots.
std::vector<Key> keys_of(const StepProgram& p, const int (&slot)[4]) {
  std::vector<Key> keys(p.ops.size());
  Key last{-1, -2, -1};
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const StepOp& op = p.ops[i];
    Key k{op.stage, op.layer, slot[phase_of(op)]};
    last = std::max(last, k);
    keys[i] = last;
  }
  return keys;
}

}  // namespace

void interleave_micro_batches(const StepProgram& a, const StepProgram& b, StepProgram& out) {
  static constexpr int kSlotsA[4] = {0, 1, 4, 5}, kSlotsB[4] = {2, 3, 6, 7};
  const std::vector<Key> ka = keys_of(a, kSlotsA), kb = keys_of(b, kSlotsB);
  out.clear();
  out.rank_gpu = a.rank_gpu;
  out.groups = a.groups;
  const bool same_groups = a.groups == b.groups;
  const int group_offset = same_groups ? 0 : static_cast<int>(a.groups.size());
  if (!same_groups) out.groups.insert(out.groups.end(), b.groups.begin(), b.groups.end());
  out.a2a = a.a2a;
  out.a2a.insert(out.a2a.end(), b.a2a.begin(), b.a2a.end());
  const int matrix_offset = static_cast<int>(a.a2a.size());

  std::vector<int> map_a(a.ops.size()), map_b(b.ops.size()), deps;
  auto copy = [&](const StepProgram& p, std::size_t i, const std::vector<int>& map, bool second) {
    StepOp op = p.ops[i];
    if (second && op.group >= 0) op.group += group_offset;
    if (second && op.matrix >= 0) op.matrix += matrix_offset;
    deps.clear();
    for (const int* d = p.deps_begin(static_cast<int>(i)); d != p.deps_end(static_cast<int>(i)); ++d) deps.push_back(map[static_cast<std::size_t>(*d)]);
    return out.add(op, deps);
  };
  std::size_t i = 0, j = 0;
  while (i < a.ops.size() || j < b.ops.size()) {
    const bool take_a = j >= b.ops.size() || (i < a.ops.size() && ka[i] <= kb[j]);
    if (take_a) map_a[i] = copy(a, i, map_a, false), ++i;
    else map_b[j] = copy(b, j, map_b, true), ++j;
  }
}

}  // namespace shardsim
