// sim/plan/engine.cpp — engine presets and the readers of engine settings.
#include "sim/plan/engine.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/input_error.hpp"
#include "common/text_number.hpp"

namespace shardsim {

namespace {

// Presets. Sources and the reasoning behind the host-cost estimates: docs/plan-format.md.
std::map<std::string, EngineSettings> make_presets() {
  std::map<std::string, EngineSettings> p;
  EngineSettings vllm;  // vLLM V1 (≥ 0.8) serving defaults on an 80 GB-class GPU
  p["vllm"] = vllm;

  EngineSettings sg;  // SGLang defaults: radix/page size 1, overlap scheduler hides most host work
  sg.preset = "sglang";
  sg.max_seqs = 4096;  // max_running_requests is derived from the KV pool: memory, not this, limits it
  sg.max_batch_tokens = 16384;
  sg.prefill_chunk = 8192;
  sg.kv_fraction = 0.88;
  sg.kv_block = 1;
  sg.step_overhead = 0.2e-3;
  sg.seq_overhead = 1e-6;
  sg.overlap_schedule = true;  // (--disable-overlap-schedule turns it off)
  sg.scheduler = SchedulerKind::Sglang;
  sg.allreduce = AllReduceKernels::Sglang;
  p["sglang"] = sg;

  EngineSettings trt;  // TensorRT-LLM executor defaults (TRT engine flow)
  trt.preset = "trtllm";
  trt.max_seqs = 2048;
  trt.max_batch_tokens = 8192;
  trt.prefill_chunk = 0;
  trt.kv_budget = KvBudget::FreeFraction;
  trt.kv_fraction = 0.9;
  trt.policy = KvPolicy::Reserve;
  trt.kv_block = 32;
  trt.cuda_graphs = false;
  trt.launch_overhead = 2.5e-6;
  trt.step_overhead = 0.5e-3;
  trt.seq_overhead = 2e-6;
  trt.scheduler = SchedulerKind::Trtllm;
  trt.allreduce = AllReduceKernels::Trtllm;  // (the MLPerf harness's 0.x plugin too: its AUTO strategy also had one-/two-shot kernels)
  p["trtllm"] = trt;

  EngineSettings ml = trt;  // TensorRT-LLM as NVIDIA's MLPerf Inference v4.1 harness runs it (Llama-2-70B, Mixtral)
  ml.preset = "trtllm-mlperf";
  ml.max_seqs = 896;
  ml.max_batch_tokens = 4096;
  ml.policy = KvPolicy::OnDemand;  // MAX_UTILIZATION: blocks on demand, pause (recompute) when out of blocks
  p["trtllm-mlperf"] = ml;
  return p;
}

const std::map<std::string, EngineSettings>& presets() {
  static const auto p = make_presets();
  return p;
}

bool parse_bool(const std::string& v, const std::string& source, const std::string& field) {
  if (v == "1" || v == "on" || v == "true") return true;
  if (v == "0" || v == "off" || v == "false") return false;
  throw InputError(source, field, "expected on or off, got \"" + v + "\"");
}

KvPolicy parse_policy(const std::string& v, const std::string& source, const std::string& field) {
  if (v == "reserve") return KvPolicy::Reserve;
  if (v == "on-demand") return KvPolicy::OnDemand;
  if (v == "reserve-exact") return KvPolicy::ReserveExact;
  throw InputError(source, field, "unknown KV policy \"" + v + "\" (expected reserve, on-demand, reserve-exact)");
}

SchedulerKind parse_scheduler(const std::string& v, const std::string& source, const std::string& field) {
  if (v == "vllm") return SchedulerKind::Vllm;
  if (v == "trtllm") return SchedulerKind::Trtllm;
  if (v == "sglang") return SchedulerKind::Sglang;
  throw InputError(source, field, "unknown scheduler \"" + v + "\" (expected vllm, trtllm or sglang)");
}

AllReduceKernels parse_allreduce(const std::string& v, const std::string& source, const std::string& field) {
  if (v == "nccl") return AllReduceKernels::Nccl;
  if (v == "trtllm") return AllReduceKernels::Trtllm;
  if (v == "vllm") return AllReduceKernels::Vllm;
  if (v == "sglang") return AllReduceKernels::Sglang;
  throw InputError(source, field, "unknown all-reduce kernels \"" + v + "\" (expected nccl, trtllm, vllm or sglang)");
}

A2aKernel parse_a2a(const std::string& v, const std::string& source, const std::string& field) {
  if (v == "auto") return A2aKernel::Auto;
  if (v == "per-node") return A2aKernel::PerNode;
  if (v == "per-rank") return A2aKernel::PerRank;
  throw InputError(source, field, "unknown all-to-all kind \"" + v + "\" (expected auto, per-node or per-rank)");
}

// "0.9" or "0.9:0.7:0.5": per draft position, each in [0, 1], at most 16.
std::vector<double> parse_acceptance(const std::string& v, const std::string& source, const std::string& field) {
  std::vector<double> out;
  std::size_t from = 0;
  for (;;) {
    const std::size_t colon = v.find(':', from);
    out.push_back(parse_real_in(v.substr(from, colon == std::string::npos ? std::string::npos : colon - from), source, field, 0, 1));
    if (colon == std::string::npos) break;
    from = colon + 1;
  }
  if (out.size() > 16) throw InputError(source, field, "at most 16 acceptance rates (one per draft position), got " + std::to_string(out.size()));
  return out;
}

Dispatch parse_dispatch(const std::string& v, const std::string& source, const std::string& field) {
  if (v == "round-robin") return Dispatch::RoundRobin;
  if (v == "prefix") return Dispatch::PrefixAffinity;
  if (v == "least-loaded") return Dispatch::LeastLoaded;
  throw InputError(source, field, "unknown dispatch \"" + v + "\" (expected round-robin, least-loaded or prefix)");
}

Preemption parse_preemption(const std::string& v, const std::string& source, const std::string& field) {
  if (v == "recompute") return Preemption::Recompute;
  if (v == "swap") return Preemption::Swap;
  throw InputError(source, field, "unknown preemption mode \"" + v + "\" (expected recompute or swap)");
}

// Sets one field from text; the single table both readers go through.
bool set_field(EngineSettings& e, const std::string& key, const std::string& v, const std::string& source,
               const std::string& field) {
  if (key == "max_seqs") e.max_seqs = static_cast<int>(parse_int_in(v, source, field, 1, 1 << 20));
  else if (key == "max_batch_tokens" || key == "max_num_tokens")
    e.max_batch_tokens = static_cast<int>(parse_int_in(v, source, field, 1, 1 << 24));
  else if (key == "max_context") e.max_context = static_cast<int>(parse_int_in(v, source, field, 1, 1 << 24));
  else if (key == "prefill_chunk") e.prefill_chunk = static_cast<int>(parse_int_in(v, source, field, 0, 1 << 24));
  else if (key == "max_output") e.max_output = static_cast<int>(parse_int_in(v, source, field, 0, 1 << 24));
  else if (key == "kv_free_fraction") {
    e.kv_budget = KvBudget::FreeFraction;
    e.kv_fraction = parse_real_in(v, source, field, 0.01, 1.0);
  } else if (key == "mem_util" || key == "gpu_memory_utilization") {
    e.kv_budget = KvBudget::TotalFraction;
    e.kv_fraction = parse_real_in(v, source, field, 0.05, 1.0);
  } else if (key == "policy") e.policy = parse_policy(v, source, field);
  else if (key == "preemption") e.preemption = parse_preemption(v, source, field);
  else if (key == "scheduler") e.scheduler = parse_scheduler(v, source, field);
  else if (key == "limits") {
    if (v != "rank" && v != "engine") throw InputError(source, field, "expected rank or engine (whose limits max_seqs and max_batch_tokens are with attention-DP), got \"" + v + "\"");
    e.rank_limits = v == "rank";
  }
  else if (key == "a2a") e.a2a = parse_a2a(v, source, field);
  else if (key == "allreduce") e.allreduce = parse_allreduce(v, source, field);
  else if (key == "kv_block") e.kv_block = static_cast<int>(parse_int_in(v, source, field, 1, 4096));
  else if (key == "swap_bw") e.swap_bw = parse_real_in(v, source, field, 1e6, 1e13);
  else if (key == "cuda_graphs") e.cuda_graphs = parse_bool(v, source, field);
  else if (key == "two_batch_overlap") e.two_batch_overlap = parse_bool(v, source, field);
  else if (key == "overlap_schedule") e.overlap_schedule = parse_bool(v, source, field);
  else if (key == "comm_sms") e.comm_sms = static_cast<int>(parse_int_in(v, source, field, 0, 1024));
  else if (key == "prefix_cache") e.prefix_cache = parse_bool(v, source, field);
  else if (key == "kv_host_gb") e.kv_host = parse_real_in(v, source, field, 0, 1e6) * 1e9;
  else if (key == "weight_offload_gb") e.weight_offload = parse_real_in(v, source, field, 0, 1e5) * 1e9;
  else if (key == "spec_tokens") e.spec_tokens = static_cast<int>(parse_int_in(v, source, field, 0, 16));
  else if (key == "spec_accept") e.spec_accept = parse_acceptance(v, source, field);
  else if (key == "dispatch") e.dispatch = parse_dispatch(v, source, field);
  else if (key == "launch_overhead_us") e.launch_overhead = parse_real_in(v, source, field, 0, 1e5) * 1e-6;
  else if (key == "step_overhead_ms") e.step_overhead = parse_real_in(v, source, field, 0, 1e4) * 1e-3;
  else if (key == "seq_overhead_us") e.seq_overhead = parse_real_in(v, source, field, 0, 1e5) * 1e-6;
  else if (key == "runtime_reserve_gb") e.runtime_reserve = parse_real_in(v, source, field, 0, 1e3) * 1e9;
  else return false;
  return true;
}

// Every key set_field reads (aliases included): the compact string and the JSON "engine" object
// accept the same ones.
constexpr const char* kKeys[] = {"max_seqs",        "max_batch_tokens", "max_num_tokens",   "max_context",
                                 "prefill_chunk",   "max_output",       "kv_free_fraction", "mem_util",
                                 "gpu_memory_utilization", "policy",    "preemption",       "kv_block",
                                 "swap_bw",         "cuda_graphs",      "launch_overhead_us", "step_overhead_ms",
                                 "seq_overhead_us", "runtime_reserve_gb", "two_batch_overlap", "scheduler", "overlap_schedule",
                                 "a2a",             "comm_sms",         "prefix_cache",     "dispatch",
                                 "spec_tokens",     "spec_accept",      "kv_host_gb",       "weight_offload_gb",
                                 "allreduce",       "limits"};

// Replaces `e` by the preset `name`; the model's max_context survives.
void apply_preset(EngineSettings& e, const std::string& name, const std::string& source, const std::string& field) {
  int context = e.max_context;
  e = engine_preset(name, source, field);
  e.max_context = context;
}

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", x);
  return buf;
}

std::string acceptance_text(const std::vector<double>& a) {
  std::string s;
  for (double x : a) s += (s.empty() ? "" : ":") + num(x);
  return s;
}

// Every field as compact-string items, in a fixed order.
std::vector<std::pair<std::string, std::string>> items(const EngineSettings& e) {
  return {{"max_seqs", std::to_string(e.max_seqs)},
          {"max_batch_tokens", std::to_string(e.max_batch_tokens)},
          {"limits", e.rank_limits ? "rank" : "engine"},
          {"max_context", std::to_string(e.max_context)},
          {"prefill_chunk", std::to_string(e.prefill_chunk)},
          {"max_output", std::to_string(e.max_output)},
          {e.kv_budget == KvBudget::FreeFraction ? "kv_free_fraction" : "mem_util", num(e.kv_fraction)},
          {"policy", to_string(e.policy)},
          {"preemption", to_string(e.preemption)},
          {"kv_block", std::to_string(e.kv_block)},
          {"swap_bw", num(e.swap_bw)},
          {"cuda_graphs", e.cuda_graphs ? "on" : "off"},
          {"launch_overhead_us", num(e.launch_overhead * 1e6)},
          {"step_overhead_ms", num(e.step_overhead * 1e3)},
          {"seq_overhead_us", num(e.seq_overhead * 1e6)},
          {"runtime_reserve_gb", num(e.runtime_reserve / 1e9)},
          {"two_batch_overlap", e.two_batch_overlap ? "on" : "off"},
          {"overlap_schedule", e.overlap_schedule ? "on" : "off"},
          {"scheduler", to_string(e.scheduler)},
          {"a2a", to_string(e.a2a)},
          {"allreduce", to_string(e.allreduce)},
          {"comm_sms", std::to_string(e.comm_sms)},
          {"prefix_cache", e.prefix_cache ? "on" : "off"},
          {"dispatch", to_string(e.dispatch)},
          {"spec_tokens", std::to_string(e.spec_tokens)},
          {"spec_accept", acceptance_text(e.spec_accept)},
          {"kv_host_gb", num(e.kv_host / 1e9)},
          {"weight_offload_gb", num(e.weight_offload / 1e9)}};
}

}  // namespace

