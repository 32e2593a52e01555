// sim/plan/launch_export.cpp — plans to vLLM / SGLang / TensorRT-LLM launch files and back (see launch_export.hpp).
#include "sim/plan/launch_export.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/input_error.hpp"
#include "common/text_number.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

namespace shardsim {

namespace {

// One setting of an engine config: a key (dots nest: "kv_cache_config.dtype") and its YAML value
// text (numbers and booleans bare, strings as the engine spells them, flow mappings as text).
struct Setting {
  std::string key, value;
};

std::string launch_num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.10g", v);
  return b;
}
std::string flag(bool v) { return v ? "true" : "false"; }

// Whether the model's checkpoint already is in `d` (DeepSeek-V3 ships FP8: no quantization flag).
bool native(const ModelSpec& m, Dtype d) { return to_string(d) == m.weight_dtype; }

// The pool's role in a disaggregated plan ("" when colocated).
std::vector<Setting> settings_of(const Plan& p, const ModelSpec& m, LaunchEngine e, const std::string& role,
                                 std::vector<std::string>& lost) {
  const Degrees& d = p.deg;
  const EngineSettings& s = p.engine;
  std::vector<Setting> out;
  auto add = [&](const std::string& k, const std::string& v) { out.push_back({k, v}); };
  auto lose = [&](const std::string& what) {
    if (std::find(lost.begin(), lost.end(), what) == lost.end()) lost.push_back(what);
  };
  const bool fp8_weights = p.dtypes.weights == Dtype::FP8 && !native(m, Dtype::FP8);
  const bool fp8_kv = p.dtypes.kv == Dtype::FP8;
  if (p.dtypes.weights == Dtype::FP4 && !native(m, Dtype::FP4))
    lose("weights=fp4: the engines load NVFP4 from a quantised checkpoint (e.g. nvidia/…-FP4), not by a flag");
  const Plan megatron;
  for (int i = 0; i < kNumOps; ++i)
    if (p.sharding[static_cast<std::size_t>(i)] != megatron.sharding[static_cast<std::size_t>(i)] &&
        (m.is_moe() || (i != static_cast<int>(Op::Router) && i != static_cast<int>(Op::ExpertUp) &&
                        i != static_cast<int>(Op::ExpertDown) && i != static_cast<int>(Op::SharedExpert))))
      lose(std::string(to_string(static_cast<Op>(i))) + "=" + to_string(p.sharding[static_cast<std::size_t>(i)]) +
           ": per-operator sharding is the engine's own (Megatron's column/row)");
  if (p.mapping != megatron.mapping) lose("mapping: the engine orders its ranks itself (TP fastest, then DP/EP, then PP)");
  if (d.sp > 1) lose("sp: sequence parallelism has no serving flag here (vLLM's is a compilation pass, off by default)");
  lose("host costs (step_overhead_ms, seq_overhead_us, launch_overhead_us): the simulator's estimates of the engine, not settings");
  if (s.max_output > 0) lose("max_output: a client's max_tokens, not a server setting");

  // vLLM and TensorRT-LLM run one scheduler per attention-DP rank with the whole limits each (vLLM:
  // a core engine per DP rank; TensorRT-LLM: an executor per rank): a plan's max_seqs and
  // max_batch_tokens that are the engine's (the presets') give each rank its share; a plan's that
  // are each rank's (limits=rank) are written as they are. SGLang divides the engine's itself.
  const int ranks = std::max(1, d.attn_dp);
  auto per_rank = [&](int value, const char* key) {  // the plan's limit as one rank's
    if (s.rank_limits) return value;
    if (ranks > 1 && value % ranks != 0)
      lose(std::string(key) + "=" + launch_num(value) + " is not a multiple of attn_dp=" + launch_num(ranks) +
           ": each rank gets it rounded up");
    return (value + ranks - 1) / ranks;
  };
  if (ranks > 1 && e != LaunchEngine::Sglang && !s.rank_limits)
    lose("max_seqs / max_batch_tokens: written per attention-DP rank (the plan's ÷ " + launch_num(ranks) +
         "), as the engine applies them; the simulation shares one token budget across the ranks (limits=rank gives each its own)");
  if (ranks > 1 && e == LaunchEngine::Sglang && s.rank_limits)
    lose("limits=rank: SGLang divides its limits by the DP size, so the plan's per-rank max_seqs / max_batch_tokens are written for the engine (× " +
         launch_num(ranks) + ")");
  if (e == LaunchEngine::Vllm) {
    add("tensor-parallel-size", launch_num(d.tp));
    if (d.pp > 1) add("pipeline-parallel-size", launch_num(d.pp));
    if (d.attn_dp > 1) add("data-parallel-size", launch_num(d.attn_dp));
    if (m.is_moe() && d.ep > 1) {
      add("enable-expert-parallel", "true");  // EP = TP × DP inside one server
      if (d.etp > 1) lose("etp=" + launch_num(d.etp) + " beside ep=" + launch_num(d.ep) + ": vLLM's expert parallelism spans TP × DP (etp 1)");
      if (s.a2a == A2aKernel::PerNode) add("all2all-backend", "deepep_high_throughput");
      if (s.a2a == A2aKernel::Auto)
        lose("a2a=auto: vLLM runs one all-to-all backend for prefill and decode (deepep_high_throughput or deepep_low_latency)");
    }
    const int rank_tokens = per_rank(s.max_batch_tokens, "max_batch_tokens");
    add("max-num-seqs", launch_num(per_rank(s.max_seqs, "max_seqs")));
    add("max-num-batched-tokens", launch_num(rank_tokens));
    add("max-model-len", launch_num(s.max_context));
    // (vLLM's --config drops a `false`: a switch is turned off by its no- form)
    if (s.prefill_chunk > 0) add("enable-chunked-prefill", "true");
    else add("no-enable-chunked-prefill", "true");
    if (s.prefill_chunk > 0 && s.prefill_chunk < rank_tokens)
      add("long-prefill-token-threshold", launch_num(s.prefill_chunk));
    if (s.prefill_chunk > rank_tokens)  // (one rank: plan_check refuses it)
      lose("prefill_chunk=" + launch_num(s.prefill_chunk) + " exceeds max-num-batched-tokens=" + launch_num(rank_tokens) +
           " per DP rank: vLLM chunks a prompt within its rank's token budget");
    if (s.kv_budget == KvBudget::TotalFraction) add("gpu-memory-utilization", launch_num(s.kv_fraction));
    else lose("kv_budget=free-fraction: vLLM budgets a fraction of the whole GPU (gpu-memory-utilization)");
    add("kv-cache-dtype", fp8_kv ? "fp8" : "auto");
    if (fp8_weights) add("quantization", "fp8");
    add("block-size", launch_num(s.kv_block));
    add(s.prefix_cache ? "enable-prefix-caching" : "no-enable-prefix-caching", "true");
    if (!s.cuda_graphs) add("enforce-eager", "true");
    if (s.allreduce == AllReduceKernels::Nccl) add("disable-custom-all-reduce", "true");
    if (p.redundant_experts > 0) {
      add("enable-eplb", "true");
      add("eplb-config", "{\"num_redundant_experts\": " + launch_num(p.redundant_experts) + "}");
    }
    if (s.spec_tokens > 0)
      add("speculative-config", "{\"method\": \"mtp\", \"num_speculative_tokens\": " + launch_num(s.spec_tokens) + "}");
    if (s.weight_offload > 0) add("cpu-offload-gb", launch_num(s.weight_offload / 1e9));
    if (s.two_batch_overlap) add("enable-dbo", "true");
    // (explicit both ways: vLLM 0.11 schedules in series by default, later versions asynchronously)
    add(s.overlap_schedule ? "async-scheduling" : "no-async-scheduling", "true");
    if (!role.empty()) add("kv-transfer-config", "{\"kv_connector\": \"NixlConnector\", \"kv_role\": \"kv_both\"}");
    if (s.policy == KvPolicy::Reserve) lose("policy=reserve: vLLM allocates KV blocks on demand and preempts (recompute)");
  } else if (e == LaunchEngine::Sglang) {
    add("tp-size", launch_num(d.tp * d.attn_dp));  // SGLang's TP size counts the attention-DP ranks
    if (d.attn_dp > 1) {
      add("dp-size", launch_num(d.attn_dp));
      add("enable-dp-attention", "true");
    }
    if (d.pp > 1) add("pp-size", launch_num(d.pp));
    if (m.is_moe() && d.ep > 1) {
      add("ep-size", launch_num(d.ep));
      if (d.etp > 1) lose("etp=" + launch_num(d.etp) + " beside ep=" + launch_num(d.ep) + ": SGLang's expert parallelism spans its TP size (etp 1)");
      if (s.a2a != A2aKernel::PerRank) {  // (DeepEP sets ep-size to tp-size)
        add("moe-a2a-backend", "deepep");
        add("deepep-mode", s.a2a == A2aKernel::PerNode ? "normal" : "auto");
      }
    }
    add("max-running-requests", launch_num(engine_seqs(s, ranks)));
    add("max-prefill-tokens", launch_num(engine_tokens(s, ranks)));
    add("chunked-prefill-size", launch_num(s.prefill_chunk > 0 ? s.prefill_chunk : -1));
    add("context-length", launch_num(s.max_context));
    if (s.kv_budget == KvBudget::TotalFraction) add("mem-fraction-static", launch_num(s.kv_fraction));
    else lose("kv_budget=free-fraction: SGLang budgets a fraction of the whole GPU (mem-fraction-static)");
    add("kv-cache-dtype", fp8_kv ? "fp8_e4m3" : "auto");
    if (fp8_weights) add("quantization", "fp8");
    add("page-size", launch_num(s.kv_block));
    if (!s.prefix_cache) add("disable-radix-cache", "true");
    if (!s.cuda_graphs) add("disable-cuda-graph", "true");
    if (s.allreduce == AllReduceKernels::Nccl) add("disable-custom-all-reduce", "true");
    if (s.two_batch_overlap) add("enable-two-batch-overlap", "true");
    if (!s.overlap_schedule) add("disable-overlap-schedule", "true");
    if (p.redundant_experts > 0) {
      add("enable-eplb", "true");
      add("ep-num-redundant-experts", launch_num(p.redundant_experts));
    }
    if (s.spec_tokens > 0) {
      add("speculative-algorithm", (m.attention == AttentionKind::MLA) ? "NEXTN" : "EAGLE");
      add("speculative-num-steps", launch_num(s.spec_tokens));
      add("speculative-eagle-topk", "1");
      add("speculative-num-draft-tokens", launch_num(s.spec_tokens + 1));
    }
    if (s.weight_offload > 0) add("cpu-offload-gb", launch_num(s.weight_offload / 1e9));
    if (s.kv_host > 0) {
      add("enable-hierarchical-cache", "true");
      add("hicache-size", launch_num(s.kv_host / 1e9));
    }
    if (!role.empty()) add("disaggregation-mode", role);
    if (s.policy == KvPolicy::Reserve) lose("policy=reserve: SGLang admits by its new_token_ratio estimate and retracts when out of KV");
  } else {
    add("tensor_parallel_size", launch_num(d.tp * d.attn_dp));  // with attention DP, every rank of the unit
    if (d.pp > 1) add("pipeline_parallel_size", launch_num(d.pp));
    if (m.is_moe()) {
      add("moe_expert_parallel_size", launch_num(d.ep));
      add("moe_tensor_parallel_size", launch_num(d.etp));
    }
    if (d.attn_dp > 1) {
      add("enable_attention_dp", "true");
      if (d.tp > 1) lose("tp=" + launch_num(d.tp) + " with attn_dp=" + launch_num(d.attn_dp) + ": TensorRT-LLM's attention DP makes every rank its own attention group (tp 1)");
    }
    const int rank_seqs = per_rank(s.max_seqs, "max_seqs");
    add("max_batch_size", launch_num(rank_seqs));
    const int rank_tokens = per_rank(s.max_batch_tokens, "max_batch_tokens");
    add("max_num_tokens", launch_num(rank_tokens));
    add("max_seq_len", launch_num(s.max_context));
    add("enable_chunked_prefill", flag(s.prefill_chunk > 0));
    if (s.prefill_chunk > 0 && s.prefill_chunk != rank_tokens)  // its rank's max_num_tokens, not the engine's
      lose("prefill_chunk=" + launch_num(s.prefill_chunk) + ": TensorRT-LLM chunks a prompt by max_num_tokens (" +
           launch_num(rank_tokens) + (d.attn_dp > 1 ? " per attention-DP rank)" : ")"));
    if (s.kv_budget == KvBudget::FreeFraction) add("kv_cache_config.free_gpu_memory_fraction", launch_num(s.kv_fraction));
    else lose("kv_budget=total-fraction: TensorRT-LLM budgets a fraction of the memory left free (free_gpu_memory_fraction)");
    add("kv_cache_config.dtype", fp8_kv ? "fp8" : "auto");
    add("kv_cache_config.enable_block_reuse", flag(s.prefix_cache));
    add("kv_cache_config.tokens_per_block", launch_num(s.kv_block));
    add("scheduler_config.capacity_scheduler_policy", s.policy == KvPolicy::Reserve ? "GUARANTEED_NO_EVICT" : "MAX_UTILIZATION");
    if (s.cuda_graphs) add("cuda_graph_config.max_batch_size", launch_num(rank_seqs));
    else add("cuda_graph_config", "null");
    if (s.allreduce == AllReduceKernels::Nccl) add("allreduce_strategy", "NCCL");
    if (!s.overlap_schedule) add("disable_overlap_scheduler", "true");  // (trtllm-serve's PyTorch flow overlaps by default)
    if (p.redundant_experts > 0) add("moe_config.load_balancer.num_slots", launch_num(m.experts + p.redundant_experts));
    if (s.spec_tokens > 0) {
      add("speculative_config.decoding_type", "MTP");
      add("speculative_config.max_draft_len", launch_num(s.spec_tokens));
    }
    if (fp8_weights) lose("weights=fp8: TensorRT-LLM takes FP8 from a quantised checkpoint (ModelOpt), not a flag");
    if (s.two_batch_overlap) lose("two_batch_overlap: no TensorRT-LLM serving flag");
    if (!role.empty()) add("cache_transceiver_config.backend", "DEFAULT");
  }
  return out;
}

// YAML of settings whose dotted keys nest (keys of one parent kept together in first-seen order).
std::string to_yaml(const std::vector<Setting>& settings, const std::string& header) {
  std::string out = header;
  std::vector<std::string> open;  // the current parent path
  for (const Setting& s : settings) {
    std::vector<std::string> parts;
    std::stringstream ss(s.key);
    for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
    std::size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) ++common;
    open.resize(common);
    for (std::size_t i = common; i + 1 < parts.size(); ++i) {
      out += std::string(2 * i, ' ') + parts[i] + ":\n";
      open.push_back(parts[i]);
    }
    out += std::string(2 * (parts.size() - 1), ' ') + parts.back() + ": " + s.value + "\n";
  }
  return out;
}

