// optimizers/report/anytime_plot.cpp — median and IQR bands of best-so-far, and the ECDF of evaluations to targets.
#include "optimizers/report/anytime_plot.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "common/gnuplot_text.hpp"
#include "common/readable_number.hpp"
#include "optimizers/algorithms/optimizer.hpp"
#include "optimizers/report/statistics.hpp"

namespace shardsim {

namespace {

std::string num(double x) { return formatted("%.8g", x); }

bool plotted(const std::string& optimizer) { return !runs_once(optimizer); }

// At most ~400 evaluation indices (1-based), always the first and the last.
std::vector<long> sample_points(long length) {
  std::vector<long> xs;
  const long step = std::max(1L, (length + 399) / 400);
  for (long x = 1; x <= length; x += step) xs.push_back(x);
  if (xs.empty() || xs.back() != length) xs.push_back(length);
  return xs;
}

// "x q1 median q3" rows for one optimizer's runs.
std::string band_rows(const SearchOutcome& out, const std::string& optimizer) {
  std::vector<const std::vector<double>*> curves;
  long length = 0;
  for (const auto& r : out.runs)
    if (r.optimizer == optimizer && !r.anytime.empty()) {
      curves.push_back(&r.anytime);
      length = std::max(length, static_cast<long>(r.anytime.size()));
    }
  std::ostringstream o;
  if (curves.empty()) return o.str();
  for (long x : sample_points(length)) {
    std::vector<double> v;
    for (const auto* c : curves) v.push_back((*c)[static_cast<std::size_t>(std::min<long>(x, static_cast<long>(c->size())) - 1)]);
    o << x << " " << num(quantile(v, 0.25)) << " " << num(quantile(v, 0.5)) << " " << num(quantile(v, 0.75)) << "\n";
  }
  return o.str();
}

// The targets of the runtime ECDF, as fractions of the best known: reaching 95% alone is often
// trivial (a rule plan in the first batch does it), so the ECDF pools several, as COCO does.
constexpr double kTargets[] = {0.95, 0.98, 0.99, 0.995, 1.0};

// "95, 98, 99, 99.5, 100": the targets in percent, for the plot's words.
std::string targets_text() {
  std::string t;
  for (double f : kTargets) t += (t.empty() ? "" : ", ") + num(100 * f);
  return t;
}

// "x fraction" steps: the fraction of (run, target) pairs of the optimizer reached within x
// evaluations, over its runs and the kTargets of `best_known`.
std::string ecdf_rows(const SearchOutcome& out, const std::string& optimizer, double best_known, long budget) {
  std::vector<long> hits;
  int pairs = 0;
  for (const auto& r : out.runs) {
    if (r.optimizer != optimizer) continue;
    for (double f : kTargets) {
      ++pairs;
      const long e = evals_to_reach(r.anytime, f * best_known);
      if (e > 0) hits.push_back(e);
    }
  }
  std::sort(hits.begin(), hits.end());
  std::ostringstream o;
  if (pairs == 0) return o.str();
  o << 1 << " " << 0 << "\n";
  for (std::size_t k = 0; k < hits.size(); ++k) o << hits[k] << " " << num(static_cast<double>(k + 1) / pairs) << "\n";
  o << std::max(budget, hits.empty() ? 1L : hits.back()) << " " << num(static_cast<double>(hits.size()) / pairs) << "\n";
  return o.str();
}

// The left panel's y range: from a little below the lowest of the optimizers' final lower quartiles
// and the best rule plan, up to the best known — where the optimizers differ; early values below
// it are cut. Empty (autoscale) when there is nothing to range over.
std::string y_range(const SearchReport& rep, const SearchOutcome& out, const std::vector<std::string>& names) {
  double lo = rep.megatron_best > 0 ? rep.megatron_best : rep.best_known;
  for (const auto& name : names) {
    std::vector<double> last;
    for (const auto& r : out.runs)
      if (r.optimizer == name && !r.anytime.empty()) last.push_back(r.anytime.back());
    if (!last.empty()) lo = std::min(lo, quantile(last, 0.25));
  }
  const double hi = std::max(rep.best_known, rep.optimum);
  if (!(hi > lo) || !(lo > 0)) return "";
  const double pad = 0.1 * (hi - lo);
  return "set yrange [" + num(lo - pad) + ":" + num(hi + 0.5 * pad) + "]\n";
}

}  // namespace

std::string optimizer_colour(const std::string& name) {
  static const std::pair<const char*, const char*> fixed[] = {
      {"random", "#7f7f7f"}, {"ga", "#0072b2"},        {"sa", "#e69f00"},       {"rl", "#009e73"},
      {"rl-noattn", "#cc79a7"}, {"megatron", "#d62728"}, {"exhaustive", "#000000"}};
  for (const auto& [n, c] : fixed)
    if (name == n) return c;
  static const char* palette[] = {"#56b4e9", "#d55e00", "#8c564b", "#bcbd22", "#17becf", "#9467bd"};
  std::uint32_t h = 2166136261u;  // FNV-1a: the same name, the same colour, in every plot
  for (unsigned char ch : name) h = (h ^ ch) * 16777619u;
  return palette[h % (sizeof palette / sizeof *palette)];
}

std::string anytime_gnuplot(const SearchReport& rep, const SearchOutcome& out, const std::string& unit, long budget,
                            bool log_evals) {
  std::vector<std::string> names;
  for (const auto& s : rep.optimizers)
    if (plotted(s.optimizer)) names.push_back(s.optimizer);
  std::ostringstream o;
  o << "# anytime.png: median best-so-far with the interquartile band over seeds, and the ECDF of evaluations\n"
    << "# to " << targets_text() << "% of the best known (gnuplot anytime.gp redraws it; the data are inline)\n"
    << "set terminal pngcairo size 1300,520 noenhanced\nset output 'anytime.png'\n";
  for (std::size_t k = 0; k < names.size(); ++k) {
    o << "$band" << k << " << EOD\n" << band_rows(out, names[k]) << "EOD\n";
    o << "$ecdf" << k << " << EOD\n" << ecdf_rows(out, names[k], rep.best_known, budget) << "EOD\n";
  }
  o << "set multiplot layout 1,2\nset grid\nset key bottom right\nset xlabel 'evaluations'\n"
    << "set xrange [1:" << std::max<long>(2, budget) << "]\n" << (log_evals ? "set logscale x\n" : "")
    << "set ylabel " << gnuplot_quoted(unit + " (best so far; median and IQR over seeds)") << "\n" << y_range(rep, out, names) << "plot ";
  bool first = true;
  auto sep = [&] {
    if (!first) o << ", \\\n     ";
    first = false;
  };
  if (rep.optimum > 0) sep(), o << num(rep.optimum) << " with lines dt 2 lc rgb '#000000' title 'optimum (exhaustive)'";
  if (rep.megatron_best > 0)
    sep(), o << num(rep.megatron_best) << " with lines dt 3 lw 2 lc rgb '" << optimizer_colour("megatron") << "' title 'best Megatron rule plan'";
  for (std::size_t k = 0; k < names.size(); ++k) {
    const std::string c = optimizer_colour(names[k]);
    sep(), o << "$band" << k << " using 1:2:4 with filledcurves fs transparent solid 0.2 noborder lc rgb '" << c << "' notitle";
    sep(), o << "$band" << k << " using 1:3 with lines lw 2 lc rgb '" << c << "' title " << gnuplot_quoted(names[k]);
  }
  if (first) o << "0 notitle";
  o << "\nset ylabel 'fraction of (run, target) pairs reached'\nset title 'targets: " << targets_text() << "% of the best known' font ',10'\n"
    << "set yrange [0:1.05]\nplot ";
  first = true;
  for (std::size_t k = 0; k < names.size(); ++k)
    sep(), o << "$ecdf" << k << " using 1:2 with steps lw 2 lc rgb '" << optimizer_colour(names[k]) << "' title " << gnuplot_quoted(names[k]);
  if (first) o << "0 notitle";
  o << "\nunset multiplot\n";
  return o.str();
}

}  // namespace shardsim
