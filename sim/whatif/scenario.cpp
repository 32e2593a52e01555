// sim/whatif/scenario.cpp — scenarios of a comparison: parsing their choices, the product, labels,
// and the scenario file.
#include "sim/whatif/scenario.hpp"

#include <cmath>

#include "common/display_text.hpp"
#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "common/json_reader.hpp"
#include "sim/serving/tier.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

std::string LoadChoice::text() const {
  char buf[64];
  switch (kind) {
    case Kind::Offline: return "offline";
    case Kind::Trace: return "trace";
    case Kind::Rate: std::snprintf(buf, sizeof buf, "rate=%g", value); return buf;
    case Kind::Clients: std::snprintf(buf, sizeof buf, "clients=%g", value); return buf;
  }
  return "offline";
}

LoadChoice parse_load_choice(const std::string& text, const std::string& source, const std::string& field) {
  LoadChoice c;
  if (text == "offline") return c;
  if (text == "trace") {
    c.kind = LoadChoice::Kind::Trace;
    return c;
  }
  const auto eq = text.find('=');
  const std::string key = text.substr(0, eq);
  double v = 0;
  const bool number = eq != std::string::npos && parse_double(text.substr(eq + 1), v);
  if (key == "rate" && number && v > 0 && std::isfinite(v)) {
    c.kind = LoadChoice::Kind::Rate;
    c.value = v;
    return c;
  }
  if (key == "clients" && number && v >= 1 && v <= 1e7 && v == std::floor(v)) {
    c.kind = LoadChoice::Kind::Clients;
    c.value = v;
    return c;
  }
  throw InputError(source, field, "'" + text + "' is not a load (expected offline, trace, rate=REQ_PER_S > 0 or clients=N ≥ 1)");
}

PlanChoice parse_plan_choice(const std::string& text, const std::string& source, const std::string& field) {
  PlanChoice c;
  if (text.rfind("search", 0) != 0) {
    if (text.empty()) throw InputError(source, field, "an empty plan (expected a plan file, compact string, megatron or search:B)");
    c.spec = text;
    return c;
  }
  // search:B or search:B:OPTIMIZER
  const auto colon = text.find(':');
  const std::string rest = colon == std::string::npos ? "" : text.substr(colon + 1);
  const auto colon2 = rest.find(':');
  const std::string budget = rest.substr(0, colon2);
  double b = 0;
  if (text.substr(0, colon) != "search" || !parse_double(budget, b) || b < 1 || b > 1e6 || b != std::floor(b))
    throw InputError(source, field, "'" + text + "': expected search:B or search:B:OPTIMIZER with a budget B of 1 to 1,000,000 evaluations");
  c.search = true;
  c.budget = static_cast<long>(b);
  if (colon2 != std::string::npos) c.optimizer = rest.substr(colon2 + 1);
  if (c.optimizer.empty()) throw InputError(source, field, "'" + text + "': no optimizer after the budget");
  return c;
}

std::vector<Scenario> expand(const ScenarioAxes& a) {
  std::vector<Scenario> out;
  const std::vector<std::string> no_engine = {""};
  const auto& engines = a.engines.empty() ? no_engine : a.engines;
  for (const auto& m : a.models)
    for (const auto& c : a.clusters)
      for (const auto& e : engines)
        for (const auto& l : a.loads)
          for (const auto& p : a.plans) out.push_back(Scenario{m, c, e, l, p, "", -1, ""});
  return out;
}

void label_scenarios(std::vector<Scenario>& sc) {
  struct Axis {
    const char* name;
    std::string Scenario::*field;
  };
  const Axis axes[] = {{"model", &Scenario::model}, {"cluster", &Scenario::cluster}, {"engine", &Scenario::engine},
                       {"load", &Scenario::load}, {"plan", &Scenario::plan}};
  std::vector<const Axis*> varying;
  for (const auto& ax : axes)
    for (const auto& s : sc)
      if (s.*ax.field != sc.front().*ax.field) {
        varying.push_back(&ax);
        break;
      }
  for (auto& s : sc) {
    if (!s.name.empty()) {
      s.label = s.name;
      continue;
    }
    s.label.clear();
    // Values are the file's or the command line's text (a path may hold any byte): shown escaped.
    for (const Axis* ax : varying)
      s.label += (s.label.empty() ? "" : " · ") + std::string(ax->name) + "=" + terminal_safe(s.*ax->field);
    if (s.label.empty()) s.label = "plan=" + terminal_safe(s.plan);
  }
}

std::string field_of(const Scenario& s, const std::string& key) {
  if (s.index >= 0) return "/scenarios/" + std::to_string(s.index) + "/" + key;
  return "/" + key + "s";
}

