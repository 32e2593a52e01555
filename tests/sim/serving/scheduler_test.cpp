// tests/sim/serving/scheduler_test.cpp — the engine's scheduler in the serving loop: KV policies, preemption,
// host costs, and the steady-state window.
#include <doctest/doctest.h>

#include <algorithm>
#include <utility>

#include "sim/step/analytic_executor.hpp"
#include "sim/step/lowering.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/plan/plan.hpp"
#include "sim/serving/serving.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"

using namespace shardsim;

namespace {

struct Run {
  ServingResult result;
  Metrics metrics;
};

// Sets the plan's KV budget so that its pool holds `kv_tokens` tokens.
void cut_kv(Plan& p, const ModelSpec& m, const Cluster& c, double kv_tokens) {
  MemoryReport full = plan_memory(p, m, c);
  p.engine.kv_budget = KvBudget::TotalFraction;
  p.engine.kv_fraction = (full.worst().static_bytes() + kv_tokens * full.worst().kv_per_token) / full.hbm;
}

// llama3-70b TP8 on one DGX-H100 with the KV pool cut to `kv_tokens` tokens.
Run run(const std::string& plan_text, const std::string& trace, double kv_tokens = 0, bool offline = true) {
  ModelSpec m = load_model("llama3-70b");
  Cluster c = load_cluster("dgx-h100:1");
  Plan p = plan_from_string(plan_text, 8, plan_defaults(m));
  if (kv_tokens > 0) cut_kv(p, m, c, kv_tokens);
  AnalyticExecutor ex(c);
  ServingOptions o;
  o.offline = offline;
  Run r{serve(p, m, c, load_request_trace(trace), nullptr, ex, o), {}};
  r.metrics = summarize(r.result, o, 8);
  return r;
}

const char* kTrace = "synthetic:n=60,prompt=fixed:500,output=fixed:400,seed=3";

}  // namespace

TEST_CASE("scheduler: on-demand KV admits more than it can finish, preempts, and still completes everything") {
  // 20,000 tokens of KV: 40 prompts fit, 22 full sequences (900 tokens) do.
  Run od = run("tp=8,policy=on-demand,kv_block=16,max_context=2048", kTrace, 20000);
  Run exact = run("tp=8,policy=reserve-exact,max_context=2048", kTrace, 20000);
  CHECK(od.metrics.completed == 60);
  CHECK(exact.metrics.completed == 60);
  CHECK(od.result.breakdown.preemptions > 0);
  CHECK(od.result.breakdown.recomputed_tokens > 0);
  CHECK(exact.result.breakdown.preemptions == 0);
  CHECK(od.result.breakdown.peak_seqs > exact.result.breakdown.peak_seqs);
  CHECK(exact.result.breakdown.peak_seqs <= 22);
  // Recompute prefills the preempted tokens again.
  CHECK(od.result.breakdown.prefill_tokens > 60 * 500);
  CHECK(exact.result.breakdown.prefill_tokens == 60 * 500);
}

TEST_CASE("scheduler: swap keeps the work done and pays the transfer instead") {
  Run sw = run("tp=8,policy=on-demand,preemption=swap,swap_bw=1e9,max_context=2048", kTrace, 20000);
  CHECK(sw.metrics.completed == 60);
  CHECK(sw.result.breakdown.preemptions > 0);
  CHECK(sw.result.breakdown.recomputed_tokens == 0);
  CHECK(sw.result.breakdown.prefill_tokens == 60 * 500);
  Run fast = run("tp=8,policy=on-demand,preemption=swap,swap_bw=1e12,max_context=2048", kTrace, 20000);
  CHECK(sw.metrics.makespan_s > fast.metrics.makespan_s);
}

TEST_CASE("scheduler: reserving the maximum output admits fewer sequences than the true output would need") {
  // 30,000 tokens; prompts 500, outputs 400, max_context 2,048: reserve holds 2,048 per sequence.
  Run res = run("tp=8,policy=reserve,max_context=2048", kTrace, 30000);
  Run exact = run("tp=8,policy=reserve-exact,max_context=2048", kTrace, 30000);
  CHECK(res.result.breakdown.peak_seqs == 30000 / 2048);
  CHECK(exact.result.breakdown.peak_seqs == 30000 / 900);
  Run capped = run("tp=8,policy=reserve,max_output=400,max_context=2048", kTrace, 30000);
  CHECK(capped.result.breakdown.peak_seqs == exact.result.breakdown.peak_seqs);
}

