// sim/whatif/scenario.hpp — what a what-if comparison runs: scenarios, their axes, and the
// scenario file.
//
// Owns: ScenarioAxes (a list of values per axis: models, clusters, engine presets, loads, plans),
// Scenario (one value per axis and a label), expand() (the axes' product, or an explicit list),
// the load and plan choices a scenario may name (LoadChoice, PlanChoice) and read_scenario_file().
// A scenario names its inputs as text (a model preset or file, a cluster spec, …); loading them is
// the caller's (the command line's) job, so this module knows no model or cluster.
// Scenario file (JSON, docs/what-if.md "Comparing scenarios"): the axes as a string or an array of
// strings under "models", "clusters", "engines", "loads", "plans"; optionally "scenarios", a list
// of objects with the keys "model", "cluster", "engine", "load", "plan", "name" (each defaulting to
// its axis' only value) run instead of the product; and the shared settings below. Unknown keys
// and wrong types are refused with the file and the JSON pointer named.
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardsim {

// How requests arrive in a scenario: "offline", "trace" (the trace's own times), "rate=R"
// (Poisson at R req/s) or "clients=N" (a closed loop of N clients).
struct LoadChoice {
  enum class Kind { Offline, Trace, Rate, Clients };
  Kind kind = Kind::Offline;
  double value = 0;                    // Rate: req/s; Clients: the client count
  std::string text() const;            // as parsed, normalised ("rate=4")
};
// Throws InputError(source, field, …) naming the accepted forms.
LoadChoice parse_load_choice(const std::string& text, const std::string& source, const std::string& field);

// Which plan a scenario scores: a plan (file or compact string), "megatron" (the Megatron rule
// plan for the scenario's model and cluster), or "search:B[:OPTIMIZER]" (the best plan found by the
// Megatron portfolio and OPTIMIZER — simulated annealing by default — with a budget of B evaluations).
struct PlanChoice {
  std::string spec;                    // the plan spec, unless a search
  bool search = false;
  long budget = 0;
  std::string optimizer = "sa";
};
PlanChoice parse_plan_choice(const std::string& text, const std::string& source, const std::string& field);

struct ScenarioAxes {
  std::vector<std::string> models, clusters, engines, loads, plans;  // engines may be empty: the plans' own
};

struct Scenario {
  std::string model, cluster, engine, load, plan;  // engine "" = the plan's own engine settings
  std::string name;                                 // the file's "name", else empty
  int index = -1;                                   // its place in the file's "scenarios" (−1: from the axes)
  // "cluster=dgx-h100:8,oversub=2 · plan=megatron": the axes whose values differ between the
  // scenarios of one comparison (set by label_scenarios), or the name.
  std::string label;
};

// The product of the axes in the order models, clusters, engines, loads, plans (plans varying
// fastest). Every axis but engines must hold at least one value; no engines = the plans' own.
std::vector<Scenario> expand(const ScenarioAxes& axes);
// Sets every scenario's label from the axes that vary among them (or its name).
void label_scenarios(std::vector<Scenario>& scenarios);
// Where a scenario's `key` ("model", "cluster", "engine", "load" or "plan") was written in a
// scenario file: "/scenarios/2/cluster" or "/clusters".
std::string field_of(const Scenario& s, const std::string& key);

// Settings a scenario file may give for every scenario; unset = the command line's.
struct ScenarioSettings {
  std::optional<std::string> trace, routing, slo, fidelity, goal, gpu_hour;
  std::optional<int> requests;
  std::optional<std::uint64_t> seed;
  std::optional<bool> max_rate;
};

struct ScenarioFile {
  ScenarioAxes axes;
  std::vector<Scenario> explicit_scenarios;  // the file's "scenarios" (empty: the product)
  ScenarioSettings settings;
};

// Reads a scenario file; InputError(path, "/pointer", reason) for bad content, InputError(path,
// "", …) when it cannot be read.
ScenarioFile read_scenario_file(const std::string& path);
// The same from text (`source` names it in errors).
ScenarioFile parse_scenario_file(const std::string& text, const std::string& source);

// The scenarios of a file: its explicit list (missing keys from the axes' single values) or the
// product of its axes; a load or plan given nowhere is `default_load` / `default_plan`.
std::vector<Scenario> scenarios_of(const ScenarioFile& file, const std::string& default_load, const std::string& default_plan);

}  // namespace shardsim
