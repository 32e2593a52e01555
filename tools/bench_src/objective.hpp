// tools/bench_src/objective.hpp — `tools/bench objective`: is a plan's score its serving capacity?
//
// Owns: bench_objective(). For each problem (Mixtral-8x7B on 16 H100s; DeepSeek-V3 on 64 H100s;
// DeepSeek-V3 on 64 H100s with attention-DP and wide EP as the base), `plans` random feasible plans
// are drawn from the search space (seeded) and scored three ways:
//   objective      the default objective (capacity under p99 TTFT ≤ 2 s / TPOT ≤ 200 ms, analytic)
//                  started from 300, 3,000 and all of the Azure trace's requests;
//   ground truth   the same SLO's capacity measured independently: the whole Azure trace (19,366
//                  requests, in its own order, every replica simulated) replayed at Poisson rates,
//                  judged on all its requests, bisected to 2% between 1/64 of and 1.5× its offline
//                  completion rate (sim/serving/load_sweep's max_load_meeting) — the median over
//                  `truth_seeds` arrival draws, with their range (one draw's capacity is a sample);
//   every replica  the objective with every replica simulated (capacity_one_replica = false): what
//                  letting one replica stand for its alike ones does (printed with its range);
//   the old drain  output tok/s of the first 300 requests offline (what the search ranked by before).
// `problems`: a count (the first N) or names among mixtral16, ds64, ds64-wide.
// Printed: per plan the three figures; per problem Spearman's rank correlation of objective and
// truth (target ≥ 0.95), the largest objective / truth − 1 (target ≤ 10%; also over the highest draw), the largest spread of
// the objective over the three request budgets (target ≤ 3%), the drain's Spearman for contrast,
// and the objective's median and max wall time per plan. Figures, never asserted.
#pragma once

#include <string>

void bench_objective(int plans, const std::string& problems, int truth_seeds);