// A value as one shell word: bare when it is plain, else in single quotes.
std::string shell_word(const std::string& v) {
  if (!v.empty() && v.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-/:=,+") == std::string::npos)
    return v;
  std::string out = "'";
  for (char c : v) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The settings as the engine's command-line arguments (vLLM's and SGLang's YAML keys are their long
// options; a `true` is a switch): what a Dynamo worker takes in place of the config file.
std::vector<std::string> cli_args(const std::vector<Setting>& settings) {
  std::vector<std::string> out;
  for (const Setting& s : settings) {
    out.push_back("--" + s.key);
    if (s.value != "true") out.push_back(s.value);
  }
  return out;
}

// The settings as one JSON object, dotted keys nested (TensorRT-LLM's LLM API options as Dynamo's
// --override-engine-args takes them): numbers and booleans typed, `null` null, flow mappings parsed.
nlohmann::json settings_json(const std::vector<Setting>& settings) {
  nlohmann::json out = nlohmann::json::object();
  for (const Setting& s : settings) {
    nlohmann::json* at = &out;
    std::stringstream ss(s.key);
    std::vector<std::string> parts;
    for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) at = &(*at)[parts[i]];
    nlohmann::json v;
    if (s.value == "true" || s.value == "false") v = s.value == "true";
    else if (s.value == "null") v = nullptr;
    else if (!s.value.empty() && s.value.front() == '{') v = nlohmann::json::parse(s.value);
    else if (decimal_text(s.value) && s.value.find_first_not_of("0123456789+-.eE") == std::string::npos) {
      const double d = std::stod(s.value);
      v = std::floor(d) == d && std::fabs(d) < 1e15 ? nlohmann::json(static_cast<long long>(d)) : nlohmann::json(d);
    } else {
      v = s.value;
    }
    (*at)[parts.back()] = v;
  }
  return out;
}

// One pool of an export: its plan, role ("" when colocated, "prefill", "decode"), config file and settings.
struct ExportPool {
  Plan plan;
  std::string role, file;
  std::vector<Setting> settings;
};

// Where one replica runs: its pool and index in it, first GPU, first node and node count, GPUs (in
// all, and per node), port, and the node-local GPU list (CUDA_VISIBLE_DEVICES). launch.sh and
// dynamo.sh describe and start it alike.
struct ReplicaPlace {
  std::size_t pool;
  int index, first, node, nodes, gpus, per_node, port;
  std::string local;
  // "\n# prefill replica 0: GPUs 0-15 (node 0-1)\n"
  std::string comment(const std::string& role) const {
    return "\n# " + (role.empty() ? std::string("replica ") : role + " replica ") + std::to_string(index) + ": GPUs " + std::to_string(first) +
           "-" + std::to_string(first + gpus - 1) + " (node " + std::to_string(node) +
           (nodes > 1 ? "-" + std::to_string(node + nodes - 1) : "") + ")\n";
  }
  // SGLang's flags for its part on the replica's n-th node.
  std::string sglang_node(int n) const {
    return " --nnodes " + std::to_string(nodes) + " --node-rank " + std::to_string(n) + " --dist-init-addr ${NODE_" +
           std::to_string(node) + ":-localhost}:5000";
  }
};

// What vLLM needs said of a replica over several nodes (its multi-node launch is not one command).
std::string vllm_multinode_note(int nodes) {
  return "# spans " + std::to_string(nodes) + " nodes: start it with vLLM's multi-node launch (Ray, or --data-parallel-address / --headless on the others)\n";
}

// NVIDIA Dynamo in front of the plan (docs/export.md, "Dynamo"): dynamo.sh runs dynamo.frontend (the
// OpenAI endpoint on :8000, routing round-robin or by KV overlap as the plan dispatches) and one
// dynamo.<engine> worker per replica on the GPUs the plan gives it; dynamo-deploy.yaml is the same
// graph as a Kubernetes DynamoGraphDeployment. vLLM and SGLang workers take the pool's settings as
// their command-line arguments (the config's keys are their long options); TensorRT-LLM workers take
// the config file (--extra-engine-args), or in the deployment the same settings as JSON
// (--override-engine-args). Disaggregated pools become prefill and decode workers (NIXL transfers).
void add_dynamo_files(LaunchExport& out, const std::vector<ExportPool>& pools, const std::vector<ReplicaPlace>& places,
                      const Plan& plan, LaunchEngine engine, const std::string& origin, const std::string& model_path) {
  const std::string eng = to_string(engine), module = "dynamo." + eng;
  const std::string router = plan.engine.dispatch == Dispatch::PrefixAffinity ? "kv" : "round-robin";
  // A worker's arguments after `python -m dynamo.<engine>`; `model` is "$MODEL" in the script.
  auto worker_args = [&](const ExportPool& pool, const std::string& model, bool deploy) {
    std::vector<std::string> a = engine == LaunchEngine::Vllm ? std::vector<std::string>{"--model", model}
                                                              : std::vector<std::string>{"--model-path", model, "--served-model-name", model};
    if (engine == LaunchEngine::Trtllm) {
      a.push_back(deploy ? "--override-engine-args" : "--extra-engine-args");
      a.push_back(deploy ? settings_json(pool.settings).dump() : pool.file);
    } else {
      for (const std::string& x : cli_args(pool.settings)) a.push_back(x);
    }
    if (!pool.role.empty() && engine != LaunchEngine::Sglang) {  // (SGLang's settings carry its disaggregation-mode)
      a.push_back("--disaggregation-mode");
      a.push_back(pool.role);
    }
    if (!pool.role.empty() && engine == LaunchEngine::Sglang) {
      a.push_back("--disaggregation-transfer-backend");
      a.push_back("nixl");
    }
    return a;
  };

  std::string sh = "#!/usr/bin/env bash\n" + origin +
                   "# The plan behind NVIDIA Dynamo (docs/export.md): dynamo.frontend serves the OpenAI API on :8000 and routes\n"
                   "# " + (router == "kv" ? std::string("by KV-cache overlap (the plan dispatches by prefix affinity)") : std::string("round-robin")) +
                   "; one " + module + " worker per replica, on the GPUs shardsim placed it. Run each\n"
                   "# worker line on its node; the workers find the frontend through Dynamo's discovery (etcd and NATS across\n"
                   "# nodes, as your Dynamo version's docs say).\n"
                   "set -euo pipefail\nMODEL=${MODEL:-" + model_path + "}\n\npython -m dynamo.frontend --http-port 8000 --router-mode " + router + " &\n";
  int system_port = 8081, side_port = 20096, bootstrap_port = 12345;
  for (const ReplicaPlace& pl : places) {
    const ExportPool& pool = pools[pl.pool];
    sh += pl.comment(pool.role);
    std::string env = "CUDA_VISIBLE_DEVICES=" + pl.local + " DYN_SYSTEM_PORT=" + std::to_string(system_port++) + " ";
    if (engine == LaunchEngine::Vllm && !pool.role.empty()) env += "VLLM_NIXL_SIDE_CHANNEL_PORT=" + std::to_string(side_port++) + " ";
    std::string args;
    for (const std::string& w : worker_args(pool, "$MODEL", false)) {
      args += ' ';
      args += w == "$MODEL" ? std::string("\"$MODEL\"") : shell_word(w);
    }
    if (engine == LaunchEngine::Sglang && pool.role == "prefill") {
      args += " --disaggregation-bootstrap-port ";
      args += std::to_string(bootstrap_port++);
    }
    if (engine == LaunchEngine::Sglang && pl.nodes > 1) {
      for (int n = 0; n < pl.nodes; ++n)
        sh += "# node " + std::to_string(pl.node + n) + "\n" + env + "python -m " + module + args + pl.sglang_node(n) + " &\n";
      continue;
    }
    if (engine == LaunchEngine::Trtllm && pl.nodes > 1) {  // (as launch.sh starts a multi-node TensorRT-LLM server)
      sh += "mpirun -n " + std::to_string(pl.gpus) + " trtllm-llmapi-launch python -m " + module + args + " &\n";
      continue;
    }
    if (pl.nodes > 1) sh += vllm_multinode_note(pl.nodes);
    sh += env + "python -m " + module + args + " &\n";
  }
  sh += "wait\n";
  out.files.push_back({"dynamo.sh", sh, true});

  // The deployment: a frontend service and one worker service per pool (its replicas, GPUs per node, nodes).
  const std::string image = std::string("nvcr.io/nvidia/ai-dynamo/") + (engine == LaunchEngine::Trtllm ? "tensorrtllm" : eng) +
                            "-runtime:${DYNAMO_VERSION}";
  auto q = [](const std::string& v) { return nlohmann::json(v).dump(); };
  std::string y = origin + "# kubectl apply -f dynamo-deploy.yaml (Dynamo's Kubernetes operator; set DYNAMO_VERSION, e.g. with envsubst,\n"
                           "# and give the pods your Hugging Face token secret as Dynamo's examples do)\n"
                           "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata:\n  name: shardsim-" + eng +
                  "\nspec:\n  services:\n    Frontend:\n      componentType: frontend\n      replicas: 1\n      extraPodSpec:\n"
                  "        mainContainer:\n          image: " + q(image) + "\n          command: [\"python3\", \"-m\", \"dynamo.frontend\"]\n"
                  "          args: [\"--router-mode\", " + q(router) + "]\n";
  for (std::size_t k = 0; k < pools.size(); ++k) {
    const ExportPool& pool = pools[k];
    int replicas = 0, per_node = 0, nodes = 1;
    for (const ReplicaPlace& pl : places)
      if (pl.pool == k) {
        ++replicas;
        per_node = pl.per_node;
        nodes = pl.nodes;
      }
    const std::string name = std::string(engine == LaunchEngine::Trtllm ? "Trtllm" : engine == LaunchEngine::Vllm ? "Vllm" : "Sglang") +
                             (pool.role == "prefill" ? "Prefill" : pool.role == "decode" ? "Decode" : "") + "Worker";
    y += "    " + name + ":\n      componentType: worker\n";
    if (!pool.role.empty()) y += "      subComponentType: " + pool.role + "\n";
    y += "      replicas: " + std::to_string(replicas) + "\n";
    if (nodes > 1) y += "      multinode:\n        nodeCount: " + std::to_string(nodes) + "\n";
    y += "      resources:\n        limits:\n          gpu: \"" + std::to_string(per_node) + "\"\n      extraPodSpec:\n        mainContainer:\n"
         "          image: " + q(image) + "\n          command: [\"python3\", \"-m\", " + q(module) + "]\n          args:\n";
    for (const std::string& w : worker_args(pool, model_path, true)) y += "            - " + q(w) + "\n";
  }
  out.files.push_back({"dynamo-deploy.yaml", y, false});
}

// The YAML subset to_yaml writes (mappings nested by two-space indents, scalars, flow mappings as
// text, '#' comments) as dotted keys. Throws InputError(source, line, reason).
std::vector<Setting> from_yaml(const std::string& text, const std::string& source) {
  std::vector<Setting> out;
  std::vector<std::pair<std::size_t, std::string>> parents;  // (indent, key)
  std::stringstream ss(text);
  int line_no = 0;
  for (std::string line; std::getline(ss, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos || line[indent] == '#') continue;
    const std::string where = "line " + std::to_string(line_no);
    if (line.find('\t') != std::string::npos) throw InputError(source, where, "tabs: indent with spaces");
    const std::size_t colon = line.find(':', indent);
    if (colon == std::string::npos) throw InputError(source, where, "expected \"key: value\"");
    const std::string key = line.substr(indent, colon - indent);
    if (key.empty() || key.find_first_of(" {}[]\"'") != std::string::npos) throw InputError(source, where, "expected a plain key");
    std::string value = line.substr(colon + 1);
    if (const std::size_t hash = value.find(" #"); hash != std::string::npos && value.find_first_of("{\"'") > hash) value.resize(hash);
    value.erase(0, value.find_first_not_of(' '));
    value.erase(value.find_last_not_of(' ') + 1);
    while (!parents.empty() && parents.back().first >= indent) parents.pop_back();
    std::string path;
    for (const auto& [i, k] : parents) path += k + ".";
    if (value.empty()) {
      parents.emplace_back(indent, key);
      continue;
    }
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front())
      value = value.substr(1, value.size() - 2);
    out.push_back({path + key, value});
  }
  return out;
}

}  // namespace

