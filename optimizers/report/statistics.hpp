// optimizers/report/statistics.hpp — the statistics an optimizer comparison reports over seeds.
//
// Owns: quantile(), the percentile-bootstrap interval of a median, the Mann–Whitney U test, Holm's
// step-down correction and the Vargha–Delaney A12 effect size (docs/optimizers.md, "Statistics").
// Conventions (as SciPy's mannwhitneyu and the effsize literature use them):
//   U          = the number of pairs (a_i, b_j) with a_i > b_j, ties counting ½ (U of sample a);
//   p          two-sided; exact (the permutation distribution of U) when neither sample has more
//              than 25 values and no value is tied, else the normal approximation with the tie
//              correction and a continuity correction of ½;
//   A12        = U / (n_a · n_b): the probability that a run of a beats a run of b (0.5 = no
//              difference; Vargha & Delaney's 0.56 / 0.64 / 0.71 mark small / medium / large);
//   bootstrap  B resamples with replacement, the median of each, the (1−level)/2 and (1+level)/2
//              quantiles of those medians; deterministic given the seed.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace shardsim {

// The q-quantile (0 ≤ q ≤ 1) by linear interpolation between order statistics; 0 for no values.
double quantile(std::vector<double> values, double q);

struct Interval {
  double lo = 0, hi = 0;
};
// Percentile-bootstrap interval of the median of `values` ({v, v} for one value, {0, 0} for none).
Interval bootstrap_median_interval(const std::vector<double>& values, std::uint64_t seed, int resamples = 2000,
                                   double level = 0.95);

struct MannWhitney {
  double u = 0;        // U of the first sample
  double p = 1;        // two-sided
  bool exact = false;  // from the exact distribution (else the normal approximation)
};
// Requires both samples non-empty (else p = 1, u = 0).
MannWhitney mann_whitney(const std::vector<double>& a, const std::vector<double>& b);

// Holm's step-down adjustment of m p-values (same order as given), each ≤ 1.
std::vector<double> holm_adjust(const std::vector<double>& p);

// Vargha–Delaney A12 of a over b (0.5 when either is empty).
double a12(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace shardsim
