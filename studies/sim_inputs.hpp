// studies/sim_inputs.hpp — the inputs every scoring entry shares (simulate, sweep, search, compare,
// the open evaluator): model, cluster, request trace, load, routing, SLO, seed — declared once as
// options (sim_option_decls: what the command line registers and the evaluator reads) — and their
// loading.
//
// Owns: SimInputs, sim_option_decls(), LoadedInputs and load_inputs(), the load's description.
//
// Seeds: --seed S is appended to synthetic trace and routing specs that do not name their own
// seed, so one user-visible seed controls every random choice of a run.
#pragma once

#include <memory>
#include <string>

#include "common/json_reader.hpp"
#include "studies/option_table.hpp"
#include "sim/serving/serving.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

namespace shardsim {

struct SimInputs {
  std::string model = "mixtral-8x7b";
  std::string cluster = "dgx-h100:1";
  std::string trace = "azure-conv";
  int requests = 1000;
  bool offline = false;
  bool prefilled = false;            // decode only: prompts prefilled elsewhere (ServingOptions::prefilled)
  // Load control (docs/load.md): open loop at a rate, or a closed loop of clients.
  double rate = 0;                   // > 0: requests per second (the trace keeps the lengths)
  std::string arrivals = "poisson";  // with rate: poisson | trace (the trace's gaps rescaled)
  int concurrency = 0;               // > 0: closed loop with this many clients
  double think_ms = 0;               // closed loop: a client's pause between requests
  std::string routing = "synthetic:";
  std::string slo = "ttft=2000,tpot=200";
  unsigned long long seed = 1;
  bool exact = false;  // the exact scoring path (ServingOptions::set_exact)
  int routed_tokens = -1;  // ≥ 0: ServingOptions::routed_tokens_per_seq (0 = all); −1 = the path's default
};

// --model --cluster --trace --requests --arrivals --offline --rate --concurrency --think-time
// --prefilled --routing --slo --seed --exact --routed-tokens: names, help, checks and how they
// combine (--offline, --rate and --concurrency exclude each other; --arrivals needs --rate,
// --think-time needs --concurrency; --prefilled excludes --concurrency). The load options
// (`load`: --offline --rate --concurrency --think-time) are left out by a command that sets the
// load itself (sweep).
const std::vector<OptionDecl<SimInputs>>& sim_option_decls();

// How requests arrive, in words ("Poisson at 4 req/s") and as the result JSON's inputs.load.
std::string describe_load(const SimInputs& in);
json load_to_json(const SimInputs& in);
// True when the user chose the arrivals (--offline, --rate or --concurrency).
bool load_given(const SimInputs& in);
// The trace and serving options for open-loop arrivals at `rate` (the sweep's points).
RequestTrace trace_at_rate(const SimInputs& in, const RequestTrace& trace, double rate);

struct LoadedInputs {
  ModelSpec model;
  std::unique_ptr<Cluster> cluster;
  RequestTrace trace;                      // the first --requests of the trace (at --rate when given)
  RequestTrace population;                 // the whole trace: what capacity measures draw from
  std::unique_ptr<RoutingSource> routing;  // null for dense models
  ServingOptions serving;
  std::string routing_spec;                // with the seed applied
  std::string trace_spec;
};

LoadedInputs load_inputs(const SimInputs& in);
// The same with the model and cluster already loaded (in.model and in.cluster are not read).
LoadedInputs load_inputs(const SimInputs& in, ModelSpec model, std::unique_ptr<Cluster> cluster);
// Sets o.slo_ttft and o.slo_tpot from "ttft=MS,tpot=MS" (InputError("--slo TEXT", key, …) otherwise).
void parse_slo(const std::string& text, ServingOptions& o);
// The plan `spec` (file, compact string or "megatron") for the loaded model and cluster; an
// infeasible one is refused with its first violation (InputError(spec, field, …)), and so is a
// disaggregated plan under closed-loop clients.
Plan load_feasible_plan(const std::string& spec, const LoadedInputs& in);
// Throws the InputError for closed-loop clients (`option` = value) with a disaggregated plan.
[[noreturn]] void refuse_closed_loop(const std::string& option, const std::string& value);
// `spec` with ",seed=S" added when it is synthetic and names no seed.
std::string with_seed(const std::string& spec, unsigned long long seed);

}  // namespace shardsim