TEST_CASE("scheduler: host costs add to every iteration — without CUDA graphs launches can outlast the GPU") {
  Run base = run("tp=8,step_overhead_ms=0,seq_overhead_us=0", kTrace);
  Run host = run("tp=8,step_overhead_ms=5,seq_overhead_us=0", kTrace);
  long steps = host.result.breakdown.steps;
  CHECK(host.metrics.makespan_s == doctest::Approx(base.metrics.makespan_s + steps * 5e-3).epsilon(0.02));
  Run slow = run("tp=8,step_overhead_ms=0,seq_overhead_us=0,cuda_graphs=off,launch_overhead_us=1000", kTrace);
  Run graphs = run("tp=8,step_overhead_ms=0,seq_overhead_us=0,cuda_graphs=on,launch_overhead_us=1000", kTrace);
  CHECK(graphs.metrics.makespan_s == doctest::Approx(base.metrics.makespan_s));
  CHECK(slow.metrics.makespan_s > 2 * base.metrics.makespan_s);
  CHECK(slow.result.breakdown.host_time > 0);
}

TEST_CASE("scheduler: an overlap scheduler hides the host's work behind the GPU step before it, up to that step's length") {
  Run base = run("tp=8,step_overhead_ms=0,seq_overhead_us=0", kTrace);
  // 5 ms of host work a step, shorter than the GPU step: only the first step (nothing before it to
  // hide behind) pays it; in series every step does (the test above).
  Run hidden = run("tp=8,step_overhead_ms=5,seq_overhead_us=0,overlap_schedule=on", kTrace);
  CHECK(hidden.result.breakdown.steps == base.result.breakdown.steps);
  CHECK(hidden.metrics.makespan_s == doctest::Approx(base.metrics.makespan_s + 5e-3));
  CHECK(hidden.result.breakdown.host_time == doctest::Approx(5e-3));
  // Longer than every GPU step: the host sets the pace, one step per 200 ms.
  Run bound = run("tp=8,step_overhead_ms=200,seq_overhead_us=0,overlap_schedule=on", kTrace);
  const double steps = static_cast<double>(bound.result.breakdown.steps);
  // (only prompt steps longer than 200 ms, a few, run past that pace)
  CHECK(bound.metrics.makespan_s > steps * 0.2);
  CHECK(bound.metrics.makespan_s < steps * 0.2 + 0.1 * base.metrics.makespan_s);
  Run serial = run("tp=8,step_overhead_ms=200,seq_overhead_us=0", kTrace);
  MESSAGE("makespan: no host " << base.metrics.makespan_s << " s, 200 ms overlapped " << bound.metrics.makespan_s << " s, in series "
                               << serial.metrics.makespan_s << " s over " << steps << " steps");
  CHECK(serial.metrics.makespan_s == doctest::Approx(base.metrics.makespan_s + steps * 0.2).epsilon(0.02));
}

TEST_CASE("steady state: throughput in the saturated window does not depend on how many requests ran") {
  auto tr = [](int n) {
    return "synthetic:n=" + std::to_string(n) + ",prompt=lognormal:400:0.8:2000,output=lognormal:300:0.6:1500,seed=5";
  };
  Run small = run("tp=8,max_seqs=64,max_context=4096", tr(400));
  Run large = run("tp=8,max_seqs=64,max_context=4096", tr(1600));
  CHECK(small.metrics.steady_trusted);
  CHECK(large.metrics.steady_trusted);
  CHECK(small.metrics.steady_start_s > 0);
  CHECK(large.metrics.steady_end_s < large.metrics.makespan_s);
  // Over the makespan the short run loses more to ramp-up and drain; the steady figures agree.
  CHECK(large.metrics.steady_output_tok_s == doctest::Approx(small.metrics.steady_output_tok_s).epsilon(0.05));
  CHECK(small.metrics.output_tok_s < 0.95 * small.metrics.steady_output_tok_s);
  // Too few requests to fill the batch twice: no trusted window, and it says so.
  Run tiny = run("tp=8,max_seqs=64,max_context=4096", tr(70));
  CHECK_FALSE(tiny.metrics.steady_trusted);
  CHECK_FALSE(tiny.metrics.steady_note.empty());
}

