// sim/schedule_summary.hpp — what a finished schedule of a step program means, for both executors.
//
// Owns: summarize_schedule — from every operation's start, end and the operation it waited for
// (its dependency or stream predecessor), the StepTiming both executors report: makespan, stage
// spans, the critical path by class, busy time by class and collective kind, exposed
// communication, expert time and EP imbalance; and the per-rank timeline events. One function so
// that an analytic and a SimGrid report of the same program mean the same thing.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/executor.hpp"

namespace shardsim {

// Ranks an operation occupies: the compute rank, both ends of a send, or the whole group.
void involved_ranks(const StepProgram& p, const StepOp& op, std::vector<int>& out);
// "attention", "tp_comm all-reduce", "pipeline_p2p send", …
std::string op_name(const StepOp& op);

// REQUIRES: start, end, pred sized like p.ops; pred[i] < i or −1.
StepTiming summarize_schedule(const StepProgram& p, const std::vector<double>& start, const std::vector<double>& end,
                              const std::vector<int>& pred, std::vector<TimelineEvent>* timeline);

}  // namespace shardsim