const char* to_string(KvBudget b) { return b == KvBudget::FreeFraction ? "free-fraction" : "total-fraction"; }

const char* to_string(KvPolicy p) {
  switch (p) {
    case KvPolicy::Reserve: return "reserve";
    case KvPolicy::OnDemand: return "on-demand";
    case KvPolicy::ReserveExact: return "reserve-exact";
  }
  return "?";
}

const char* to_string(SchedulerKind k) {
  switch (k) {
    case SchedulerKind::Vllm: return "vllm";
    case SchedulerKind::Trtllm: return "trtllm";
    case SchedulerKind::Sglang: return "sglang";
  }
  return "?";
}

const char* to_string(AllReduceKernels k) {
  switch (k) {
    case AllReduceKernels::Nccl: return "nccl";
    case AllReduceKernels::Trtllm: return "trtllm";
    case AllReduceKernels::Vllm: return "vllm";
    case AllReduceKernels::Sglang: return "sglang";
  }
  return "?";
}

const char* to_string(A2aKernel k) {
  switch (k) {
    case A2aKernel::Auto: return "auto";
    case A2aKernel::PerNode: return "per-node";
    case A2aKernel::PerRank: return "per-rank";
  }
  return "?";
}

const char* to_string(Dispatch d) {
  switch (d) {
    case Dispatch::RoundRobin: return "round-robin";
    case Dispatch::PrefixAffinity: return "prefix";
    case Dispatch::LeastLoaded: return "least-loaded";
  }
  return "?";
}

