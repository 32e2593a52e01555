// sim/serving/result_json.hpp — the result file of `shardsim simulate` (schema "shardsim.result/1"),
// the Chrome trace of a timeline, and the per-request CSV.
//
// Owns: the serialisations users read. Keys documented in docs/simulation.md.
// Wall-time fields live only under "provenance" so results compare byte-for-byte otherwise.
#pragma once

#include <string>

#include "common/json_reader.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/serving.hpp"

namespace shardsim {

struct ModelSpec;
class Cluster;

struct RunInputs {
  std::string model, cluster, plan, trace, routing, fidelity;
  int requests = 0;
  bool offline = false;
  unsigned long long seed = 0;
  json load = nullptr;  // how requests arrived (studies/sim_inputs.hpp: load_to_json); null = not said
};

// The breakdown with what each figure sums over: `d` gives the replicas and GPUs per replica.
json breakdown_to_json(const ServingBreakdown& b, const Degrees& d);
// Which scoring path made the result and which approximations it used (docs/performance.md).
json scoring_to_json(const ServingBreakdown& b, const ServingOptions& o);
// The same in one line of the text report.
std::string describe_scoring(const ServingBreakdown& b, const ServingOptions& o);
// A disaggregated run's pools and KV transfer ("disaggregation" in the result; `plan` is disaggregated).
json disagg_to_json(const Plan& plan, const DisaggReport& d);
json result_to_json(const RunInputs& in, const Plan& plan, const ServingResult& r, const Metrics& m,
                    const ServingOptions& o, double wall_s);
// Chrome trace (Perfetto): one process per rank named by `roles` (e.g. "GPU 3 · pp 0 · tp 1/2 ·
// ep 3/8"; empty = "GPU g (rank r)"), compute and communication threads; one "replica 0 steps"
// process with a slice per recorded step (its batch in the args) and counters of batch tokens and
// KV tokens in use.
std::string timeline_to_chrome_trace(const std::vector<TimelineEvent>& events, const std::vector<int>& rank_gpu,
                                     const std::vector<TimelineStep>& steps = {},
                                     const std::vector<std::string>& roles = {});
std::string requests_to_csv(const ServingResult& r, const ServingOptions& o);

}  // namespace shardsim
