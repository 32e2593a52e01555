// tools/bench_src/accuracy.hpp — `shardsim_bench accuracy`: issue 11's reference set, fast against exact.
#pragma once

#include <string>

namespace shardsim {

// Only the cases whose "model plan" contains `only` (all when empty). With seeds > 1 every case
// with synthetic routing runs once per routing seed 1…seeds (a routing-trace file once), and a
// summary gives each metric's mean and largest |difference| over the runs: the fast path keeps one
// routing sample per shape, so which samples a run draws — and its difference from the exact path
// — reshuffles with any perturbation of step times; one seed cannot tell a change from that.
void bench_accuracy(const std::string& only = "", int seeds = 1);

}  // namespace shardsim
