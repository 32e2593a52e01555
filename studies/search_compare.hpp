// studies/search_compare.hpp — `shardsim search compare DIR[:OPTIMIZER]…`: runs of several
// studies of one problem side by side, at one budget, with the statistics a study's report gives.
//
// Owns: compare_studies(). Each argument gives *arms*: DIR:OPTIMIZER the runs of OPTIMIZER in the
// study in DIR, DIR alone one arm per stochastic optimizer of that study; an arm is labelled
// "OPTIMIZER @ DIR's name", the first one is the reference. The studies must be
// of one problem (model, cluster, trace, fidelity, …: InputError naming the journal and the field
// otherwise) but may differ in what makes an arm — the optimizers, seeds, budget, --param and
// --policy-in — so a warm start is compared with a cold one, or a setting with its default, where
// `search merge` (one problem, one configuration) refuses. Every run is cut to the smallest budget
// among the arms' runs (or --budget, if smaller); the best known is the best any of them found
// within it. Per arm: the median best with its 95% bootstrap interval, the runs that reached 99%
// of the best known, the evaluations they needed (median and interval) and, against the first arm
// (the reference), two-sided Mann–Whitney tests with Holm over the other arms and the A12 effect
// size: on the best values (higher is better), and on the evaluations to 99%, where a run that
// never reached it counts as later than every run that did (A12 here = the chance that the arm's
// run gets there sooner). Reads the journals only: nothing is simulated.
// Thread-safety: plain functions.
#pragma once

#include <string>
#include <vector>

namespace shardsim {

// The comparison as Markdown. `budget` 0 = the smallest budget among the runs.
std::string compare_studies(const std::vector<std::string>& arms, long budget);

}  // namespace shardsim
