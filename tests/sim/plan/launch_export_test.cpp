// tests/sim/plan/launch_export_test.cpp — plans as vLLM / SGLang / TensorRT-LLM launch files: every field an
// engine can express survives export and import, what it cannot is named, and bad configs are refused by key.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "common/input_error.hpp"
#include "sim/plan/launch_export.hpp"
#include "sim/plan/plan_check.hpp"
#include "tests/cli_runner.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"

using namespace shardsim;

namespace {

const LaunchFile& file(const LaunchExport& ex, const std::string& name) {
  for (const auto& f : ex.files)
    if (f.name == name) return f;
  FAIL("no file " << name);
  return ex.files.front();
}

bool mentions(const LaunchExport& ex, const std::string& what) {
  for (const auto& s : ex.not_expressed)
    if (s.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("export: what an engine can express comes back the same plan through its config") {
  struct Case {
    std::string model, cluster, plan;
    LaunchEngine engine;
  };
  const std::vector<Case> cases = {
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,dp=4,kv=fp8,engine=vllm", LaunchEngine::Vllm},
      {"mixtral-8x7b", "dgx-h100:1", "tp=4,ep=4,etp=1,dp=2,engine=vllm,prefix_cache=off,max_seqs=256,max_batch_tokens=4096,prefill_chunk=2048,cuda_graphs=off,allreduce=nccl", LaunchEngine::Vllm},
      {"deepseek-v3", "dgx-h100:4", "tp=1,attn_dp=16,ep=16,dp=2,kv=fp8,engine=vllm,redundant_experts=16,spec_tokens=2,a2a=per-node,max_batch_tokens=131072", LaunchEngine::Vllm},
      {"llama3-70b", "dgx-h100:1", "tp=8,weights=fp8,act=fp8,engine=vllm,prefill_chunk=0", LaunchEngine::Vllm},
      {"deepseek-v3", "dgx-h100:4", "tp=1,attn_dp=16,ep=16,dp=2,kv=fp8,engine=sglang,two_batch_overlap=on,a2a=auto,redundant_experts=16,spec_tokens=3", LaunchEngine::Sglang},
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,dp=4,engine=sglang,prefix_cache=off,cuda_graphs=off,prefill_chunk=0,kv_host_gb=64", LaunchEngine::Sglang},
      {"qwen3-30b-a3b", "dgx-h100:1", "tp=2,attn_dp=2,ep=4,dp=2,engine=sglang,a2a=per-node,max_seqs=512", LaunchEngine::Sglang},
      {"mixtral-8x7b", "dgx-h100:1", "tp=2,dp=4,kv=fp8,engine=trtllm", LaunchEngine::Trtllm},
      {"deepseek-v3", "dgx-h100:4", "tp=1,attn_dp=16,ep=16,dp=2,kv=fp8,engine=trtllm,redundant_experts=16,spec_tokens=3,policy=on-demand,cuda_graphs=on,max_batch_tokens=65536,prefill_chunk=4096", LaunchEngine::Trtllm},
      {"mixtral-8x22b", "dgx-h100:2", "tp=8,ep=2,etp=4,dp=2,engine=trtllm,prefix_cache=off,allreduce=nccl", LaunchEngine::Trtllm},
  };
  for (const auto& c : cases) {
    CAPTURE(c.plan);
    const ModelSpec m = load_model(c.model);
    const Cluster cl = load_cluster(c.cluster);
    const Plan p = load_plan(c.plan, m, cl);
    REQUIRE(check_plan(p, m, cl).feasible());
    const LaunchExport ex = export_launch(p, m, cl, c.engine, "some/model", LaunchLoad{});
    const std::string cfg = std::string(to_string(c.engine)) + ".yaml";
    std::vector<std::string> ignored;
    Plan back = import_launch(c.engine, file(ex, cfg).text, cfg, m, cl, &ignored);
    CHECK(ignored.empty());
    back.name = p.name;
    CHECK(plan_to_string(back, m) == plan_to_string(p, m));
    CHECK(back.deg == p.deg);
    CHECK(back.engine == p.engine);
    CHECK(back.redundant_experts == p.redundant_experts);
    CHECK(back.dtypes.kv == p.dtypes.kv);
    CHECK(back.dtypes.weights == p.dtypes.weights);
    CHECK(check_plan(back, m, cl).feasible());
    // One server per replica in launch.sh, the benchmark at the load given.
    const std::string launch = file(ex, "launch.sh").text;
    std::size_t servers = 0;
    for (std::size_t at = launch.find("# replica "); at != std::string::npos; at = launch.find("# replica ", at + 1)) ++servers;
    CHECK(servers == static_cast<std::size_t>(p.deg.dp));
    CHECK(file(ex, "bench.sh").text.find("--num-prompts 1000") != std::string::npos);
  }
}

TEST_CASE("export: what an engine has no flag for is named, not dropped silently") {
  const ModelSpec m = load_model("mixtral-8x7b");
  const Cluster c = load_cluster("dgx-h100:1");
  // Expert-TP beside EP, a non-Megatron sharding, a rank mapping and sequence parallelism.
  const Plan p = load_plan("tp=4,ep=2,etp=2,sp=4,dp=2,router=column,mapping=dp.tp.attn_dp.pp", m, c);
  REQUIRE(check_plan(p, m, c).feasible());
  const LaunchExport v = export_launch(p, m, c, LaunchEngine::Vllm, "x", LaunchLoad{});
  CHECK(mentions(v, "etp=2 beside ep=2"));
  CHECK(mentions(v, "router=column"));
  CHECK(mentions(v, "mapping"));
  CHECK(mentions(v, "sp:"));
  CHECK(file(v, "NOTES.md").text.find("router=column") != std::string::npos);
  // The trtllm preset reserves KV (GUARANTEED_NO_EVICT), which vLLM does not do.
  const Plan t = load_plan("tp=2,dp=4,engine=trtllm", m, c);
  CHECK(mentions(export_launch(t, m, c, LaunchEngine::Vllm, "x", LaunchLoad{}), "policy=reserve"));
  CHECK(file(export_launch(t, m, c, LaunchEngine::Vllm, "x", LaunchLoad{}), "NOTES.md").text.find("engine=vllm") != std::string::npos);
  // TensorRT-LLM expresses etp beside ep.
  CHECK_FALSE(mentions(export_launch(p, m, c, LaunchEngine::Trtllm, "x", LaunchLoad{}), "beside"));
}

TEST_CASE("export: vLLM and TensorRT-LLM get the limits per attention-DP rank, SGLang the engine's, and the overlap switch") {
  const ModelSpec m = load_model("deepseek-v3");
  const Cluster c = load_cluster("dgx-h100:4");
  // 1,024 sequences and 8,192 tokens a step for the engine of 16 attention-DP ranks: vLLM's core
  // engines and TensorRT-LLM's executors apply their limits per rank, SGLang divides its own.
  const Plan p = load_plan("tp=1,attn_dp=16,ep=16,dp=2,max_seqs=1024,max_batch_tokens=8192,engine=vllm", m, c);
  REQUIRE(check_plan(p, m, c).feasible());
  const std::string v = file(export_launch(p, m, c, LaunchEngine::Vllm, "x", LaunchLoad{}), "vllm.yaml").text;
  CHECK(v.find("max-num-seqs: 64\n") != std::string::npos);
  CHECK(v.find("max-num-batched-tokens: 512\n") != std::string::npos);
  CHECK(v.find("no-async-scheduling: true\n") != std::string::npos);  // the vllm preset schedules in series
  const std::string t = file(export_launch(p, m, c, LaunchEngine::Trtllm, "x", LaunchLoad{}), "trtllm.yaml").text;
  CHECK(t.find("max_batch_size: 64\n") != std::string::npos);
  CHECK(t.find("max_num_tokens: 512\n") != std::string::npos);
  CHECK(t.find("disable_overlap_scheduler: true\n") != std::string::npos);
  const std::string g = file(export_launch(p, m, c, LaunchEngine::Sglang, "x", LaunchLoad{}), "sglang.yaml").text;
  CHECK(g.find("max-running-requests: 1024\n") != std::string::npos);
  CHECK(g.find("disable-overlap-schedule: true\n") != std::string::npos);
  // An overlapping plan says so to each engine; a limit that does not divide is named.
  const Plan o = load_plan("tp=1,attn_dp=16,ep=16,dp=2,max_seqs=1000,engine=sglang", m, c);
  const LaunchExport ov = export_launch(o, m, c, LaunchEngine::Vllm, "x", LaunchLoad{});
  CHECK(file(ov, "vllm.yaml").text.find("async-scheduling: true\n") != std::string::npos);
  CHECK(file(ov, "vllm.yaml").text.find("max-num-seqs: 63\n") != std::string::npos);
  CHECK(mentions(ov, "max_seqs=1000 is not a multiple of attn_dp=16"));
  CHECK(file(export_launch(o, m, c, LaunchEngine::Trtllm, "x", LaunchLoad{}), "trtllm.yaml").text.find("disable_overlap_scheduler") == std::string::npos);
  // A prompt is chunked by its rank's budget: 8,192 tokens per rank chunk at 8,192, not at the
  // engine's 131,072 (each way, for both), and a plan chunk its ranks' budgets cannot hold is named.
  const Plan r = load_plan("tp=1,attn_dp=16,ep=16,dp=2,max_batch_tokens=131072,prefill_chunk=8192,engine=vllm", m, c);
  for (LaunchEngine e : {LaunchEngine::Vllm, LaunchEngine::Trtllm}) {
    const std::string engine = to_string(e);
    CAPTURE(engine);
    const LaunchExport ex = export_launch(r, m, c, e, "x", LaunchLoad{});
    CHECK(!mentions(ex, "prefill_chunk"));
    const std::string cfg = std::string(to_string(e)) + ".yaml";
    const Plan back = import_launch(e, file(ex, cfg).text, cfg, m, c);
    CHECK(back.engine.max_batch_tokens == 131072);
    CHECK(back.engine.prefill_chunk == 8192);
  }
  // A plan whose limits are each rank's (limits=rank) is written as it is to vLLM and TensorRT-LLM,
  // and times the ranks to SGLang, which divides them.
  const Plan k = load_plan("tp=1,attn_dp=16,ep=16,dp=2,max_seqs=64,max_batch_tokens=4096,prefill_chunk=4096,engine=vllm,limits=rank", m, c);
  const LaunchExport kv = export_launch(k, m, c, LaunchEngine::Vllm, "x", LaunchLoad{});
  CHECK(file(kv, "vllm.yaml").text.find("max-num-seqs: 64\n") != std::string::npos);
  CHECK(file(kv, "vllm.yaml").text.find("max-num-batched-tokens: 4096\n") != std::string::npos);
  CHECK(!mentions(kv, "max_seqs / max_batch_tokens"));
  CHECK(file(export_launch(k, m, c, LaunchEngine::Trtllm, "x", LaunchLoad{}), "trtllm.yaml").text.find("max_batch_size: 64\n") != std::string::npos);
  const LaunchExport kg = export_launch(k, m, c, LaunchEngine::Sglang, "x", LaunchLoad{});
  CHECK(file(kg, "sglang.yaml").text.find("max-running-requests: 1024\n") != std::string::npos);
  CHECK(mentions(kg, "limits=rank"));
  CHECK(mentions(export_launch(p, m, c, LaunchEngine::Vllm, "x", LaunchLoad{}), "prefill_chunk=8192 exceeds max-num-batched-tokens=512 per DP rank"));
  CHECK(mentions(export_launch(p, m, c, LaunchEngine::Trtllm, "x", LaunchLoad{}), "prefill_chunk=8192: TensorRT-LLM chunks a prompt by max_num_tokens (512 per attention-DP rank)"));
}

TEST_CASE("export: a disaggregated plan gets a config per pool, the engine's roles and a router") {
  const ModelSpec m = load_model("mixtral-8x7b");
  const Cluster c = load_cluster("dgx-h100:1+dgx-h200:1");
  const Plan p = load_plan("decode:tp=4,dp=2,engine=sglang/prefill:tp=8,engine=sglang", m, c);
  REQUIRE(check_plan(p, m, c).feasible());
  const LaunchExport ex = export_launch(p, m, c, LaunchEngine::Sglang, "x", LaunchLoad{});
  CHECK(file(ex, "sglang-prefill.yaml").text.find("disaggregation-mode: prefill") != std::string::npos);
  CHECK(file(ex, "sglang-decode.yaml").text.find("disaggregation-mode: decode") != std::string::npos);
  const std::string launch = file(ex, "launch.sh").text;
  CHECK(launch.find("--pd-disaggregation") != std::string::npos);
  CHECK(launch.find("prefill replica 0: GPUs 8-15") != std::string::npos);  // decode first: the H200 node prefills
  CHECK(launch.find("decode replica 1: GPUs 4-7") != std::string::npos);
  for (const char* pool : {"prefill", "decode"}) {
    const std::string name = std::string("sglang-") + pool + ".yaml";
    const Plan back = import_launch(LaunchEngine::Sglang, file(ex, name).text, name, m, load_cluster("dgx-h100:1"));
    CHECK(back.deg.tp == (std::string(pool) == "prefill" ? 8 : 4));
  }
}

namespace {
// How many times `what` occurs in `text`.
int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}
}  // namespace

TEST_CASE("export: TensorRT-LLM's disaggregated front lists every context and generation server") {
  const ModelSpec m = load_model("mixtral-8x7b");
  const Cluster c = load_cluster("dgx-h100:2");
  const Plan p = load_plan("prefill:tp=2,dp=4,engine=trtllm/decode:tp=4,dp=2,engine=trtllm", m, c);
  REQUIRE(check_plan(p, m, c).feasible());
  const LaunchExport ex = export_launch(p, m, c, LaunchEngine::Trtllm, "some/model", LaunchLoad{});
  const std::string& cfg = file(ex, "trtllm-disagg.yaml").text;
  const std::size_t ctx = cfg.find("context_servers:"), gen = cfg.find("generation_servers:");
  REQUIRE(ctx != std::string::npos);
  REQUIRE(gen != std::string::npos);
  CHECK(cfg.find("num_instances: 4") != std::string::npos);
  CHECK(cfg.find("num_instances: 2") != std::string::npos);
  CHECK(count_of(cfg.substr(ctx, gen - ctx), "    - \"localhost:") == 4);  // the prefill pool fills node 0
  CHECK(count_of(cfg.substr(gen), "    - \"node1:") == 2);                // the decode pool node 1
  CHECK(file(ex, "launch.sh").text.find("trtllm-serve disaggregated -c trtllm-disagg.yaml") != std::string::npos);
  for (const auto& f : ex.files) CHECK(f.name.find("dynamo") == std::string::npos);  // only on request
}

TEST_CASE("export --dynamo: one Dynamo worker per replica, with the pool's settings and role, behind the frontend") {
  const ModelSpec m = load_model("mixtral-8x7b");
  const Cluster c = load_cluster("dgx-h100:2");
  const Plan p = load_plan("prefill:tp=2,dp=4,engine=vllm/decode:tp=4,dp=2,engine=vllm,max_seqs=96", m, c);
  REQUIRE(check_plan(p, m, c).feasible());
  for (LaunchEngine e : {LaunchEngine::Vllm, LaunchEngine::Sglang, LaunchEngine::Trtllm}) {
    CAPTURE(to_string(e));
    const LaunchExport ex = export_launch(p, m, c, e, "some/model", LaunchLoad{}, true);
    const std::string& sh = file(ex, "dynamo.sh").text;
    const std::string module = std::string("python -m dynamo.") + to_string(e) + " ";
    CHECK(count_of(sh, "python -m dynamo.frontend --http-port 8000") == 1);
    CHECK(count_of(sh, module) == 6);
    CHECK(count_of(sh, "--disaggregation-mode prefill") == 4);
    CHECK(count_of(sh, "--disaggregation-mode decode") == 2);
    if (e == LaunchEngine::Vllm) {
      CHECK(count_of(sh, "--max-num-seqs 96") == 2);  // the decode pool's own limit, on its two workers only
      CHECK(count_of(sh, "--kv-transfer-config '{") == 6);
    }
    if (e == LaunchEngine::Sglang) CHECK(count_of(sh, "--max-running-requests 96") == 2);
    if (e == LaunchEngine::Trtllm) CHECK(count_of(sh, "--extra-engine-args trtllm-decode.yaml") == 2);
    const std::string& dgd = file(ex, "dynamo-deploy.yaml").text;
    CHECK(dgd.find("kind: DynamoGraphDeployment") != std::string::npos);
    CHECK(count_of(dgd, "subComponentType: prefill\n      replicas: 4\n") == 1);
    CHECK(count_of(dgd, "subComponentType: decode\n      replicas: 2\n") == 1);
    CHECK(count_of(dgd, "gpu: \"2\"") == 1);
    CHECK(count_of(dgd, "gpu: \"4\"") == 1);
    CHECK(file(ex, "bench.sh").text.find("FRONT=${FRONT:-http://localhost:8000}") != std::string::npos);
  }
  // A plan that dispatches by prefix affinity gets Dynamo's KV-aware router.
  const Plan affinity = load_plan("tp=2,dp=8,engine=vllm,dispatch=prefix", m, c);
  REQUIRE(check_plan(affinity, m, c).feasible());
  const LaunchExport ex = export_launch(affinity, m, c, LaunchEngine::Vllm, "some/model", LaunchLoad{}, true);
  CHECK(file(ex, "dynamo.sh").text.find("--router-mode kv") != std::string::npos);
  CHECK(file(ex, "dynamo.sh").text.find("--disaggregation-mode") == std::string::npos);
}

TEST_CASE("import: a config with a bad value is refused naming the file and the key") {
  const ModelSpec m = load_model("mixtral-8x7b");
  const Cluster c = load_cluster("dgx-h100:1");
  auto reason = [&](LaunchEngine e, const std::string& text) -> std::string {
    try {
      import_launch(e, text, "cfg.yaml", m, c);
    } catch (const InputError& x) {
      CHECK(x.source() == "cfg.yaml");
      return x.field() + ": " + x.reason();
    }
    return "";
  };
  CHECK(reason(LaunchEngine::Vllm, "tensor-parallel-size: two\n").rfind("tensor-parallel-size: expected a whole number", 0) == 0);
  CHECK(reason(LaunchEngine::Vllm, "gpu-memory-utilization: 1.5\n").rfind("gpu-memory-utilization:", 0) == 0);
  CHECK(reason(LaunchEngine::Trtllm, "scheduler_config:\n  capacity_scheduler_policy: SOMETIMES\n")
            .rfind("scheduler_config.capacity_scheduler_policy: expected GUARANTEED_NO_EVICT", 0) == 0);
  CHECK(reason(LaunchEngine::Sglang, "tp-size: 8\ntp-size: 4\n") == "tp-size: given twice");
  CHECK(reason(LaunchEngine::Sglang, "\ttp-size: 8\n").find("tabs") != std::string::npos);
  CHECK(reason(LaunchEngine::Sglang, "tp-size 8\n").find("key: value") != std::string::npos);
  std::vector<std::string> ignored;
  import_launch(LaunchEngine::Vllm, "tensor-parallel-size: 2\nserved-model-name: mine  # a comment\n", "cfg.yaml", m, c, &ignored);
  CHECK(ignored == std::vector<std::string>{"served-model-name: mine"});
}

TEST_CASE("shardsim export / import: files written as a set, an infeasible plan refused with nothing written") {
  const std::string dir = "/tmp/shardsim_export_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  auto ok = test::run_cli("export --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=2,dp=4,engine=vllm --engine vllm --rate 12 --out " + dir);
  INFO(ok.err);
  REQUIRE(ok.exit_code == 0);
  for (const char* f : {"vllm.yaml", "launch.sh", "bench.sh", "NOTES.md"}) CHECK(std::filesystem::exists(dir + "/" + f));
  CHECK((std::filesystem::status(dir + "/launch.sh").permissions() & std::filesystem::perms::owner_exec) != std::filesystem::perms::none);
  // Another engine into the same folder replaces the set: no vllm.yaml left beside sglang.yaml.
  auto again = test::run_cli("export --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=2,dp=4 --engine sglang --out " + dir);
  REQUIRE(again.exit_code == 0);
  CHECK(std::filesystem::exists(dir + "/sglang.yaml"));
  CHECK_FALSE(std::filesystem::exists(dir + "/vllm.yaml"));
  auto imp = test::run_cli("import " + dir + "/sglang.yaml --engine sglang --model mixtral-8x7b --cluster dgx-h100:1");
  CHECK(imp.exit_code == 0);
  CHECK(imp.out.find("plan      dp=4,tp=2") != std::string::npos);
  CHECK(imp.out.find("feasible") != std::string::npos);
  const std::string other = dir + "-bad";
  auto bad = test::run_cli("export --model mixtral-8x7b --cluster dgx-h100:1 --plan tp=3 --engine vllm --out " + other);
  CHECK(bad.exit_code == 2);
  CHECK_FALSE(std::filesystem::exists(other));
  auto engine = test::run_cli("export --model mixtral-8x7b --cluster dgx-h100:1 --engine tgi --out " + other);
  CHECK(engine.exit_code == 2);
  CHECK(engine.err.find("unknown engine \"tgi\"") != std::string::npos);
  std::filesystem::remove_all(dir);
}