const char* to_string(Preemption p) { return p == Preemption::Recompute ? "recompute" : "swap"; }

const std::vector<std::string>& engine_preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [k, v] : presets()) n.push_back(k);
    return n;
  }();
  return names;
}

EngineSettings engine_preset(const std::string& name, const std::string& source, const std::string& field) {
  auto it = presets().find(name);
  if (it != presets().end()) return it->second;
  std::string known;
  for (const auto& n : engine_preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError(source, field, "unknown engine preset \"" + name + "\" (expected one of: " + known + ")");
}

const char* engine_key_list() {
  static const std::string list = [] {
    std::string l = "engine";
    for (const char* k : kKeys) l += std::string(", ") + k;
    return l;
  }();
  return list.c_str();
}

bool set_engine_key(EngineSettings& e, const std::string& key, const std::string& value, const std::string& source) {
  if (key == "engine") {
    apply_preset(e, value, source, key);
    return true;
  }
  return set_field(e, key, value, source, key);
}

void engine_from_json(EngineSettings& e, JsonObject obj) {
  if (obj.has("preset")) apply_preset(e, obj.string("preset"), obj.source(), obj.pointer("preset"));
  for (const char* key : kKeys) {
    if (!obj.has(key)) continue;
    const json& v = obj.raw(key);
    std::string text = v.is_string() ? v.get<std::string>() : v.is_boolean() ? (v.get<bool>() ? "on" : "off") : v.dump();
    set_field(e, key, text, obj.source(), obj.pointer(key));
  }
  obj.finish();
  follow_user_settings(e, obj.has("prefill_chunk"));
}

void follow_user_settings(EngineSettings& e, bool chunk_given) {
  if (!chunk_given && e.prefill_chunk > e.max_batch_tokens) e.prefill_chunk = e.max_batch_tokens;
}

json engine_to_json(const EngineSettings& e) {
  json j;
  j["preset"] = e.preset;
  for (const auto& [k, v] : items(e)) {
    if (k == "policy" || k == "preemption" || k == "scheduler" || k == "limits" || k == "a2a" || k == "allreduce" || k == "dispatch" || k == "spec_accept") j[k] = v;
    else if (k == "cuda_graphs") j[k] = e.cuda_graphs;
    else if (k == "prefix_cache") j[k] = e.prefix_cache;
    else if (k == "two_batch_overlap") j[k] = e.two_batch_overlap;
    else if (k == "overlap_schedule") j[k] = e.overlap_schedule;
    else if (v.find_first_of(".e") == std::string::npos) j[k] = std::stoll(v);
    else j[k] = std::stod(v);
  }
  return j;
}

std::string engine_to_string(const EngineSettings& e) {
  EngineSettings base = engine_preset(e.preset, "engine", "preset");
  base.max_context = e.max_context;
  auto mine = items(e), theirs = items(base);
  std::string s = e.preset == EngineSettings{}.preset ? "" : "engine=" + e.preset;
  for (std::size_t i = 0; i < mine.size(); ++i)
    if (mine[i] != theirs[i]) s += (s.empty() ? "" : ",") + mine[i].first + "=" + mine[i].second;
  return s;
}

int seqs_per_group(const EngineSettings& e, int attn_dp) {
  int a = attn_dp < 1 ? 1 : attn_dp;
  return e.rank_limits ? e.max_seqs : (e.max_seqs + a - 1) / a;
}

int tokens_per_group(const EngineSettings& e, int attn_dp) {
  int a = attn_dp < 1 ? 1 : attn_dp;
  return e.rank_limits ? e.max_batch_tokens : (e.max_batch_tokens + a - 1) / a;
}

long engine_seqs(const EngineSettings& e, int attn_dp) {
  return e.rank_limits ? static_cast<long>(e.max_seqs) * std::max(1, attn_dp) : e.max_seqs;
}

long engine_tokens(const EngineSettings& e, int attn_dp) {
  return e.rank_limits ? static_cast<long>(e.max_batch_tokens) * std::max(1, attn_dp) : e.max_batch_tokens;
}

}  // namespace shardsim
