// studies/problem_options.cpp — the search problem's settings, declared.
#include "studies/problem_options.hpp"

namespace shardsim {

namespace {

std::vector<OptionDecl<ProblemSettings>> make_problem_option_decls() {
  using P = ProblemSettings;
  std::vector<OptionDecl<P>> v;
  v.push_back(decl("--fidelity", &P::fidelity, "analytic | simgrid | full (see 'shardsim simulate --help')"));
  // (checked by parse_tier, the one place a tier's name is read: sim/serving/tier.hpp)
  v.push_back(decl("--objective", &P::objective,
                   "capacity (the highest Poisson rate, req/s, meeting --slo at --goal, bracketed by the saturated rate; "
                   "~5-10 runs per evaluation) | saturated (output tok/s of a backlog run extended until it converges) | "
                   "drain (output tok/s of a run of the --requests given: depends on how many) | goodput (req/s within --slo "
                   "over that run) | drain-tpot (drain, feasible only with TPOT within --slo at --goal); docs/optimizers.md"));
  v.push_back(decl("--goal", &P::goal, "for capacity and drain-tpot: p99 | p90 | p50 | attain=F (see 'shardsim sweep --help')"));
  v.push_back(decl("--space", &P::space,
                   "blocks to search: degrees, sharding, mapping, batching, or all; add routing to search the dispatch (prefix affinity or round-robin), pools to search disaggregated plans "
                   "(pool split + each pool's plan)"));
  v.push_back(decl("--base", &P::base, "plan for everything not searched (dtypes, fixed blocks); default: the model's defaults"));
  v.push_back(decl("--samples", &P::samples, "steps sampled into SimGrid per evaluation at simgrid fidelity"));
  v.back().check = {OptionKind::Integer, 1, 100000, {}};
  v.push_back(decl("--online", &P::online, "keep the trace's arrival times for the drain objectives"));
  for (auto& d : v) d.show_default = d.check.kind != OptionKind::Flag && d.long_name() != "--base";
  return v;
}

}  // namespace

const std::vector<OptionDecl<ProblemSettings>>& problem_option_decls() {
  static const std::vector<OptionDecl<ProblemSettings>> decls = make_problem_option_decls();
  return decls;
}

}  // namespace shardsim
