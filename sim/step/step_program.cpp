// sim/step/step_program.cpp — building step programs; names of the enums.
#include "sim/step/step_program.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

namespace shardsim {

const char* to_string(OpType t) {
  switch (t) {
    case OpType::Compute: return "compute";
    case OpType::Collective: return "collective";
    case OpType::Send: return "send";
  }
  return "?";
}

const char* to_string(CollKind k) {
  switch (k) {
    case CollKind::AllReduce: return "all-reduce";
    case CollKind::ReduceScatter: return "reduce-scatter";
    case CollKind::AllGather: return "all-gather";
    case CollKind::AllToAll: return "all-to-all";
  }
  return "?";
}

const char* to_string(CollAlgo a) {
  switch (a) {
    case CollAlgo::Auto: return "auto";
    case CollAlgo::Ring: return "ring";
    case CollAlgo::Tree: return "tree";
    case CollAlgo::Nvls: return "nvls";
    case CollAlgo::Hierarchical: return "hierarchical";
    case CollAlgo::Pairwise: return "pairwise";
    case CollAlgo::OneShot: return "one-shot";
    case CollAlgo::TwoShot: return "two-shot";
  }
  return "?";
}

const char* to_string(OpClass c) {
  static const char* names[kNumOpClasses] = {"embedding", "norm",      "qkv_proj",       "attention",  "attn_out_proj",
                                             "router",    "dense_ffn", "experts",        "shared_experts", "lm_head",
                                             "tp_comm",   "ep_dispatch", "ep_combine",   "etp_comm",   "pipeline_p2p"};
  int i = static_cast<int>(c);
  return i >= 0 && i < kNumOpClasses ? names[i] : "?";
}

A2aMatrix A2aMatrix::from_dense(const std::vector<double>& dense) {
  const auto p = static_cast<std::size_t>(std::llround(std::sqrt(static_cast<double>(dense.size()))));
  if (p * p != dense.size())
    throw std::invalid_argument("all-to-all matrix: " + std::to_string(dense.size()) + " entries are not a square");
  A2aMatrix m(p);
  for (std::size_t i = 0; i < p; ++i)
    for (std::size_t j = 0; j < p; ++j)
      if (std::bit_cast<std::uint64_t>(dense[i * p + j]) != 0)  // all but +0.0
        m.e_.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j), dense[i * p + j]});
  return m;
}

A2aMatrix A2aMatrix::uniform(std::size_t members, double bytes) {
  A2aMatrix m(members);
  m.e_.reserve(members * (members - std::min<std::size_t>(members, 1)));
  for (std::size_t i = 0; i < members; ++i)
    for (std::size_t j = 0; j < members; ++j)
      if (i != j) m.e_.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j), bytes});
  return m;
}

void A2aMatrix::push(std::uint32_t from, std::uint32_t to, double bytes) {
  if (!fits(from, to))
    throw std::logic_error("all-to-all matrix: pair (" + std::to_string(from) + ", " + std::to_string(to) +
                           ") out of order or outside " + std::to_string(p_) + " members");
  e_.push_back({from, to, bytes});
}

double A2aMatrix::at(std::size_t from, std::size_t to) const {
  auto it = std::lower_bound(e_.begin(), e_.end(), std::pair(from, to), [](const Entry& e, const auto& k) {
    return e.from < k.first || (e.from == k.first && e.to < k.second);
  });
  return it != e_.end() && it->from == from && it->to == to ? it->bytes : 0.0;
}

std::vector<double> A2aMatrix::dense() const {
  std::vector<double> d(p_ * p_, 0.0);
  for (const Entry& e : e_) d[e.from * p_ + e.to] = e.bytes;
  return d;
}

int StepProgram::add_group(std::vector<int> ranks) {
  groups.push_back(std::move(ranks));
  return static_cast<int>(groups.size()) - 1;
}

int StepProgram::add(StepOp op, std::initializer_list<int> after) {
  return add(std::move(op), std::vector<int>(after));
}

int StepProgram::add(StepOp op, const std::vector<int>& after) {
  int id = static_cast<int>(ops.size());
  op.dep_begin = static_cast<std::uint32_t>(deps.size());
  for (int d : after) {
    if (d < 0) continue;
    if (d >= id) throw std::logic_error("step program: dependency on a later operation");
    deps.push_back(d);
  }
  op.dep_end = static_cast<std::uint32_t>(deps.size());
  ops.push_back(op);
  return id;
}

}  // namespace shardsim
