// sim/simgrid/link_report.hpp — every link's load in the steps SimGrid ran: `simulate --links FILE`.
//
// Owns: links_csv() and link_direction_ends(). One row per link direction of the cluster (idle ones included, so a spine
// that carried nothing shows as such), busiest first: its class, the vertices it joins in that
// direction, its bandwidth, and over the steps run in SimGrid (FidelityReport::links) the bytes it
// carried, its mean utilisation (busy seconds / Σ those steps' makespans) and its peak (the
// highest busy share of one step). Busy seconds are bytes / the capacity SimGrid gave the link
// (bandwidth × the class's efficiency, docs/simgrid.md). At the simgrid tier the steps are the
// sampled ones with representative layers, so bytes are the samples', not the run's; the shares
// are the run's estimate. Thread-safety: pure.
#pragma once

#include <string>

#include "sim/simgrid/fidelity.hpp"

namespace shardsim {

class Cluster;

std::string links_csv(const FidelityReport& report, const Cluster& cluster);

// The vertices a link direction joins, in its direction ("spine1", "leaf7").
struct LinkEnds {
  std::string from, to;
};
LinkEnds link_direction_ends(const Cluster& cluster, int dlink);

}  // namespace shardsim
