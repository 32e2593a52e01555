// tools/cli/cmd_plan.cpp — `shardsim plan check`: verdict, per-GPU memory, communication groups.
//
// An infeasible plan prints its full explanation on stdout, then one "error:" line on stderr and
// exits with code 2 (an impossible plan is bad input).
#include <cstdio>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "common/readable_number.hpp"
#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"
#include "sim/plan/plan_layout.hpp"
#include "tools/cli/commands.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

namespace shardsim::cli {

namespace {

struct PlanOptions {
  std::string model = "mixtral-8x7b";
  std::string cluster = "dgx-h100:2";
  std::string plan = "megatron";
  std::string json_out;
};

std::string (*const fmt)(const char*, double) = formatted;  // common/readable_number

std::string describe_groups(const PlanLayout& layout, GroupKind kind, const Cluster& c) {
  auto groups = layout.groups(kind);
  if (groups.empty() || groups.front().size() <= 1) return "";
  int max_nodes = 0;
  for (const auto& g : groups) {
    std::set<int> nodes;
    for (int gpu : g) nodes.insert(c.node_of(gpu));
    max_nodes = std::max(max_nodes, static_cast<int>(nodes.size()));
  }
  std::ostringstream ex;
  for (std::size_t i = 0; i < groups.front().size() && i < 8; ++i) ex << (i ? "," : "") << groups.front()[i];
  if (groups.front().size() > 8) ex << ",…";
  char line[256];
  std::snprintf(line, sizeof line, "  %-8s %6zu %6zu   %-22s {%s}\n", to_string(kind), groups.size(),
                groups.front().size(),
                max_nodes == 1 ? "inside one NVLink domain" : (std::to_string(max_nodes) + " NVLink domains").c_str(),
                ex.str().c_str());
  return line;
}

json check_to_json(const Plan& plan, const PlanCheck& chk) {
  json j;
  j["schema"] = "shardsim.plan-check/1";
  j["plan"] = plan_to_json(plan);
  j["feasible"] = chk.feasible();
  j["violations"] = json::array();
  for (const auto& v : chk.violations) j["violations"].push_back({{"field", v.field}, {"reason", v.reason}});
  j["notes"] = chk.notes;
  if (chk.memory_valid) {
    const auto& m = chk.memory;
    json stages = json::array();
    for (const auto& s : m.stages)
      stages.push_back({{"stage", s.stage},
                        {"layers", s.layers},
                        {"weights_gb", s.weights / 1e9},
                        {"activations_gb", s.activations / 1e9},
                        {"comm_buffers_gb", s.comm_buffers / 1e9},
                        {"kv_bytes_per_token", s.kv_per_token}});
    j["memory"] = {{"hbm_gb", m.hbm / 1e9},          {"usable_gb", m.usable / 1e9},
                   {"worst_stage", m.worst_stage},   {"kv_one_seq_gb", m.kv_one_seq / 1e9},
                   {"kv_at_limits_gb", m.kv_at_limits / 1e9}, {"kv_capacity_tokens", m.kv_capacity_tokens},
                   {"headroom_gb", m.headroom / 1e9}, {"fits", m.fits},
                   {"stages", stages}};
  }
  return j;
}

void run_check(const PlanOptions& o) {
  ModelSpec model = load_model(o.model);
  Cluster cluster = load_cluster(o.cluster);
  Plan plan = load_plan(o.plan, model, cluster);
  PlanCheck chk = check_plan(plan, model, cluster);
  const Degrees& d = plan.deg;
  std::ostream& out = std::cout;
  out << "plan      " << plan_to_string(plan, model) << (plan.name == "megatron" ? "   (Megatron rule)" : "") << "\n";
  out << "model     " << model.name << fmt("  (%.1fB parameters, ", model.total_params() / 1e9)
      << fmt("%.1fB active)\n", model.active_params() / 1e9);
  out << "cluster   " << cluster.name() << "  (" << cluster.gpus_text() << ", " << cluster.gpus_per_node()
      << " per NVLink domain)\n";
  if (plan.disaggregated()) {
    auto pool = [&](const char* name, const Plan& p) {
      std::string s = std::string(name) + " GPUs " + std::to_string(p.first_gpu) + "–" + std::to_string(p.first_gpu + p.deg.gpus() - 1);
      if (cluster.mixed()) s += " " + cluster.pool_gpu(p.first_gpu).name;
      return s + " (" + plan_to_string(p) + ")";
    };
    out << "pools     " << pool("prefill", plan.prefill()) << ", " << pool("decode", plan.decode())
        << "; the details below are the prefill pool's, the notes both pools' (docs/disaggregation.md)\n";
  }
  out << "degrees   dp=" << d.dp << " pp=" << d.pp << " tp=" << d.tp << " attn_dp=" << d.attn_dp << " sp=" << d.sp;
  if (model.is_moe()) out << "   MoE: ep=" << d.ep << " etp=" << d.etp;
  out << "\nsharding ";
  for (int i = 0; i < kNumOps; ++i) out << " " << to_string(static_cast<Op>(i)) << "=" << to_string(plan.sharding[i]);
  out << "\nmapping   ";
  for (int i = 0; i < 4; ++i) out << (i ? "," : "") << to_string(plan.mapping[i]);
  out << " (fastest first)\ndtypes    weights=" << to_string(plan.dtypes.weights)
      << " activations=" << to_string(plan.dtypes.activations) << " kv=" << to_string(plan.dtypes.kv) << "\n";
  out << "          " << plan.dtypes.describe() << "\n";
  const EngineSettings& e = plan.engine;
  const char* whose = plan.deg.attn_dp > 1 && e.rank_limits ? " per attention-DP rank" : " per replica (engine)";
  out << "engine    " << e.preset << ": max_seqs=" << e.max_seqs << whose << ", max_batch_tokens="
      << e.max_batch_tokens << " per iteration" << (plan.deg.attn_dp > 1 && e.rank_limits ? " per rank" : "") << ", max_context=" << e.max_context << ", prefill_chunk="
      << (e.prefill_chunk > 0 ? std::to_string(e.prefill_chunk) : std::string("off")) << "\n          KV "
      << (e.kv_budget == KvBudget::FreeFraction ? "kv_free_fraction=" : "mem_util=") << e.kv_fraction << ", policy "
      << to_string(e.policy) << ", CUDA graphs " << (e.cuda_graphs ? "on" : "off") << ", host "
      << fmt("%.2f ms per iteration", e.step_overhead * 1e3) << fmt(" + %.1f µs per sequence\n\n", e.seq_overhead * 1e6);

  if (chk.feasible()) {
    out << "verdict   FEASIBLE\n";
  } else {
    out << "verdict   INFEASIBLE (" << chk.violations.size() << " violation" << (chk.violations.size() > 1 ? "s" : "")
        << ")\n";
    for (const auto& v : chk.violations) out << "  ✗ " << v.field << ": " << v.reason << "\n";
  }
  for (const auto& n : chk.notes) out << "  note: " << n << "\n";

  if (chk.memory_valid) {
    const MemoryReport& m = chk.memory;
    const StageMemory& w = m.worst();
    out << "\nmemory per GPU, stage " << m.worst_stage << " of " << d.pp << " (the tightest)      GB\n";
    out << fmt("  weights                                    %8.2f\n", w.weights / 1e9);
    out << fmt("  activations (peak layer)                   %8.2f\n", w.activations / 1e9);
    out << fmt("  communication buffers                      %8.2f\n", w.comm_buffers / 1e9);
    out << fmt("  runtime (CUDA context, libraries)          %8.2f\n", w.runtime / 1e9);
    out << fmt("  KV cache of one max_context sequence       %8.2f\n", m.kv_one_seq / 1e9);
    double total = w.static_bytes() + m.kv_one_seq;
    out << fmt("  total                                      %8.2f", total / 1e9)
        << fmt("   of %.1f usable", m.usable / 1e9) << fmt(" (of %.1f GB reported by the driver)\n", m.hbm / 1e9);
    out << (m.fits ? "  headroom " : "  OVER BY ") << fmt("%.2f GB\n", std::abs(m.headroom) / 1e9);
    out << fmt("  KV capacity %.0f tokens per attention group", m.kv_capacity_tokens)
        << fmt(" (%.1f max_context sequences);", m.kv_capacity_tokens / plan.engine.max_context)
        << fmt(" at the batching limits KV needs %.1f GB\n", m.kv_at_limits / 1e9);
    if (m.stages.size() > 1) {
      out << "  stage  layers(dense+moe)  weights  activ.  KV MB/1k tokens\n";
      for (const auto& s : m.stages)
        out << fmt("  %5.0f", s.stage) << fmt("  %6.0f", s.layers) << fmt(" (%2.0f+", s.dense_layers)
            << fmt("%2.0f)   ", s.moe_layers) << fmt("%7.2f", s.weights / 1e9) << fmt("  %6.2f", s.activations / 1e9)
            << fmt("  %8.1f\n", s.kv_per_token * 1000 / 1e6);
    }
    PlanLayout layout(plan);
    out << "\ncommunication groups\n  kind      count   size   placement              first group\n";
    for (GroupKind k : {GroupKind::Tp, GroupKind::AttnDp, GroupKind::Ep, GroupKind::Etp, GroupKind::Pp, GroupKind::Dp}) {
      if (!model.is_moe() && (k == GroupKind::Ep || k == GroupKind::Etp)) continue;
      out << describe_groups(layout, k, cluster);
    }
  }
  out.flush();
  if (!o.json_out.empty()) write_file_atomically(o.json_out, json_text(check_to_json(plan, chk), 2) + "\n");
  if (!chk.feasible())
    throw InputError(o.plan, chk.violations.front().field,
                     "infeasible plan: " + chk.violations.front().reason +
                         (chk.violations.size() > 1 ? " (and " + std::to_string(chk.violations.size() - 1) + " more)" : ""));
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto* plan = app.add_subcommand("plan", "Work with parallelism + sharding plans");
  plan->require_subcommand(1);
  auto opts = std::make_shared<PlanOptions>();
  auto* check = plan->add_subcommand(
      "check",
      "Check a plan against a model and a cluster: every violation explained, memory per GPU, communication groups.\n"
      "An infeasible plan exits with code 2.\n\n"
      "Examples:\n"
      "  shardsim plan check --model deepseek-v3 --cluster dgx-h100:16 --plan plan.json\n"
      "  shardsim plan check --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=2,dp=4,weights=fp8,kv=fp8\n"
      "  shardsim plan check --model llama2-70b --cluster dgx-h100:1 --plan tp=2,dp=4,weights=fp8,act=fp8,kv=fp8,engine=trtllm-mlperf\n"
      "  shardsim plan check --model deepseek-v3 --cluster dgx-h100:4 --plan tp=1,ep=32,attn_dp=32\n"
      "  shardsim plan check --model llama3-70b --cluster dgx-h100:2 --plan megatron --json check.json");
  check->add_option("--model,-m", opts->model, "model preset, model JSON or Hugging Face config.json")
      ->capture_default_str();
  check->add_option("--cluster,-c", opts->cluster, "cluster shorthand (dgx-h100:N) or cluster JSON")
      ->capture_default_str();
  check->add_option("--plan,-p", opts->plan, "plan JSON file, compact string (tp=2,dp=4,engine=trtllm,max_seqs=896: degrees, sharding, dtypes, engine settings; docs/plan-format.md) or 'megatron'")
      ->capture_default_str();
  check->add_option("--json", opts->json_out, "also write the check as JSON to this file");
  check->callback([opts] { run_check(*opts); });
}

}  // namespace shardsim::cli
