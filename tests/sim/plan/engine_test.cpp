// tests/sim/plan/engine_test.cpp — engine settings: presets, the compact string and JSON, limits per
// replica, data-type explanations, and refusals that name the field.
#include <doctest/doctest.h>

#include "common/input_error.hpp"
#include "sim/plan/memory_model.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_check.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

using namespace shardsim;

namespace {

std::string field_of(const std::string& text) {
  try {
    plan_from_string(text, 8, {});
  } catch (const InputError& e) {
    return e.field();
  }
  return "no error";
}

}  // namespace

TEST_CASE("engine: a preset sets every field, overrides apply wherever they are written") {
  Plan a = plan_from_string("tp=2,max_seqs=896,engine=trtllm-mlperf", 8, {});
  Plan b = plan_from_string("engine=trtllm-mlperf,tp=2,max_seqs=896", 8, {});
  CHECK(a.engine == b.engine);
  CHECK(a.engine.preset == "trtllm-mlperf");
  CHECK(a.engine.max_seqs == 896);
  CHECK(a.engine.max_batch_tokens == 4096);
  CHECK(a.engine.kv_budget == KvBudget::FreeFraction);
  CHECK(a.engine.policy == KvPolicy::OnDemand);
  CHECK_FALSE(a.engine.cuda_graphs);
  Plan v = plan_from_string("tp=2", 8, {});
  CHECK(v.engine.preset == "vllm");
  CHECK(v.engine.kv_budget == KvBudget::TotalFraction);
  CHECK(v.engine.prefill_chunk > 0);  // vLLM V1 always chunks prefill
  // The model's max_context survives choosing a preset.
  PlanDefaults d;
  d.max_context = 4096;
  CHECK(plan_from_string("engine=sglang", 8, d).engine.max_context == 4096);
}

TEST_CASE("engine: compact string and JSON round-trip every engine field") {
  Plan p = plan_from_string("tp=2,engine=trtllm,max_seqs=300,max_num_tokens=3000,prefill_chunk=512,max_output=700,"
                            "kv_free_fraction=0.85,policy=on-demand,preemption=swap,kv_block=64,cuda_graphs=on,"
                            "launch_overhead_us=3,step_overhead_ms=1.5,seq_overhead_us=4,runtime_reserve_gb=2",
                            8, {});
  CHECK(p.engine.max_batch_tokens == 3000);
  CHECK(p.engine.preemption == Preemption::Swap);
  CHECK(p.engine.step_overhead == doctest::Approx(1.5e-3));
  Plan q = plan_from_json(plan_to_json(p), "p.json", 8, {});
  CHECK(q.engine == p.engine);
  Plan r = plan_from_string(plan_to_string(p), 8, {});
  CHECK(r.engine == p.engine);
  // The default engine adds nothing to the compact string.
  CHECK(plan_to_string(plan_from_string("tp=2", 8, {})).find("engine") == std::string::npos);
}

TEST_CASE("engine: bad values are refused naming the key") {
  CHECK(field_of("engine=tensorrt") == "engine");
  CHECK(field_of("policy=greedy") == "policy");
  CHECK(field_of("kv_free_fraction=1.5") == "kv_free_fraction");
  CHECK(field_of("mem_util=0") == "mem_util");
  CHECK(field_of("cuda_graphs=maybe") == "cuda_graphs");
  CHECK(field_of("max_seqs=0") == "max_seqs");
  CHECK(field_of("step_overhead_ms=-1") == "step_overhead_ms");
  CHECK(field_of("preemption=drop") == "preemption");
  json j = json::parse(R"({"degrees": {"tp": 2}, "engine": {"preset": "vllm", "max_seq": 4}})");
  try {
    plan_from_json(j, "p.json", 8, {});
    FAIL("expected an error");
  } catch (const InputError& e) {
    CHECK(std::string(e.field()) == "/engine/max_seq");
  }
  // The compact string's aliases are JSON keys too.
  json alias = json::parse(R"({"degrees": {"tp": 2}, "engine": {"max_num_tokens": 3000, "gpu_memory_utilization": 0.8}})");
  Plan pa = plan_from_json(alias, "p.json", 8, {});
  CHECK(pa.engine.max_batch_tokens == 3000);
  CHECK(pa.engine.kv_budget == KvBudget::TotalFraction);
  CHECK(pa.engine.kv_fraction == doctest::Approx(0.8));
  json k = json::parse(R"({"degrees": {"tp": 2}, "engine": {"max_seqs": 4.5}})");
  CHECK_THROWS_AS(plan_from_json(k, "p.json", 8, {}), InputError);
}

