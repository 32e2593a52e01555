// tools/cli/cmd_space.cpp — `shardsim space`: the decisions a search makes for a model on a
// cluster, the size of the space, how much of it is valid, and the Megatron rule plans in it.
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include "common/readable_number.hpp"
#include "common/input_error.hpp"
#include "optimizers/space/megatron_portfolio.hpp"
#include "optimizers/space/search_space.hpp"
#include "tools/cli/commands.hpp"
#include "topologies/cluster_io.hpp"
#include "workloads/model.hpp"

namespace shardsim::cli {

namespace {

struct SpaceCmdOptions {
  std::string model = "mixtral-8x7b";
  std::string cluster = "dgx-h100:1";
  std::string space = "all";
  std::string base;
};

void run(const SpaceCmdOptions& opt) {
  ModelSpec model = load_model(opt.model);
  std::unique_ptr<Cluster> cluster(new Cluster(load_cluster(opt.cluster)));
  Plan base = default_plan(model);
  if (!opt.base.empty()) base = load_plan(opt.base, model, *cluster);
  const std::unique_ptr<SearchSpace> space_owner = make_search_space(model, *cluster, base, parse_space_options(opt.space, "--space"));
  const SearchSpace& space = *space_owner;
  std::ostream& o = std::cout;
  o << "search space: " << model.name << " on " << cluster->name() << " (" << cluster->num_gpus() << " GPUs), blocks "
    << to_string(space.options()) << "\n\n";
  o << "decision            block     values\n";
  for (const auto& dec : space.decisions()) {
    std::string vals;
    for (const auto& l : dec.labels) vals += (vals.empty() ? "" : " | ") + l;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%-19s %-9s ", dec.name.c_str(), to_string(dec.block));
    o << buf << vals << (dec.ordinal ? "  (ordinal)" : "") << "\n";
  }
  // Validity of the degree assignments (sharding, mapping and batching at their base values).
  SpaceOptions deg_only{true, false, false, false, space.options().pools};
  std::map<std::string, int> reasons;
  long tuples = 0, valid = 0;
  if (space.options().degrees) {
    const std::unique_ptr<SearchSpace> ds = make_search_space(model, *cluster, base, deg_only);
    ds->for_each_canonical([&](const Genes& g) {
      ++tuples;
      PlanCheck chk = ds->check(g);
      if (chk.feasible()) ++valid;
      else ++reasons[chk.violations.front().field];
      return true;
    });
  }
  o << "\nsize: " << readable(space.raw_size()) << " genomes, " << readable(space.canonical_size())
    << " distinct plans (canonical form)\n";
  if (tuples > 0) {
    o << "degree assignments: " << tuples << " distinct, " << valid << " valid with Megatron sharding and default batching";
    std::string why;
    for (const auto& [f, n] : reasons) why += (why.empty() ? "" : ", ") + std::to_string(n) + " " + f;
    o << (why.empty() ? "" : " (first violation: " + why + ")") << "\n";
  }
  auto rules = portfolio_genes(space);
  o << "\nMegatron rule plans (" << rules.size() << "):\n";
  for (const auto& r : rules) o << "  " << r.rule << std::string(r.rule.size() < 22 ? 22 - r.rule.size() : 1, ' ')
                                << plan_to_string(space.decode(r.genes)) << "\n";
}

}  // namespace

void add_space_command(CLI::App& app) {
  auto opt = std::make_shared<SpaceCmdOptions>();
  auto* cmd = app.add_subcommand("space",
                                 "Show the decisions a plan search makes for a model on a cluster, the size of the\n"
                                 "space (exact count of distinct plans), how many degree assignments are valid, and the\n"
                                 "Megatron rule plans in it.\n\n"
                                 "Examples:\n"
                                 "  shardsim space --model mixtral-8x7b --cluster dgx-h100:2\n"
                                 "  shardsim space --model deepseek-v3 --cluster dgx-h100:32 --space degrees,sharding\n"
                                 "  shardsim space --model mixtral-8x7b --cluster dgx-h100:4 --space all,pools   # prefill/decode pools");
  cmd->add_option("--model,-m", opt->model, "model preset, model JSON or Hugging Face config.json")->capture_default_str();
  cmd->add_option("--cluster,-c", opt->cluster, "cluster shorthand or JSON")->capture_default_str();
  cmd->add_option("--space", opt->space, "blocks to search: degrees, sharding, mapping, batching, or all; add routing for the dispatch, pools for disaggregated plans")->capture_default_str();
  cmd->add_option("--base", opt->base, "plan for everything not searched");
  cmd->callback([opt] { run(*opt); });
}

}  // namespace shardsim::cli
