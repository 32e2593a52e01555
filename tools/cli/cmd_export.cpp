// tools/cli/cmd_export.cpp — `shardsim export` (a plan as vLLM / SGLang / TensorRT-LLM launch files)
// and `shardsim import` (such a config file back to a plan).
//
// export refuses an infeasible plan (exit 2) before writing; its files replace the folder's
// previous export as a whole (optimizers/search/study_dir.hpp). The mapping: sim/plan/launch_export.hpp,
// docs/export.md.
#include <sys/stat.h>

#include <cmath>
#include <iostream>
#include <memory>

#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "common/embedded.hpp"
#include "common/json_reader.hpp"
#include "optimizers/search/study_dir.hpp"
#include "sim/plan/launch_export.hpp"
#include "sim/plan/plan_check.hpp"
#include "tools/cli/commands.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim::cli {

namespace {

struct ExportOptions {
  std::string model = "mixtral-8x7b", cluster = "dgx-h100:2", plan = "megatron", engine, out, model_path;
  std::string trace = "azure-conv";
  long requests = 1000;
  double rate = 0;
  int concurrency = 0;
  bool dynamo = false;
};

struct ImportOptions {
  std::string file, engine, model = "mixtral-8x7b", cluster = "dgx-h100:2", json_out;
};

const std::vector<std::string>& export_members() {
  static const std::vector<std::string> m = [] {
    std::vector<std::string> v = {"launch.sh", "bench.sh", "NOTES.md", "trtllm-disagg.yaml", "dynamo.sh", "dynamo-deploy.yaml"};
    for (const char* e : {"vllm", "sglang", "trtllm"})
      for (const char* s : {"", "-prefill", "-decode"}) v.push_back(std::string(e) + s + ".yaml");
    return v;
  }();
  return m;
}

void run_export(const ExportOptions& o) {
  const LaunchEngine engine = parse_launch_engine(o.engine, "--engine", "");
  if (o.out.empty()) throw InputError("--out", "", "a folder for the launch files is required");
  const ModelSpec model = load_model(o.model);
  const Cluster cluster = load_cluster(o.cluster);
  const Plan plan = load_plan(o.plan, model, cluster);
  const PlanCheck chk = check_plan(plan, model, cluster);
  if (!chk.feasible())
    throw InputError(o.plan, chk.violations.front().field, "infeasible plan: " + chk.violations.front().reason);
  std::string path = o.model_path.empty() ? hf_model_id(model.name) : o.model_path;
  if (path.empty())
    throw InputError("--model-path", "", model.name + " is not a preset with a known Hugging Face id: give the path the engine loads");
  if (o.requests < 1) throw InputError("--requests", "", "must be at least 1");
  if (o.rate < 0) throw InputError("--rate", "", "must be >= 0");
  if (o.concurrency < 0) throw InputError("--concurrency", "", "must be >= 0");
  if (o.rate > 0 && o.concurrency > 0) throw InputError("--rate", "", "give --rate or --concurrency, not both");
  const RequestTrace trace = load_request_trace(o.trace);
  const RequestTraceStats st = request_trace_stats(trace);
  LaunchLoad load;
  load.requests = o.requests;
  load.rate = o.rate;
  load.clients = o.concurrency;
  if (st.count > 0) {
    load.prompt_tokens = static_cast<int>(std::lround(static_cast<double>(st.prompt_tokens_total) / static_cast<double>(st.count)));
    load.output_tokens = static_cast<int>(std::lround(static_cast<double>(st.output_tokens_total) / static_cast<double>(st.count)));
  }
  const LaunchExport ex = export_launch(plan, model, cluster, engine, path, load, o.dynamo);
  prepare_study_dir(o.out, false);
  OutputStaging staging(o.out, export_members());
  for (const LaunchFile& f : ex.files) {
    const std::string p = staging.dir() + "/" + f.name;
    write_file_atomically(p, f.text);
    if (f.executable) ::chmod(p.c_str(), 0755);
  }
  staging.publish();
  std::cout << "shardsim export: " << plan_to_string(plan, model) << " for " << to_string(engine) << " (" << path << ")\nwrote " << o.out
            << "/{";
  for (std::size_t i = 0; i < ex.files.size(); ++i) std::cout << (i ? ", " : "") << ex.files[i].name;
  std::cout << "}\n";
  if (!ex.not_expressed.empty()) {
    std::cout << "not expressed (the engine runs its own; NOTES.md):\n";
    for (const auto& s : ex.not_expressed) std::cout << "  - " << s << "\n";
  }
}

void run_import(const ImportOptions& o) {
  const LaunchEngine engine = parse_launch_engine(o.engine, "--engine", "");
  const ModelSpec model = load_model(o.model);
  const Cluster cluster = load_cluster(o.cluster);
  if (!o.json_out.empty()) check_output_path(o.json_out);
  const std::string text = read_text_file(o.file);
  std::vector<std::string> ignored;
  const Plan plan = import_launch(engine, text, o.file, model, cluster, &ignored);
  const PlanCheck chk = check_plan(plan, model, cluster);
  std::cout << "plan      " << plan_to_string(plan, model) << "\n";
  std::cout << "verdict   " << (chk.feasible() ? "feasible" : "INFEASIBLE: " + chk.violations.front().field + ": " + chk.violations.front().reason)
            << " on " << cluster.name() << "\n";
  if (!ignored.empty()) {
    std::cout << "ignored (engine settings with no plan field):\n";
    for (const auto& s : ignored) std::cout << "  " << s << "\n";
  }
  if (!o.json_out.empty()) write_file_atomically(o.json_out, json_text(plan_to_json(plan), 2) + "\n");
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand(
      "export",
      "Write what an engine needs to run a plan: its config (vLLM --config YAML, SGLang launch arguments, TensorRT-LLM\n"
      "extra_llm_api_options YAML), launch.sh (one server per replica on the GPUs the plan gives it, a router or the\n"
      "prefill/decode pools of a disaggregated plan), bench.sh (the engine's own benchmark client at the simulated load)\n"
      "and NOTES.md (what the plan sets that the engine has no flag for). docs/export.md maps every field.\n\n"
      "Examples:\n"
      "  shardsim export --model deepseek-v3 --cluster dgx-h100:4 --plan tp=1,attn_dp=8,ep=8,dp=4 --engine sglang --out ds\n"
      "  shardsim export --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=2,dp=4,engine=vllm --engine vllm --rate 20 --out mx");
  cmd->add_option("--model,-m", o->model, "model preset, model JSON or Hugging Face config.json")->capture_default_str();
  cmd->add_option("--cluster,-c", o->cluster, "cluster shorthand or cluster JSON")->capture_default_str();
  cmd->add_option("--plan,-p", o->plan, "plan JSON, compact string or 'megatron'")->capture_default_str();
  cmd->add_option("--engine", o->engine, "vllm, sglang or trtllm")->required();
  cmd->add_option("--out", o->out, "folder for the files (replaced as a whole)")->required();
  cmd->add_option("--model-path", o->model_path, "what the engine loads (default: the preset's Hugging Face id)");
  cmd->add_option("--trace", o->trace, "request trace whose mean lengths the benchmark uses")->capture_default_str();
  cmd->add_option("--requests", o->requests, "requests the benchmark sends")->capture_default_str();
  cmd->add_option("--rate", o->rate, "Poisson req/s for the benchmark (default: all at once)");
  cmd->add_option("--concurrency", o->concurrency, "closed-loop clients for the benchmark");
  cmd->add_flag("--dynamo", o->dynamo,
                "also write dynamo.sh and dynamo-deploy.yaml: the replicas as NVIDIA Dynamo workers behind its frontend (processes, and a "
                "Kubernetes DynamoGraphDeployment); bench.sh then talks to the Dynamo frontend");
  cmd->callback([o] { run_export(*o); });

  auto i = std::make_shared<ImportOptions>();
  auto* imp = app.add_subcommand(
      "import",
      "Read an engine config (one that `shardsim export` wrote, or yours in the same YAML form) back into a plan, and\n"
      "check it; settings with no plan field are listed.\n\n"
      "Examples:\n"
      "  shardsim import ds/sglang.yaml --engine sglang --model deepseek-v3 --cluster dgx-h100:4\n"
      "  shardsim import mx/vllm.yaml --engine vllm --model mixtral-8x7b --cluster dgx-h100:1 --json plan.json");
  imp->add_option("file", i->file, "the engine config (YAML)")->required();
  imp->add_option("--engine", i->engine, "vllm, sglang or trtllm")->required();
  imp->add_option("--model,-m", i->model, "model preset, model JSON or Hugging Face config.json")->capture_default_str();
  imp->add_option("--cluster,-c", i->cluster, "cluster shorthand or cluster JSON")->capture_default_str();
  imp->add_option("--json", i->json_out, "also write the plan as JSON to this file");
  imp->callback([i] { run_import(*i); });
}

}  // namespace shardsim::cli