TEST_CASE("engine: max_seqs is per replica and split over attention-DP groups") {
  Plan p = plan_from_string("tp=1,attn_dp=8,ep=8,max_seqs=100", 8, {});
  CHECK(seqs_per_group(p.engine, p.deg.attn_dp) == 13);
  CHECK(seqs_per_group(p.engine, 1) == 100);
}

TEST_CASE("engine: the KV budget follows the engine's rule") {
  ModelSpec m = load_model("llama2-70b");
  Cluster c = load_cluster("dgx-h100:1");
  Plan free = plan_from_string("tp=2,weights=fp8,kv_free_fraction=0.9", 8, plan_defaults(m));
  Plan total = plan_from_string("tp=2,weights=fp8,mem_util=0.9", 8, plan_defaults(m));
  MemoryReport a = plan_memory(free, m, c), b = plan_memory(total, m, c);
  const StageMemory& w = a.worst();
  CHECK(a.usable - w.static_bytes() == doctest::Approx(0.9 * (a.hbm - w.static_bytes())));
  CHECK(b.usable == doctest::Approx(0.9 * b.hbm));
  CHECK(a.kv_capacity_tokens > b.kv_capacity_tokens);  // 90% of what is free > 90% of all minus what is used
  CHECK(a.hbm == doctest::Approx(81559.0 * 1024 * 1024));  // what the driver reports for an "80 GB" H100
}

TEST_CASE("engine: plan check says which GEMMs run in FP8 and how KV is taken") {
  ModelSpec m = load_model("llama2-70b");
  Cluster c = load_cluster("dgx-h100:1");
  auto notes = [&](const std::string& text) {
    std::string all;
    for (const auto& n : check_plan(plan_from_string(text, 8, plan_defaults(m)), m, c).notes) all += n + "\n";
    return all;
  };
  CHECK(notes("tp=2,weights=fp8").find("W8A16") != std::string::npos);
  CHECK(notes("tp=2,weights=fp8,act=fp8").find("W8A8 (FP8 GEMMs") != std::string::npos);
  CHECK(notes("tp=2,act=fp8").find("buy nothing") != std::string::npos);
  std::string kv = notes("tp=2,weights=fp8,engine=trtllm");
  CHECK(kv.find("KV pool") != std::string::npos);
  CHECK(kv.find("policy reserve") != std::string::npos);
}

TEST_CASE("engine: a setting the user did not give follows the one they did (issue 42)") {
  const ModelSpec m = load_model("mixtral-8x7b");
  const Cluster c = load_cluster("dgx-h100:1");
  // max_batch_tokens alone: the preset's 8,192-token chunk was a conflict ("prefill_chunk=8192
  // exceeds max_batch_tokens=4096"); the chunk now follows the budget, as the engines cap it.
  for (const char* text : {"tp=8,max_batch_tokens=4096", "tp=8,engine=sglang,max_batch_tokens=4096"}) {
    CAPTURE(text);
    const Plan p = plan_from_string(text, 8, {});
    CHECK(p.engine.prefill_chunk == 4096);
    CHECK(check_plan(p, m, c).feasible());
    const Plan j = plan_from_json(plan_to_json(p), "p.json", 8, {});  // and it writes back as itself
    CHECK(j.engine == p.engine);
    CHECK(plan_from_string(plan_to_string(p), 8, {}).engine == p.engine);
  }
  // The JSON reader follows the same rule.
  const Plan jp = plan_from_json(json::parse(R"({"degrees": {"tp": 8}, "engine": {"preset": "sglang", "max_batch_tokens": 2048}})"),
                                 "p.json", 8, {});
  CHECK(jp.engine.prefill_chunk == 2048);
  // A budget above the chunk leaves the preset's chunk; a chunk the user set stays as set, and a
  // chunk above the budget is still refused, naming the field.
  CHECK(plan_from_string("tp=8,engine=sglang,max_batch_tokens=32768", 8, {}).engine.prefill_chunk == 8192);
  CHECK(plan_from_string("tp=8,max_batch_tokens=4096,prefill_chunk=1024", 8, {}).engine.prefill_chunk == 1024);
  const Plan bad = plan_from_string("tp=8,prefill_chunk=8192,max_batch_tokens=4096", 8, {});
  const PlanCheck chk = check_plan(bad, m, c);
  REQUIRE_FALSE(chk.feasible());
  CHECK(chk.violations.front().field == "/engine/prefill_chunk");
  // TensorRT-LLM's preset does not chunk (0): nothing to follow.
  CHECK(plan_from_string("tp=8,engine=trtllm,max_batch_tokens=2048", 8, {}).engine.prefill_chunk == 0);
}
