// sim/step/step_program.cpp — building step programs; names of the enums.
#include "sim/step/step_program.hpp"

#include <stdexcept>

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