namespace {

// Every executed step's batch, group by group: (decode tokens, prompt tokens) per attention group.
struct Composition {
  std::vector<std::vector<std::pair<int, int>>> steps;
  std::vector<std::pair<long, long>> prompts;  // each prompt chunk run, in order: (request, first position)
  std::vector<int> prompt_tokens;              // per step
  ServingResult result;
};

Composition compositions(const std::string& model, const std::string& plan_text, const RequestTrace& trace, double kv_tokens = 0) {
  ModelSpec m = load_model(model);
  Cluster c = load_cluster("dgx-h100:1");
  Plan p = plan_from_string(plan_text, 8, plan_defaults(m));
  if (kv_tokens > 0) cut_kv(p, m, c, kv_tokens);
  AnalyticExecutor ex(c);
  ServingOptions o;
  o.set_exact();  // every step executed: the callback sees each one
  Composition out;
  o.on_executed_step = [&](int, const ReplicaBatch& b, const StepTiming&) {
    std::vector<std::pair<int, int>> g;
    int tokens = 0;
    for (const auto& group : b.groups) {
      int d = 0, pf = 0;
      for (const auto& w : group) {
        (w.decodes() ? d : pf) += w.new_tokens;
        if (!w.decodes()) out.prompts.emplace_back(w.request, w.first_pos);
      }
      g.emplace_back(d, pf);
      tokens += pf;
    }
    out.steps.push_back(std::move(g));
    out.prompt_tokens.push_back(tokens);
  };
  out.result = serve(p, m, c, trace, nullptr, ex, o);
  return out;
}
Composition compositions(const std::string& model, const std::string& plan_text, const std::string& trace, double kv_tokens = 0) {
  return compositions(model, plan_text, load_request_trace(trace), kv_tokens);
}

// Steps in which one group both decodes and prefills; steps in which one group prefills while
// another decodes.
std::pair<int, int> mixing(const Composition& c) {
  int within = 0, across = 0;
  for (const auto& s : c.steps) {
    bool any_decode = false, any_prefill = false;
    for (auto [d, p] : s) {
      within += d > 0 && p > 0;
      any_decode = any_decode || (d > 0 && p == 0);
      any_prefill = any_prefill || (p > 0 && d == 0);
    }
    across += any_decode && any_prefill;
  }
  return {within, across};
}

const char* kArrivals = "synthetic:n=80,prompt=fixed:600,output=fixed:100,rate=40,arrival=poisson,seed=3";

}  // namespace

TEST_CASE("scheduler: SGLang runs prefill first — a rank with prompt work decodes nothing that step, vLLM mixes them") {
  Composition v = compositions("llama3-70b", "tp=8,scheduler=vllm", kArrivals);
  Composition s = compositions("llama3-70b", "tp=8,scheduler=sglang", kArrivals);
  CHECK(mixing(v).first > 0);   // vLLM V1: decode tokens and prompt chunks in one step
  CHECK(mixing(s).first == 0);  // SGLang: never in one rank's step
  CHECK(s.result.breakdown.prefill_tokens == 80 * 600);
  // Prompts run without decode beside them, so first tokens come sooner; decode waits for every
  // prefill batch and then takes a step of its own, so the slowest inter-token gaps are longer.
  Metrics mv = summarize(v.result, ServingOptions{}, 8), ms = summarize(s.result, ServingOptions{}, 8);
  CHECK(ms.completed == 80);
  CHECK(s.steps.size() > v.steps.size());
  CHECK(ms.ttft_ms.p50 < mv.ttft_ms.p50);
  CHECK(ms.tpot_ms.p99 > mv.tpot_ms.p99);
}

TEST_CASE("scheduler: SGLang's attention-DP ranks choose prefill or decode each on their own") {
  Composition s = compositions("qwen3-30b-a3b", "tp=4,attn_dp=2,ep=8,scheduler=sglang", kArrivals);
  auto [within, across] = mixing(s);
  CHECK(within == 0);
  CHECK(across > 0);  // one rank prefills while the other decodes, in the same step
}