namespace {

// A string or an array of strings (at least one).
std::vector<std::string> strings_of(JsonObject& o, std::string_view key) {
  const json& v = o.raw(key);
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array() && !v.empty()) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) o.fail(key, "item " + std::to_string(i) + " is not a string");
      out.push_back(v[i].get<std::string>());
    }
  } else {
    o.fail(key, "expected a string or a non-empty array of strings");
  }
  for (const auto& s : out)
    if (s.empty()) o.fail(key, "an empty value");
  return out;
}

void read_settings(JsonObject& o, ScenarioSettings& s) {
  for (auto [key, slot] : {std::pair{"trace", &s.trace}, {"routing", &s.routing}, {"slo", &s.slo},
                           {"fidelity", &s.fidelity}, {"goal", &s.goal}, {"gpu_hour_usd", &s.gpu_hour}}) {
    if (!o.has(key)) continue;
    const json& v = o.raw(key);
    if (v.is_number() && std::string(key) == "gpu_hour_usd") *slot = std::to_string(v.get<double>());
    else if (v.is_string()) *slot = v.get<std::string>();
    else o.fail(key, "expected a string");
  }
  if (s.fidelity) {
    try {
      parse_tier(*s.fidelity, {Tier::Analytic, Tier::Simgrid}, "", kNoFullTier);
    } catch (const InputError& e) {
      o.fail("fidelity", e.reason());
    }
  }
  if (o.has("requests")) s.requests = static_cast<int>(o.integer("requests", 1, 10'000'000));
  if (o.has("seed")) s.seed = static_cast<std::uint64_t>(o.integer("seed", 0, std::numeric_limits<std::int64_t>::max()));
  if (o.has("max_rate")) s.max_rate = o.boolean_or("max_rate", false);
}

// The value of an axis for an explicit scenario: its own key, else the axis' single value.
std::string pick(JsonObject& o, const char* key, const std::vector<std::string>& axis, const JsonObject& root,
                 const char* axis_key, bool optional) {
  if (o.has(key)) {
    const json& v = o.raw(key);
    if (!v.is_string() || v.get<std::string>().empty()) o.fail(key, "expected a non-empty string");
    return v.get<std::string>();
  }
  if (axis.size() == 1) return axis.front();
  if (axis.empty() && optional) return "";
  if (axis.empty()) o.fail(key, std::string("missing, and the file has no \"") + axis_key + "\" to take it from");
  root.fail(axis_key, std::string("holds several values, so every scenario must name its \"") + key + "\"");
}

}  // namespace

ScenarioFile parse_scenario_file(const std::string& text, const std::string& source) {
  const json doc = parse_json(text, source);
  JsonObject root(doc, source);
  ScenarioFile f;
  ScenarioAxes& a = f.axes;
  for (auto [key, axis] : {std::pair{"models", &a.models}, {"clusters", &a.clusters}, {"engines", &a.engines},
                           {"loads", &a.loads}, {"plans", &a.plans}})
    if (root.has(key)) *axis = strings_of(root, key);
  read_settings(root, f.settings);
  if (root.has("scenarios")) {
    const json& list = root.raw("scenarios");
    if (!list.is_array() || list.empty()) root.fail("scenarios", "expected a non-empty array of objects");
    for (std::size_t i = 0; i < list.size(); ++i) {
      JsonObject o(list[i], source, root.pointer("scenarios") + "/" + std::to_string(i));
      Scenario s;
      s.model = pick(o, "model", a.models, root, "models", false);
      s.cluster = pick(o, "cluster", a.clusters, root, "clusters", false);
      s.engine = pick(o, "engine", a.engines, root, "engines", true);
      s.load = pick(o, "load", a.loads, root, "loads", true);
      s.plan = pick(o, "plan", a.plans, root, "plans", true);
      s.name = o.has("name") ? o.name("name") : "";
      s.index = static_cast<int>(i);
      o.finish();
      f.explicit_scenarios.push_back(s);
    }
  } else {
    if (a.models.empty()) root.fail("models", "missing (a model preset, model JSON or Hugging Face config.json)");
    if (a.clusters.empty()) root.fail("clusters", "missing (a cluster shorthand such as dgx-h100:8, or a cluster JSON)");
  }
  root.finish();
  return f;
}

ScenarioFile read_scenario_file(const std::string& path) { return parse_scenario_file(read_text_file(path), path); }

std::vector<Scenario> scenarios_of(const ScenarioFile& file, const std::string& default_load, const std::string& default_plan) {
  std::vector<Scenario> out = file.explicit_scenarios;
  if (out.empty()) {
    ScenarioAxes a = file.axes;
    if (a.loads.empty()) a.loads = {default_load};
    if (a.plans.empty()) a.plans = {default_plan};
    out = expand(a);
  }
  for (auto& s : out) {
    if (s.load.empty()) s.load = default_load;
    if (s.plan.empty()) s.plan = default_plan;
  }
  return out;
}

}  // namespace shardsim
