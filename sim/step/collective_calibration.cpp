// sim/step/collective_calibration.cpp — nccl-tests output read, and the ring efficiency fitted to it.
#include "sim/step/collective_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "common/golden_section.hpp"
#include "common/input_error.hpp"
#include "sim/step/collective_cost.hpp"
#include "topologies/cluster.hpp"
#include "topologies/cluster_io.hpp"

namespace shardsim {

NcclTestsRun parse_nccl_tests(const std::string& text, const std::string& source) {
  NcclTestsRun run;
  run.source = source;
  std::set<std::string> hosts;
  std::stringstream ss(text);
  int line_no = 0;
  for (std::string line; std::getline(ss, line);) {
    ++line_no;
    std::stringstream ls(line);
    std::vector<std::string> w;
    for (std::string x; ls >> x;) w.push_back(x);
    if (w.empty()) continue;
    if (w[0] == "#") {
      // "#  Rank  0 Group  0 Pid  123 on host1 device  0 [0x1b] NVIDIA H100 …"
      if (w.size() > 8 && w[1] == "Rank") {
        ++run.ranks;
        for (std::size_t i = 2; i + 1 < w.size(); ++i)
          if (w[i] == "on") hosts.insert(w[i + 1]);
      }
      // "# Collective test starting: all_gather_perf"
      for (std::size_t i = 1; i < w.size(); ++i) {
        const std::string& t = w[i];
        auto is = [&](const char* name) { return t.rfind(name, 0) == 0; };
        if (is("all_reduce_perf")) run.kind = CollKind::AllReduce, run.kind_known = true;
        else if (is("all_gather_perf")) run.kind = CollKind::AllGather, run.kind_known = true;
        else if (is("reduce_scatter_perf")) run.kind = CollKind::ReduceScatter, run.kind_known = true;
        else if (is("alltoall_perf")) run.kind = CollKind::AllToAll, run.kind_known = true;
      }
      continue;
    }
    if (w[0][0] == '#') continue;
    // A result row: size count type redop root time algbw busbw #wrong (out of place) …
    if (w.size() < 9) throw InputError(source, "line " + std::to_string(line_no), "expected nccl-tests columns (size count type redop root time algbw busbw #wrong …)");
    double bytes = 0, us = 0;
    try {
      std::size_t a = 0, b = 0;
      bytes = std::stod(w[0], &a);
      us = std::stod(w[5], &b);
      if (a != w[0].size() || b != w[5].size()) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw InputError(source, "line " + std::to_string(line_no), "expected a size and an out-of-place time, got \"" + w[0] + "\", \"" + w[5] + "\"");
    }
    if (!(bytes > 0) || !(us > 0) || !std::isfinite(bytes) || !std::isfinite(us)) continue;  // size 0 rows, N/A
    run.points.push_back({bytes, us * 1e-6});
  }
  run.hosts = static_cast<int>(hosts.size());
  if (run.ranks == 0) throw InputError(source, "", "no \"#  Rank … on <host>\" lines: the ranks and hosts of the run are unknown");
  if (run.points.empty()) throw InputError(source, "", "no result rows");
  return run;
}

std::vector<int> nccl_tests_gpus(const NcclTestsRun& run, const Cluster& c) {
  const int hosts = std::max(1, run.hosts);
  if (run.ranks % hosts != 0)
    throw InputError(run.source, "", std::to_string(run.ranks) + " ranks on " + std::to_string(hosts) + " hosts: not the same on each");
  const int per = run.ranks / hosts;
  if (per > c.gpus_per_node() || hosts > c.num_nodes())
    throw InputError(run.source, "", std::to_string(hosts) + " hosts of " + std::to_string(per) + " ranks do not fit " + c.name() +
                                         " (" + std::to_string(c.num_nodes()) + " nodes of " + std::to_string(c.gpus_per_node()) + ")");
  std::vector<int> gpus;
  for (int h = 0; h < hosts; ++h)
    for (int r = 0; r < per; ++r) gpus.push_back(h * c.gpus_per_node() + r);
  return gpus;
}

EfficiencyFit fit_collective_efficiency(const std::vector<NcclTestsRun>& runs, const std::string& cluster_spec, double min_bytes) {
  const Cluster base = load_cluster(cluster_spec);
  EfficiencyFit fit;
  if (runs.empty()) throw InputError("--nccl-tests", "", "no run given");
  fit.network = runs.front().hosts > 1;
  struct Use {
    const NcclTestsRun* run;
    std::vector<int> gpus;
  };
  std::vector<Use> uses;
  for (const NcclTestsRun& r : runs) {
    if (r.kind == CollKind::AllToAll)
      throw InputError(r.source, "", "all-to-all is priced by its own constants (docs/communication.md), not by the ring efficiency fitted here");
    if ((r.hosts > 1) != fit.network)
      throw InputError(r.source, "", "mixes runs inside one host (they fit the NVLink efficiency) with runs across hosts (the network's): give one kind");
    uses.push_back({&r, nccl_tests_gpus(r, base)});
  }
  json doc = cluster_to_json(base);
  const char* key = fit.network ? "network" : "nvlink";
  fit.before = fit.network ? base.collective_efficiency().network : base.collective_efficiency().nvlink;
  // The model's times at efficiency `e`, for every point used.
  auto model = [&](double e) {
    json j = doc;
    j["collective_efficiency"][key] = e;
    const Cluster c = cluster_from_json(j, cluster_spec, base.name());
    std::vector<double> t;
    for (const Use& u : uses)
      for (const auto& p : u.run->points)
        if (p.bytes >= min_bytes) t.push_back(collective_time(c, u.run->kind, u.gpus, p.bytes).seconds);
    return t;
  };
  std::vector<double> measured;
  for (const Use& u : uses)
    for (const auto& p : u.run->points)
      if (p.bytes >= min_bytes) {
        measured.push_back(p.seconds);
        fit.rows.push_back({u.run->source, p.bytes, p.seconds, 0, 0});
      }
  fit.points = static_cast<int>(measured.size());
  if (fit.points == 0) throw InputError("--nccl-tests", "", "no size of at least " + std::to_string(static_cast<long>(min_bytes)) + " bytes to fit");
  auto rms = [&](const std::vector<double>& t) {
    double s = 0;
    for (std::size_t i = 0; i < t.size(); ++i) s += std::pow(std::log(t[i] / measured[i]), 2);
    return std::sqrt(s / static_cast<double>(t.size()));
  };
  const std::vector<double> before = model(fit.before);
  fit.rms_log_before = rms(before);
  const double lo = 0.2, hi = 1.0;  // (the cluster format's range is (0, 1])
  if (std::fabs(rms(model(lo)) - rms(model(hi))) < 1e-3)
    throw InputError("--nccl-tests", "", std::string("these runs do not depend on the ") + key +
                                             " efficiency (the model prices them by NVLS or latency alone): give larger sizes, or all-gather / reduce-scatter runs");
  fit.after = golden_section_min([&](double e) { return rms(model(e)); }, lo, hi, 1e-4, 40);
  const std::vector<double> after = model(fit.after);
  fit.rms_log_after = rms(after);
  for (std::size_t i = 0; i < fit.rows.size(); ++i) {
    fit.rows[i].model_before = before[i];
    fit.rows[i].model_after = after[i];
  }
  return fit;
}

}  // namespace shardsim
