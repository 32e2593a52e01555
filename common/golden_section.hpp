// common/golden_section.hpp — the minimum of a one-dimensional function by golden-section search.
//
// Owns: golden_section_min(), which the calibrations (sim/step/collective_calibration,
// sim/step/kernel_calibration) fit their fractions with. Assumes `f` unimodal on [lo, hi];
// stops after `max_iter` narrowings or once the bracket is narrower than `tol`, and returns its
// middle. Thread-safety: pure.
#pragma once

#include <cmath>

namespace shardsim {

template <class F>
double golden_section_min(F&& f, double lo, double hi, double tol, int max_iter) {
  const double g = (std::sqrt(5.0) - 1) / 2;
  double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
  double fa = f(a), fb = f(b);
  for (int i = 0; i < max_iter && hi - lo > tol; ++i) {
    if (fa < fb) {
      hi = b, b = a, fb = fa;
      a = hi - g * (hi - lo), fa = f(a);
    } else {
      lo = a, a = b, fa = fb;
      b = lo + g * (hi - lo), fb = f(b);
    }
  }
  return (lo + hi) / 2;
}

}  // namespace shardsim