const char* to_string(LaunchEngine e) {
  switch (e) {
    case LaunchEngine::Vllm: return "vllm";
    case LaunchEngine::Sglang: return "sglang";
    case LaunchEngine::Trtllm: return "trtllm";
  }
  return "?";
}

LaunchEngine parse_launch_engine(const std::string& s, const std::string& source, const std::string& field) {
  if (s == "vllm") return LaunchEngine::Vllm;
  if (s == "sglang") return LaunchEngine::Sglang;
  if (s == "trtllm") return LaunchEngine::Trtllm;
  throw InputError(source, field, "unknown engine \"" + s + "\" (expected vllm, sglang or trtllm)");
}

std::string hf_model_id(const std::string& preset) {
  static const std::map<std::string, std::string> ids = {
      {"dbrx", "databricks/dbrx-instruct"},
      {"deepseek-v3", "deepseek-ai/DeepSeek-V3"},
      {"gpt-oss-120b", "openai/gpt-oss-120b"},
      {"kimi-k2", "moonshotai/Kimi-K2-Instruct"},
      {"llama2-70b", "meta-llama/Llama-2-70b-chat-hf"},
      {"llama3-70b", "meta-llama/Meta-Llama-3-70B-Instruct"},
      {"llama3.1-405b", "meta-llama/Llama-3.1-405B-Instruct"},
      {"llama4-maverick", "meta-llama/Llama-4-Maverick-17B-128E-Instruct"},
      {"mixtral-8x22b", "mistralai/Mixtral-8x22B-Instruct-v0.1"},
      {"mixtral-8x7b", "mistralai/Mixtral-8x7B-Instruct-v0.1"},
      {"qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B"},
      {"qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"},
  };
  auto it = ids.find(preset);
  return it == ids.end() ? "" : it->second;
}