TEST_CASE("scheduler: SGLang keeps KV for the running requests' future tokens, so it preempts less than vLLM") {
  // 20,000 tokens of KV, prompts 500, outputs 400 (kTrace): vLLM admits on the prompt's blocks
  // alone and must preempt; SGLang reserves new_token_ratio of the outputs still to come.
  Composition v = compositions("llama3-70b", "tp=8,scheduler=vllm,kv_block=1,max_context=2048", kTrace, 20000);
  Composition s = compositions("llama3-70b", "tp=8,scheduler=sglang,kv_block=1,max_context=2048", kTrace, 20000);
  INFO("vLLM: ", v.result.breakdown.preemptions, " preemptions, peak ", v.result.breakdown.peak_seqs, "; SGLang: ",
       s.result.breakdown.preemptions, " preemptions, peak ", s.result.breakdown.peak_seqs);
  CHECK(v.result.breakdown.preemptions > 0);
  CHECK(s.result.breakdown.preemptions < v.result.breakdown.preemptions);
  // (Their peaks may meet: SGLang's reserve ratio decays step by step while nothing is preempted.)
  CHECK(s.result.breakdown.peak_seqs <= v.result.breakdown.peak_seqs);
  Metrics ms = summarize(s.result, ServingOptions{}, 8);
  CHECK(ms.completed == 60);
}

TEST_CASE("scheduler: without chunked context, prompts start whole and in order — the first that does not fit ends the step's prompts") {
  // TensorRT-LLM's micro-batch scheduler (and vLLM's with chunking off) stop at the first prompt
  // that does not fit the step's remaining tokens; a later, shorter one does not jump ahead.
  const char* varied = "synthetic:n=60,prompt=lognormal:700:0.9:3000,output=fixed:50,seed=11";
  for (const char* sched : {"trtllm", "vllm"}) {
    CAPTURE(sched);
    Composition c = compositions("llama3-70b", std::string("tp=8,prefill_chunk=0,max_batch_tokens=3000,scheduler=") + sched, varied);
    long next = 0;  // requests arrive in index order at t = 0: prompts must start in that order
    int budget_steps = 0;
    for (const auto& [req, pos] : c.prompts) {
      if (pos != 0) continue;  // whole prompts: every prompt starts at position 0, once
      CHECK(req == next);
      ++next;
    }
    CHECK(next == 60);
    for (int t : c.prompt_tokens) budget_steps += t > 3000;
    CHECK(budget_steps == 0);  // no step holds more prompt tokens than its budget (no prompt here exceeds it)
  }
}

TEST_CASE("scheduler: TensorRT-LLM places a request on the attention-DP rank with the fewest active prompt tokens") {
  // One long prompt, then short ones: by active prompt tokens the short ones all go to the other
  // rank until it holds as many tokens; by sequence count (vLLM) they alternate.
  RequestTrace t;
  t.requests.push_back(Request{0, 3000, 50, {}});
  for (int i = 0; i < 20; ++i) t.requests.push_back(Request{0, 100, 50, {}});
  auto groups = [&](const char* sched) {
    Composition c = compositions("qwen3-30b-a3b", std::string("tp=4,attn_dp=2,ep=8,scheduler=") + sched, t);
    int other = 0;
    for (std::size_t i = 1; i < c.result.requests.size(); ++i) other += c.result.requests[i].group != c.result.requests[0].group;
    return other;
  };
  CHECK(groups("trtllm") == 20);
  CHECK(groups("vllm") == 10);
}

TEST_CASE("scheduler: SGLang's DP controller sends requests to the attention-DP ranks round robin, each rank with its own queue") {
  // Every request starts on rank (arrival index mod 2), whatever the ranks' loads; a rank whose
  // queue head waits does not hold back the other rank's queue.
  RequestTrace t;
  for (int i = 0; i < 40; ++i) t.requests.push_back(Request{0.01 * i, i % 4 == 0 ? 3000 : 100, 50, {}});
  Composition s = compositions("qwen3-30b-a3b", "tp=4,attn_dp=2,ep=8,scheduler=sglang", t);
  for (std::size_t i = 0; i < s.result.requests.size(); ++i) {
    CAPTURE(i);
    CHECK(s.result.requests[i].completed);
    CHECK(s.result.requests[i].group == static_cast<int>(i % 2));
  }
  // Rank 0's second long prompt waits for KV room; rank 1's requests behind it in arrival order
  // start at once.
  RequestTrace tight;
  for (int p : {3000, 100, 3000, 100, 100, 100}) tight.requests.push_back(Request{0, p, 50, {}});
  Composition k = compositions("qwen3-30b-a3b", "tp=4,attn_dp=2,ep=8,scheduler=sglang,kv_block=1", tight, 4500);
  const auto& q = k.result.requests;
  CHECK(q[2].admitted >= q[0].finish);
  CHECK(q[3].admitted == 0);
  CHECK(q[5].admitted == 0);
  // vLLM's one queue puts a request on the least-loaded rank instead.
  Composition v = compositions("qwen3-30b-a3b", "tp=4,attn_dp=2,ep=8,scheduler=vllm", t);
  int off = 0;
  for (std::size_t i = 0; i < v.result.requests.size(); ++i) off += v.result.requests[i].group != static_cast<int>(i % 2);
  CHECK(off > 0);
}

