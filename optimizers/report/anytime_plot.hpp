// optimizers/report/anytime_plot.hpp — the search's plot: anytime bands and the ECDF of evaluations to target.
//
// Owns: optimizer_colour() (one fixed colour per optimizer name, the same in every plot) and
// anytime_gnuplot(), the self-contained gnuplot script of anytime.png (its data inline). Left
// panel: per stochastic optimizer, the median best-so-far over its seeds against evaluations with
// the interquartile band (a run that stopped early keeps its last value); the best Megatron rule
// plan and the exhaustive optimum as horizontal lines; y zoomed to where the optimizers end (from
// below their final lower quartiles and the rule plan up to the best known). Right panel: the
// runtime ECDF, per optimizer, over five targets — 95, 98, 99, 99.5 and 100% of the best known —
// the fraction of (run, target) pairs reached within x evaluations, as COCO and IOHprofiler
// aggregate targets (95% alone is often met by a rule plan in the first batch). x on a log scale
// on request.
// Thread-safety: pure.
#pragma once

#include <string>

#include "optimizers/report/search_report.hpp"

namespace shardsim {

// "#0072b2" and so on: fixed for the built-in optimizers, derived from the name for others.
std::string optimizer_colour(const std::string& optimizer);

std::string anytime_gnuplot(const SearchReport& rep, const SearchOutcome& out, const std::string& unit, long budget,
                            bool log_evals);

}  // namespace shardsim
