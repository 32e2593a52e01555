// studies/scoring_resources.hpp — what a scoring command may spend, declared once: SimGrid worker
// processes, scoring threads, and the steps the simgrid tier samples.
//
// Owns: ScoringResources and scoring_resource_decls(). Every command that scores (simulate,
// sweep, compare, search, validate) registers these declarations instead of its own copies, so
// the names, ranges and checks are the same everywhere; the help says what the command scores
// ("per point", "per scenario", …).
#pragma once

#include <string>
#include <vector>

#include "studies/option_table.hpp"

namespace shardsim {

struct ScoringResources {
  int workers = 0;   // SimGrid worker processes (0 = one per core)
  int threads = 0;   // scoring threads (0 = one per core)
  int samples = 16;  // steps sampled into SimGrid per scored run at the simgrid tier
};

// Which of the three a command registers.
enum ResourceOption : unsigned { kWorkers = 1, kThreads = 2, kSamples = 4 };

// --workers, --threads ("`what` scored at once"), --samples ("steps sampled into SimGrid `per`
// at simgrid fidelity"), those named by `which`.
std::vector<OptionDecl<ScoringResources>> scoring_resource_decls(unsigned which, const std::string& what = "runs",
                                                                 const std::string& per = "");

}  // namespace shardsim
