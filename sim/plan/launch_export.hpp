// sim/plan/launch_export.hpp — a plan as the engine's own launch files, and those files read back.
//
// Owns: export_launch() and import_launch(). For vLLM, SGLang and TensorRT-LLM, a plan becomes
// what a user runs (docs/export.md gives, per engine version, the flag each plan field maps to and
// where the engine defines it):
//   vllm    vllm.yaml — `vllm serve MODEL --config vllm.yaml`, the YAML's keys the CLI's long options
//   sglang  sglang.yaml — `python -m sglang.launch_server --model-path MODEL --config sglang.yaml`, the
//           YAML's keys the CLI's long options
//   trtllm  trtllm.yaml — `trtllm-serve MODEL --extra_llm_api_options trtllm.yaml`, LLM API keys
// plus launch.sh (one server per replica: its node(s), GPUs and port; a disaggregated plan's two
// pools with the engine's prefill/decode roles, TensorRT-LLM's behind trtllm-disagg.yaml, its
// `trtllm-serve disaggregated` front), with `dynamo` dynamo.sh and dynamo-deploy.yaml (the replicas
// as NVIDIA Dynamo workers behind its frontend: processes, and a DynamoGraphDeployment), bench.sh (the engine's own benchmark client at
// the simulated load) and NOTES.md: what the plan sets that the engine has no flag for
// (per-operator sharding other than Megatron's, the rank mapping, expert-TP beside EP, the host
// costs the simulator charges), so the engine runs its own choice there.
// import_launch() reads one config file export_launch wrote (or a user's, in the same subset:
// YAML mappings of scalars; flow mappings kept as text) back into a plan: the round trip gives
// the plan whose fields the engine can express.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "sim/plan/plan.hpp"

namespace shardsim {

struct ModelSpec;
class Cluster;

enum class LaunchEngine { Vllm, Sglang, Trtllm };
const char* to_string(LaunchEngine e);
// "vllm" | "sglang" | "trtllm"; throws InputError(source, field, …) otherwise.
LaunchEngine parse_launch_engine(const std::string& s, const std::string& source, const std::string& field);

// The load the benchmark script offers (what `simulate` was given).
struct LaunchLoad {
  long requests = 1000;
  double rate = 0;        // Poisson req/s; 0 with clients = 0: every request at once (offline)
  int clients = 0;        // closed loop of this many clients
  int prompt_tokens = 1024, output_tokens = 256;  // the trace's means (the clients' random datasets draw fixed lengths)
};

struct LaunchFile {
  std::string name;  // "vllm.yaml", "launch.sh", …
  std::string text;
  bool executable = false;
};

struct LaunchExport {
  std::vector<LaunchFile> files;
  std::vector<std::string> not_expressed;  // plan fields the engine has no flag for, each with what it does instead
};

// `model_path`: the Hugging Face id or local path the engine loads (the model presets know theirs:
// hf_model_id). The plan must pass check_plan on the cluster (the caller checks).
LaunchExport export_launch(const Plan& plan, const ModelSpec& model, const Cluster& cluster, LaunchEngine engine,
                           const std::string& model_path, const LaunchLoad& load, bool dynamo = false);

// A config file of `engine` (text as read from `source`) as a plan on `cluster` (dp: the GPUs left
// by one replica, as the compact string resolves it). Keys it does not know are listed in `ignored`
// (the engine's own settings with no plan field); a known key with a bad value throws
// InputError(source, key, reason).
Plan import_launch(LaunchEngine engine, const std::string& text, const std::string& source, const ModelSpec& model,
                   const Cluster& cluster, std::vector<std::string>* ignored = nullptr);

// The Hugging Face id of a model preset ("mixtral-8x7b" → "mistralai/Mixtral-8x7B-v0.1"); empty when unknown.
std::string hf_model_id(const std::string& preset);

}  // namespace shardsim
