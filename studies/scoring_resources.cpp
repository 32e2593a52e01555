// studies/scoring_resources.cpp — workers, threads and samples, declared.
#include "studies/scoring_resources.hpp"

namespace shardsim {

std::vector<OptionDecl<ScoringResources>> scoring_resource_decls(unsigned which, const std::string& what, const std::string& per) {
  using R = ScoringResources;
  std::vector<OptionDecl<R>> v;
  if (which & kThreads) {
    v.push_back(decl("--threads", &R::threads, what + " scored at once (default: one per core)"));
    v.back().check = {OptionKind::Integer, 1, 1024, {}};
  }
  if (which & kWorkers) {
    v.push_back(decl("--workers", &R::workers, "SimGrid worker processes (default: one per core)"));
    v.back().check = {OptionKind::Integer, 1, 1024, {}};
  }
  if (which & kSamples) {
    v.push_back(decl("--samples", &R::samples, "steps sampled into SimGrid" + (per.empty() ? "" : " " + per) + " at simgrid fidelity"));
    v.back().check = {OptionKind::Integer, 1, 100000, {}};
    v.back().show_default = true;
  }
  return v;
}

}  // namespace shardsim