LaunchExport export_launch(const Plan& plan, const ModelSpec& model, const Cluster& cluster, LaunchEngine engine,
                           const std::string& model_path, const LaunchLoad& load, bool dynamo) {
  LaunchExport out;
  const std::string eng = to_string(engine);
  const bool disagg = plan.disaggregated();
  std::vector<ExportPool> pools;
  const std::string ext = ".yaml";
  if (disagg) {
    pools.push_back({plan.prefill(), "prefill", eng + "-prefill" + ext, {}});
    pools.push_back({plan.decode(), "decode", eng + "-decode" + ext, {}});
  } else {
    pools.push_back({plan, "", eng + ext, {}});
  }
  const std::string origin = "# shardsim export: " + model.name + " on " + cluster.name() + ", plan " +
                             plan_to_string(plan, model) + "\n";
  std::string launch = "#!/usr/bin/env bash\n" + origin +
                       "# One server per replica, on the GPUs shardsim placed it (docs/export.md). Run each line on its node;\n"
                       "# NODE_<n> is node n's address (default localhost).\n"
                       "set -euo pipefail\nMODEL=${MODEL:-" + model_path + "}\n";
  int port = 30000;
  std::vector<std::string> urls[2];
  std::vector<ReplicaPlace> places;
  for (std::size_t k = 0; k < pools.size(); ++k) {
    ExportPool& pool = pools[k];
    pool.settings = settings_of(pool.plan, model, engine, pool.role, out.not_expressed);
    const std::vector<Setting>& set = pool.settings;
    std::string header = origin + (pool.role.empty() ? "" : "# the " + pool.role + " pool\n");
    if (engine == LaunchEngine::Vllm) header += "# vllm serve \"$MODEL\" --config " + pool.file + "\n";
    if (engine == LaunchEngine::Sglang) header += "# python -m sglang.launch_server --model-path \"$MODEL\" --config " + pool.file + "\n";
    if (engine == LaunchEngine::Trtllm) header += "# trtllm-serve \"$MODEL\" --extra_llm_api_options " + pool.file + "\n";
    out.files.push_back({pool.file, to_yaml(set, header), false});
    const Degrees& d = pool.plan.deg;
    const int replica_gpus = d.gpus() / d.dp, gpn = cluster.gpus_per_node();
    for (int r = 0; r < d.dp; ++r, ++port) {
      const int first = pool.plan.first_gpu + r * replica_gpus;
      const int node = first / gpn, nodes = (replica_gpus + gpn - 1) / gpn;
      std::string gpus;
      for (int g = first; g < first + std::min(replica_gpus, gpn); ++g) gpus += (g == first ? "" : ",") + std::to_string(g % gpn);
      places.push_back({k, r, first, node, nodes, replica_gpus, std::min(replica_gpus, gpn), port, gpus});
      launch += places.back().comment(pool.role);
      std::string env = "CUDA_VISIBLE_DEVICES=" + gpus + " ";
      if (engine == LaunchEngine::Vllm) {
        launch += env + "vllm serve \"$MODEL\" --config " + pool.file + " --port " + std::to_string(port) + " &\n";
        if (nodes > 1) launch += vllm_multinode_note(nodes);
      } else if (engine == LaunchEngine::Sglang) {
        for (int n = 0; n < nodes; ++n)
          launch += (nodes > 1 ? "# node " + std::to_string(node + n) + "\n" : "") + env +
                    "python -m sglang.launch_server --model-path \"$MODEL\" --config " + pool.file + " --port " + std::to_string(port) +
                    (nodes > 1 ? places.back().sglang_node(n) : std::string()) +
                    " &\n";
      } else {
        launch += (nodes > 1 ? "mpirun -n " + std::to_string(replica_gpus) + " trtllm-llmapi-launch " : env) + "trtllm-serve \"$MODEL\" --extra_llm_api_options " +
                  pool.file + " --port " + std::to_string(port) + " &\n";
      }
      urls[k].push_back("http://${NODE_" + std::to_string(node) + ":-localhost}:" + std::to_string(port));
    }
  }
  // The front: one address for the clients.
  std::string front = urls[0].front();
  if (engine == LaunchEngine::Sglang && (disagg || urls[0].size() > 1)) {
    launch += "\n# the router in front (sglang-router)\npython -m sglang_router.launch_router --port 8000";
    if (disagg) {
      launch += " --pd-disaggregation";
      for (const auto& u : urls[0]) launch += " --prefill " + u;
      for (const auto& u : urls[1]) launch += " --decode " + u;
    } else {
      launch += " --worker-urls";
      for (const auto& u : urls[0]) launch += " " + u;
      launch += std::string(" --policy ") + (plan.engine.dispatch == Dispatch::PrefixAffinity ? "cache_aware" : "round_robin");
    }
    launch += " &\n";
    front = "http://localhost:8000";
  } else if (engine == LaunchEngine::Trtllm && disagg) {
    // TensorRT-LLM's own front for a disaggregated plan: trtllm-serve disaggregated pairs a context
    // server with a generation server per request (examples/disaggregated/disagg_config.yaml).
    std::string cfg = origin + "# trtllm-serve disaggregated -c trtllm-disagg.yaml: the front that pairs the context (prefill) and\n"
                               "# generation (decode) servers; nodeN stands for node N's address (node 0: localhost)\n"
                               "hostname: localhost\nport: 8000\nbackend: pytorch\n";
    for (std::size_t k = 0; k < 2; ++k) {
      cfg += k == 0 ? "context_servers:\n" : "generation_servers:\n";
      cfg += "  num_instances: " + std::to_string(urls[k].size()) + "\n  urls:\n";
      for (const ReplicaPlace& pl : places)
        if (pl.pool == k)
          cfg += "    - \"" + (pl.node == 0 ? std::string("localhost") : "node" + std::to_string(pl.node)) + ":" + std::to_string(pl.port) + "\"\n";
    }
    out.files.push_back({"trtllm-disagg.yaml", cfg, false});
    launch += "\n# the disaggregated front (TensorRT-LLM's own): edit nodeN in trtllm-disagg.yaml to the nodes' addresses\n"
              "trtllm-serve disaggregated -c trtllm-disagg.yaml &\n";
    front = "http://localhost:8000";
  } else if (disagg || urls[0].size() > 1) {
    launch += "\n# put a load balancer over the servers above (round robin";
    launch += disagg ? std::string("; disaggregated: the engine's own proxy, e.g. Dynamo or vLLM's disagg proxy, pairs prefill and decode") : "";
    launch += "): the benchmark below talks to ${FRONT:-" + front + "}\n";
  }
  launch += "wait\n";
  out.files.push_back({"launch.sh", launch, true});
  if (dynamo) {
    add_dynamo_files(out, pools, places, plan, engine, origin, model_path);
    front = "http://localhost:8000";
  }

  // The benchmark client at the simulated load.
  std::string bench = "#!/usr/bin/env bash\n" + origin +
                      "# The engine's own benchmark client at the load shardsim simulated: fixed lengths at the trace's\n"
                      "# means (the simulation replays the trace's own lengths), " +
                      (load.clients > 0 ? std::to_string(load.clients) + " clients"
                                        : load.rate > 0 ? "Poisson at " + launch_num(load.rate) + " req/s" : "every request at once") +
                      ".\nset -euo pipefail\nMODEL=${MODEL:-" + model_path + "}\nFRONT=${FRONT:-" + front + "}\n";
  const std::string lens = " --dataset-name random --random-input-len " + launch_num(load.prompt_tokens) + " --random-output-len " +
                           launch_num(load.output_tokens) + " --num-prompts " + launch_num(static_cast<double>(load.requests));
  std::string pace = load.clients > 0 ? " --max-concurrency " + launch_num(load.clients) : "";
  pace += load.rate > 0 ? " --request-rate " + launch_num(load.rate) : " --request-rate inf";
  // Fixed lengths: a range ratio of 0 in vLLM's and TensorRT-LLM's clients, 1 in SGLang's (which ignores EOS by default).
  // The result file is what `shardsim validate --run` reads back (sim/serving/measured_run.hpp).
  if (engine == LaunchEngine::Vllm)
    bench += "vllm bench serve --backend vllm --model \"$MODEL\" --base-url \"$FRONT\"" + lens + " --random-range-ratio 0 --ignore-eos" + pace +
             " --save-result --result-filename result.json\n";
  else if (engine == LaunchEngine::Sglang)
    bench += "python -m sglang.bench_serving --backend sglang --base-url \"$FRONT\"" + lens + " --random-range-ratio 1" + pace +
             " --output-file result.jsonl\n";
  else
    bench += "python -m tensorrt_llm.serve.scripts.benchmark_serving --backend openai --model \"$MODEL\" --base-url \"$FRONT\"" +
             lens + " --random-ids --random-range-ratio 0 --ignore-eos" + pace + " --save-result --result-filename result.json\n";
  bench += "# then: shardsim validate --run " + std::string(engine == LaunchEngine::Sglang ? "result.jsonl" : "result.json") +
           " --model " + model.name + " --cluster " + cluster.name() + " --plan '" + plan_to_string(plan, model) + "'\n";
  out.files.push_back({"bench.sh", bench, true});

  std::string notes = "# What the plan sets that " + eng + " has no setting for\n\n" + origin.substr(2) + "\n";
  notes += out.not_expressed.empty() ? "Nothing: every plan field has its setting.\n"
                                     : "The engine runs its own choice for these; the simulated figures assume the plan's.\n\n";
  for (const auto& s : out.not_expressed) notes += "- " + s + "\n";
  if (plan.engine.preset != eng && !(plan.engine.preset == "trtllm-mlperf" && engine == LaunchEngine::Trtllm))
    notes += "\nThe plan was simulated with the `" + plan.engine.preset + "` preset's scheduler and limits; simulate it with `engine=" +
             eng + "` to see what " + eng + " itself would do.\n";
  out.files.push_back({"NOTES.md", notes, false});
  return out;
}

