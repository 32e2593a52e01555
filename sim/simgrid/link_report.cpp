// sim/simgrid/link_report.cpp — the per-link CSV of `simulate --links`.
#include "sim/simgrid/link_report.hpp"

#include <algorithm>
#include <sstream>

#include "topologies/cluster.hpp"

namespace shardsim {

LinkEnds link_direction_ends(const Cluster& c, int dlink) {
  auto [a, b] = c.link_ends(dlink / 2);
  if (dlink % 2) std::swap(a, b);
  return {c.graph()[static_cast<Vertex>(a)].name, c.graph()[static_cast<Vertex>(b)].name};
}

std::string links_csv(const FidelityReport& rep, const Cluster& c) {
  struct Row {
    int dlink;
    FidelityReport::LinkLoad load;
    double mean;
  };
  std::vector<Row> rows;
  std::vector<FidelityReport::LinkLoad> by_dlink(2 * static_cast<std::size_t>(c.num_links()));
  for (const auto& l : rep.links)
    if (l.dlink >= 0 && static_cast<std::size_t>(l.dlink) < by_dlink.size()) by_dlink[static_cast<std::size_t>(l.dlink)] = l;
  for (int d = 0; d < 2 * c.num_links(); ++d) {
    const auto& l = by_dlink[static_cast<std::size_t>(d)];
    rows.push_back({d, l, rep.simgrid_seconds > 0 ? l.busy_seconds / rep.simgrid_seconds : 0.0});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.mean > b.mean; });
  std::ostringstream o;
  o << "link,direction,class,from,to,bandwidth_gb_s,bytes,utilization_mean,utilization_peak,steps\n";
  for (const Row& r : rows) {
    const int id = r.dlink / 2;
    const LinkEnds ends = link_direction_ends(c, r.dlink);
    o << id << "," << (r.dlink % 2 ? "backward" : "forward") << "," << to_string(c.link(id).cls) << "," << ends.from << ","
      << ends.to << "," << c.link(id).bandwidth / 1e9 << ","
      << r.load.bytes << "," << r.mean << "," << r.load.peak << "," << r.load.steps << "\n";
  }
  return o.str();
}

}  // namespace shardsim
