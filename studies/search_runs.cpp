// studies/search_runs.cpp — seeds, runs and the output set of a study.
#include "studies/search_runs.hpp"

#include <algorithm>
#include <sstream>

#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "optimizers/search/study_dir.hpp"
#include "studies/run_program.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

SeedRange parse_seeds(const std::string& text) {
  SeedRange r;
  std::int64_t a = 0, b = 0;
  const auto dots = text.find("..");
  const bool ok = dots == std::string::npos ? parse_int64(text, b) && (a = 1)
                                            : parse_int64(text.substr(0, dots), a) && parse_int64(text.substr(dots + 2), b);
  if (!ok || a < 1 || b < a || b - a >= 1000)
    throw InputError("--seeds", text, "expected a count K (seeds 1..K) or a range A..B with 1 ≤ A ≤ B, at most 1,000 seeds");
  r.first = static_cast<std::uint64_t>(a);
  r.last = static_cast<std::uint64_t>(b);
  return r;
}

json seeds_json(const std::string& text) {
  const SeedRange r = parse_seeds(text);
  return text.find("..") == std::string::npos ? json(r.last) : json(text);
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool search_replays_offline(const SimInputs& in, const std::string& objective, bool online) {
  const Objective o = parse_objective(objective, "--objective");
  const bool drain = o == Objective::Drain || o == Objective::DrainTpot;
  return in.offline || (drain && !online && !load_given(in));
}

EvaluatorInputs search_evaluator_inputs(const SimInputs& in, const LoadedInputs& L, const ServingOptions& so,
                                        Tier tier, const std::string& objective, const std::string& goal,
                                        int samples, SimgridRunner* runner, const std::string& goal_source) {
  EvaluatorInputs ei;
  ei.model = &L.model;
  ei.cluster = L.cluster.get();
  ei.cluster_spec = in.cluster;
  ei.trace = &L.trace;
  ei.routing = L.routing.get();
  ei.serving = so;
  ei.tier = tier;
  ei.runner = runner;
  ei.samples = samples;
  ei.population = &L.population;
  ei.objective = parse_objective(objective, "--objective");
  ei.goal = parse_slo_goal(goal, so.slo_ttft, so.slo_tpot, goal_source);
  ei.arrivals = in.arrivals == "trace" ? Arrival::Trace : Arrival::Poisson;
  ei.seed = in.seed;
  return ei;
}

std::vector<SearchRun> make_runs(const std::vector<std::string>& names, const std::vector<RuleGenes>& rules,
                                 const SearchSpace& space, const SeedRange& seeds) {
  std::vector<SearchRun> runs;
  for (const auto& n : names) {
    if (n == "megatron") {
      runs.push_back({n, 1, static_cast<long>(std::max<std::size_t>(1, rules.size())), {}});
    } else if (n == "exhaustive") {
      // Its budget is the whole space; it refuses a space beyond exhaustive.limit itself.
      const double size = space.canonical_size();
      runs.push_back({n, 1, static_cast<long>(std::min(size, 1e15)), {}});
    } else {
      for (std::uint64_t s = seeds.first; s <= seeds.last; ++s) runs.push_back({n, s, 0, {}});
    }
  }
  return runs;
}

bool write_study_outputs(const std::string& out, const json& inputs, const SearchReport& rep, const SearchOutcome& outcome,
                         const SearchSpace& space, const std::string& unit, const std::string& md, long budget, bool log_evals) {
  OutputStaging staging(out);
  write_search_outputs(staging.dir(), inputs, rep, outcome, space, unit, md, budget, log_evals);
  // No shell: the folder's name may hold any character.
  const bool plotted = plot_png(staging.dir(), "anytime.gp", "anytime.png");
  staging.publish();
  return plotted;
}

}  // namespace shardsim
