// studies/simulate_json.hpp — the result JSON of one simulation (schema shardsim.result/1) as
// `shardsim simulate --json` writes it: the serving result plus the fidelity tier's report.
// One function, so the command, `shardsim serve-evaluator` and the Python module write the same
// bytes for the same run (their "simulate" operation; only provenance.wall_s differs between runs).
#pragma once

#include "common/json_reader.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/result_json.hpp"
#include "sim/simgrid/fidelity.hpp"

namespace shardsim {

class Cluster;

// The collective kind of FidelityReport's per-kind arrays ("all-reduce", …, "send").
const char* collective_kind_name(int k);

// With "energy" (sim/serving/energy.hpp: energy_json) when every GPU type of `cluster` has a power model.
json simulate_result_json(const RunInputs& in, const Plan& plan, const Cluster& cluster, const ServingResult& r, const Metrics& m,
                          const ServingOptions& so, double wall_s, const FidelityReport& fr);

}  // namespace shardsim