TEST_CASE("scheduler: vLLM admits nobody in a step that preempted, admission-first schedulers do") {
  // The on-demand run above, paced so that requests keep arriving while the KV pool is full, every
  // step on the timeline (its admitted and preempted counts).
  ModelSpec m = load_model("llama3-70b");
  Cluster c = load_cluster("dgx-h100:1");
  AnalyticExecutor ex(c);
  auto steps = [&](const std::string& scheduler) {
    Plan p = plan_from_string("tp=8,policy=on-demand,kv_block=16,max_context=2048,scheduler=" + scheduler, 8, plan_defaults(m));
    cut_kv(p, m, c, 20000);
    ServingOptions o;
    o.timeline_steps = 1000000;
    const ServingResult r = serve(p, m, c, load_request_trace("synthetic:n=120,rate=40,prompt=fixed:500,output=fixed:400,seed=3"),
                                  nullptr, ex, o);
    REQUIRE(r.breakdown.preemptions > 0);
    int both = 0, preempting = 0;
    for (const TimelineStep& s : r.timeline_steps) {
      preempting += s.preempted > 0;
      both += s.preempted > 0 && s.admitted > 0;
    }
    CHECK(preempting > 0);
    return both;
  };
  CHECK(steps("vllm") == 0);
  CHECK(steps("trtllm") > 0);  // admission first: a step can admit and then preempt
}

TEST_CASE("scheduler: limits=rank gives every attention-DP rank its own sequences and token budget, as vLLM's and TensorRT-LLM's per-rank schedulers do") {
  // Mixtral-8x7B, eight attention-DP ranks on one node; 64 prompts of 1,000 tokens at once.
  ModelSpec m = load_model("mixtral-8x7b");
  Cluster c = load_cluster("dgx-h100:1");
  RequestTrace t = load_request_trace("synthetic:n=64,prompt=fixed:1000,output=fixed:8,seed=3");
  auto peak_step = [&](const std::string& limits, const std::string& sched) {
    Plan p = plan_from_string("tp=1,ep=8,attn_dp=8,max_seqs=4,max_batch_tokens=1000,prefill_chunk=1000,scheduler=" + sched + limits,
                              8, plan_defaults(m));
    AnalyticExecutor ex(c);
    ServingOptions o;
    o.offline = true;
    o.timeline_steps = 1000;
    ServingResult r = serve(p, m, c, t, nullptr, ex, o);
    int tokens = 0, running = 0;
    for (const auto& s : r.timeline_steps) {
      tokens = std::max(tokens, s.prefill_tokens + s.decode_tokens);
      running = std::max(running, s.running);
    }
    return std::pair{tokens, running};
  };
  for (const std::string sched : {"vllm", "trtllm"}) {
    CAPTURE(sched);
    // The engine's limits: the ranks share 1,000 tokens a step and 4 sequences (one each, rounded up).
    auto [tokens_engine, running_engine] = peak_step("", sched);
    CHECK(tokens_engine <= 1000);
    CHECK(running_engine <= 8);
    // Each rank's: 1,000 tokens and 4 sequences per rank, 8,000 and 32 in the engine.
    auto [tokens_rank, running_rank] = peak_step(",limits=rank", sched);
    CHECK(tokens_rank > 1000);
    CHECK(tokens_rank <= 8000);
    CHECK(running_rank > 8);
    CHECK(running_rank <= 32);
  }
  // The helpers say the same.
  Plan p = plan_from_string("tp=1,ep=8,attn_dp=8,max_seqs=4,max_batch_tokens=1000,limits=rank", 8, plan_defaults(m));
  CHECK(seqs_per_group(p.engine, 8) == 4);
  CHECK(tokens_per_group(p.engine, 8) == 1000);
  CHECK(engine_seqs(p.engine, 8) == 32);
  CHECK(engine_tokens(p.engine, 8) == 8000);
  p.engine.rank_limits = false;
  CHECK(seqs_per_group(p.engine, 8) == 1);
  CHECK(engine_seqs(p.engine, 8) == 4);
}