Plan import_launch(LaunchEngine engine, const std::string& text, const std::string& source, const ModelSpec& model,
                   const Cluster& cluster, std::vector<std::string>* ignored) {
  const std::vector<Setting> settings = from_yaml(text, source);
  std::map<std::string, std::string> v;
  for (const Setting& s : settings) {
    if (v.count(s.key)) throw InputError(source, s.key, "given twice");
    v[s.key] = s.value;
  }
  std::set<std::string> used;
  auto get = [&](const std::string& k) -> const std::string* {
    auto it = v.find(k);
    if (it == v.end()) return nullptr;
    used.insert(k);
    return &it->second;
  };
  auto integer = [&](const std::string& k, long lo, long hi) -> long {
    const std::string* s = get(k);
    long x = 0;
    std::size_t pos = 0;
    try {
      x = std::stol(*s, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != s->size() || x < lo || x > hi)
      throw InputError(source, k, "expected a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got \"" + *s + "\"");
    return x;
  };
  auto real = [&](const std::string& k, double lo, double hi) {
    const std::string* s = get(k);
    double x = parse_real_in(*s, source, k, lo, hi);
    return x;
  };
  auto boolean = [&](const std::string& k) {
    const std::string* s = get(k);
    if (*s == "true" || *s == "True") return true;
    if (*s == "false" || *s == "False") return false;
    throw InputError(source, k, "expected true or false, got \"" + *s + "\"");
  };
  auto has = [&](const std::string& k) { return v.count(k) > 0; };
  const std::string eng = to_string(engine);
  Plan p = default_plan(model);
  p.name = source;
  p.engine = engine_preset(eng, source, "engine");
  p.engine.max_context = p.engine.max_context;
  std::string degrees;
  auto deg = [&](const char* k, long x) { degrees += std::string(degrees.empty() ? "" : ",") + k + "=" + std::to_string(x); };
  const long big = kMaxClusterGpus;
  long tp = 1, attn_dp = 1;
  if (engine == LaunchEngine::Vllm) {
    tp = has("tensor-parallel-size") ? integer("tensor-parallel-size", 1, big) : 1;
    attn_dp = has("data-parallel-size") ? integer("data-parallel-size", 1, big) : 1;
    deg("tp", tp);
    if (attn_dp > 1) deg("attn_dp", attn_dp);
    if (has("pipeline-parallel-size")) deg("pp", integer("pipeline-parallel-size", 1, big));
    if (model.is_moe()) deg("ep", has("enable-expert-parallel") && boolean("enable-expert-parallel") ? tp * attn_dp : 1);
    // (per DP rank in vLLM: the engine holds attn_dp times them)
    if (has("max-num-seqs")) p.engine.max_seqs = static_cast<int>(attn_dp * integer("max-num-seqs", 1, 1 << 24));
    if (has("max-num-batched-tokens")) p.engine.max_batch_tokens = static_cast<int>(attn_dp * integer("max-num-batched-tokens", 1, 1 << 26));
    if (has("max-model-len")) p.engine.max_context = static_cast<int>(integer("max-model-len", 1, 1 << 26));
    const bool chunked = !(has("no-enable-chunked-prefill") && boolean("no-enable-chunked-prefill")) &&
                         (!has("enable-chunked-prefill") || boolean("enable-chunked-prefill"));
    // Without a threshold a prompt is chunked by its DP rank's token budget, not the engine's.
    p.engine.prefill_chunk = !chunked ? 0 : has("long-prefill-token-threshold") ? static_cast<int>(integer("long-prefill-token-threshold", 1, 1 << 26))
                                                                                : static_cast<int>(p.engine.max_batch_tokens / attn_dp);
    if (has("gpu-memory-utilization")) p.engine.kv_fraction = real("gpu-memory-utilization", 0.01, 1);
    if (has("kv-cache-dtype")) p.dtypes.kv = *get("kv-cache-dtype") == "auto" ? p.dtypes.kv : Dtype::FP8;
    if (has("quantization") && *get("quantization") == "fp8") p.dtypes.weights = p.dtypes.activations = Dtype::FP8;
    if (has("block-size")) p.engine.kv_block = static_cast<int>(integer("block-size", 1, 1 << 20));
    if (has("enable-prefix-caching")) p.engine.prefix_cache = boolean("enable-prefix-caching");
    if (has("no-enable-prefix-caching")) p.engine.prefix_cache = !boolean("no-enable-prefix-caching");
    if (has("all2all-backend")) {
      const std::string& b = *get("all2all-backend");
      p.engine.a2a = b == "deepep_high_throughput" ? A2aKernel::PerNode : A2aKernel::PerRank;
    }
    if (has("enforce-eager")) p.engine.cuda_graphs = !boolean("enforce-eager");
    if (has("disable-custom-all-reduce") && boolean("disable-custom-all-reduce")) p.engine.allreduce = AllReduceKernels::Nccl;
    if (has("enable-eplb")) get("enable-eplb");
    if (has("eplb-config")) {
      const std::string& e = *get("eplb-config");
      const std::size_t at = e.find("num_redundant_experts");
      if (at == std::string::npos) throw InputError(source, "eplb-config", "expected {\"num_redundant_experts\": N}");
      p.redundant_experts = std::atoi(e.c_str() + e.find(':', at) + 1);
    }
    if (has("speculative-config")) {
      const std::string& e = *get("speculative-config");
      const std::size_t at = e.find("num_speculative_tokens");
      if (at == std::string::npos) throw InputError(source, "speculative-config", "expected num_speculative_tokens");
      p.engine.spec_tokens = std::atoi(e.c_str() + e.find(':', at) + 1);
    }
    if (has("cpu-offload-gb")) p.engine.weight_offload = real("cpu-offload-gb", 0, 1e6) * 1e9;
    if (has("enable-dbo")) p.engine.two_batch_overlap = boolean("enable-dbo");
    if (has("async-scheduling")) p.engine.overlap_schedule = boolean("async-scheduling");
    if (has("no-async-scheduling")) p.engine.overlap_schedule = !boolean("no-async-scheduling");
  } else if (engine == LaunchEngine::Sglang) {
    const long size = has("tp-size") ? integer("tp-size", 1, big) : 1;
    attn_dp = has("enable-dp-attention") && boolean("enable-dp-attention") && has("dp-size") ? integer("dp-size", 1, big) : 1;
    if (size % attn_dp != 0) throw InputError(source, "dp-size", "must divide tp-size " + std::to_string(size));
    tp = size / attn_dp;
    deg("tp", tp);
    if (attn_dp > 1) deg("attn_dp", attn_dp);
    if (has("dp-size") && attn_dp == 1) get("dp-size");
    if (has("pp-size")) deg("pp", integer("pp-size", 1, big));
    if (model.is_moe()) deg("ep", has("ep-size") ? integer("ep-size", 1, big) : 1);
    if (has("moe-a2a-backend") && *get("moe-a2a-backend") == "deepep") {
      const std::string mode = has("deepep-mode") ? *get("deepep-mode") : "auto";
      p.engine.a2a = mode == "normal" ? A2aKernel::PerNode : mode == "low_latency" ? A2aKernel::PerRank : A2aKernel::Auto;
    }
    if (has("max-running-requests")) p.engine.max_seqs = static_cast<int>(integer("max-running-requests", 1, 1 << 24));
    if (has("max-prefill-tokens")) p.engine.max_batch_tokens = static_cast<int>(integer("max-prefill-tokens", 1, 1 << 26));
    if (has("chunked-prefill-size")) {
      const long c = integer("chunked-prefill-size", -1, 1 << 26);
      p.engine.prefill_chunk = c <= 0 ? 0 : static_cast<int>(c);
    }
    if (has("context-length")) p.engine.max_context = static_cast<int>(integer("context-length", 1, 1 << 26));
    if (has("mem-fraction-static")) p.engine.kv_fraction = real("mem-fraction-static", 0.01, 1);
    if (has("kv-cache-dtype")) p.dtypes.kv = *get("kv-cache-dtype") == "auto" ? p.dtypes.kv : Dtype::FP8;
    if (has("quantization") && *get("quantization") == "fp8") p.dtypes.weights = p.dtypes.activations = Dtype::FP8;
    if (has("page-size")) p.engine.kv_block = static_cast<int>(integer("page-size", 1, 1 << 20));
    if (has("disable-radix-cache")) p.engine.prefix_cache = !boolean("disable-radix-cache");
    if (has("disable-cuda-graph")) p.engine.cuda_graphs = !boolean("disable-cuda-graph");
    if (has("disable-custom-all-reduce") && boolean("disable-custom-all-reduce")) p.engine.allreduce = AllReduceKernels::Nccl;
    if (has("enable-two-batch-overlap")) p.engine.two_batch_overlap = boolean("enable-two-batch-overlap");
    if (has("disable-overlap-schedule")) p.engine.overlap_schedule = !boolean("disable-overlap-schedule");
    if (has("enable-eplb")) get("enable-eplb");
    if (has("ep-num-redundant-experts")) p.redundant_experts = static_cast<int>(integer("ep-num-redundant-experts", 0, 1 << 16));
    if (has("speculative-num-steps")) p.engine.spec_tokens = static_cast<int>(integer("speculative-num-steps", 0, 64));
    for (const char* k : {"speculative-algorithm", "speculative-eagle-topk", "speculative-num-draft-tokens", "disaggregation-mode"})
      if (has(k)) get(k);
    if (has("cpu-offload-gb")) p.engine.weight_offload = real("cpu-offload-gb", 0, 1e6) * 1e9;
    if (has("enable-hierarchical-cache")) get("enable-hierarchical-cache");
    if (has("hicache-size")) p.engine.kv_host = real("hicache-size", 0, 1e6) * 1e9;
  } else {
    const long size = has("tensor_parallel_size") ? integer("tensor_parallel_size", 1, big) : 1;
    const bool adp = has("enable_attention_dp") && boolean("enable_attention_dp");
    tp = adp ? 1 : size;
    attn_dp = adp ? size : 1;
    deg("tp", tp);
    if (attn_dp > 1) deg("attn_dp", attn_dp);
    if (has("pipeline_parallel_size")) deg("pp", integer("pipeline_parallel_size", 1, big));
    if (model.is_moe()) {
      if (has("moe_expert_parallel_size")) deg("ep", integer("moe_expert_parallel_size", 1, big));
      if (has("moe_tensor_parallel_size")) deg("etp", integer("moe_tensor_parallel_size", 1, big));
    }
    // (per attention-DP rank: the engine holds attn_dp times them)
    if (has("max_batch_size")) p.engine.max_seqs = static_cast<int>(attn_dp * integer("max_batch_size", 1, 1 << 24));
    if (has("max_num_tokens")) p.engine.max_batch_tokens = static_cast<int>(attn_dp * integer("max_num_tokens", 1, 1 << 26));
    if (has("max_seq_len")) p.engine.max_context = static_cast<int>(integer("max_seq_len", 1, 1 << 26));
    // (a prompt is chunked by its rank's max_num_tokens, not the engine's)
    if (has("enable_chunked_prefill"))
      p.engine.prefill_chunk = boolean("enable_chunked_prefill") ? static_cast<int>(p.engine.max_batch_tokens / attn_dp) : 0;
    if (has("kv_cache_config.free_gpu_memory_fraction"))
      p.engine.kv_fraction = real("kv_cache_config.free_gpu_memory_fraction", 0.01, 1);
    if (has("kv_cache_config.dtype")) p.dtypes.kv = *get("kv_cache_config.dtype") == "auto" ? p.dtypes.kv : Dtype::FP8;
    if (has("kv_cache_config.enable_block_reuse")) p.engine.prefix_cache = boolean("kv_cache_config.enable_block_reuse");
    if (has("kv_cache_config.tokens_per_block")) p.engine.kv_block = static_cast<int>(integer("kv_cache_config.tokens_per_block", 1, 1 << 20));
    if (has("scheduler_config.capacity_scheduler_policy")) {
      const std::string& s = *get("scheduler_config.capacity_scheduler_policy");
      if (s == "GUARANTEED_NO_EVICT") p.engine.policy = KvPolicy::Reserve;
      else if (s == "MAX_UTILIZATION") p.engine.policy = KvPolicy::OnDemand;
      else throw InputError(source, "scheduler_config.capacity_scheduler_policy", "expected GUARANTEED_NO_EVICT or MAX_UTILIZATION, got \"" + s + "\"");
    }
    // trtllm-serve's PyTorch flow captures CUDA graphs unless cuda_graph_config is null.
    p.engine.cuda_graphs = !(has("cuda_graph_config") && *get("cuda_graph_config") == "null");
    if (has("cuda_graph_config.max_batch_size")) get("cuda_graph_config.max_batch_size");
    p.engine.overlap_schedule = !(has("disable_overlap_scheduler") && boolean("disable_overlap_scheduler"));
    if (has("allreduce_strategy")) p.engine.allreduce = *get("allreduce_strategy") == "NCCL" ? AllReduceKernels::Nccl : AllReduceKernels::Trtllm;
    if (has("moe_config.load_balancer.num_slots"))
      p.redundant_experts = static_cast<int>(integer("moe_config.load_balancer.num_slots", model.experts, 1 << 16)) - model.experts;
    if (has("speculative_config.decoding_type")) get("speculative_config.decoding_type");
    for (const char* k : {"speculative_config.max_draft_len", "speculative_config.num_nextn_predict_layers"})  // (the second: before TensorRT-LLM 1.1)
      if (has(k)) p.engine.spec_tokens = static_cast<int>(integer(k, 0, 64));
    if (has("cache_transceiver_config.backend")) get("cache_transceiver_config.backend");
  }
  if (ignored)
    for (const auto& [k, x] : v)
      if (!used.count(k)) ignored->push_back(k + ": " + x);
  // Degrees through the compact string, so dp takes the GPUs left as it does there.
  const Plan shaped = plan_from_string(degrees, cluster.num_gpus(), plan_defaults(model));
  p.deg = shaped.deg;
  follow_user_settings(p.engine, true);
  return p;
}

}  // namespace shardsim
