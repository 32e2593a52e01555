// studies/simulate_json.cpp — result_to_json plus the "fidelity" section.
#include "studies/simulate_json.hpp"

#include "sim/serving/energy.hpp"
#include "sim/simgrid/link_report.hpp"
#include "topologies/cluster.hpp"

namespace shardsim {

const char* collective_kind_name(int k) {
  static const char* names[5] = {"all-reduce", "reduce-scatter", "all-gather", "all-to-all", "send"};
  return names[k];
}

json simulate_result_json(const RunInputs& in, const Plan& plan, const Cluster& cluster, const ServingResult& r, const Metrics& m,
                          const ServingOptions& so, double wall_s, const FidelityReport& fr) {
  json j = result_to_json(in, plan, r, m, so, wall_s);
  const RunEnergy e = run_energy(energy_pools(r, plan, cluster), m.makespan_s, network_ports(cluster));
  if (e.modelled) j["energy"] = energy_json(e, m.output_tok_s * m.makespan_s);
  json sl = json::object();
  for (int k = 0; k < 5; ++k)
    if (fr.ops[static_cast<std::size_t>(k)] > 0) sl[collective_kind_name(k)] = fr.slowdown[static_cast<std::size_t>(k)];
  j["fidelity"] = {{"tier", to_string(fr.tier)},
                   {"simgrid_steps", fr.sampled_steps},
                   {"failed_evaluations", fr.failed},
                   {"worker_restarts", fr.worker_restarts},
                   {"step_ratio", {{"min", fr.ratio_min}, {"median", fr.ratio_median}, {"max", fr.ratio_max}}},
                   {"collective_slowdown", sl},
                   {"most_loaded_link_class",
                    fr.most_loaded_class >= 0 ? to_string(static_cast<LinkClass>(fr.most_loaded_class)) : ""}};
  j["provenance"]["fidelity"] = to_string(fr.tier);
  j["provenance"]["simgrid_steps"] = fr.sampled_steps;
  return j;
}

}  // namespace shardsim
