// tests/sim/serving/prefix_cache_test.cpp — the prefix cache on its own (leading-run matches,
// references, LRU eviction tail first) and in the serving loop (cached prompt tokens skip prefill,
// the engine key turns it off, prefix-affinity dispatch finds more of them than round robin).
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "common/input_error.hpp"
#include "sim/plan/plan.hpp"
#include "sim/serving/metrics.hpp"
#include "sim/serving/prefix_cache.hpp"
#include "sim/serving/serving.hpp"
#include "sim/step/analytic_executor.hpp"
#include "topologies/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"

using namespace shardsim;

TEST_CASE("prefix cache: a hit is the leading run of held blocks, and unreferenced blocks are evicted LRU, tails first") {
  PrefixCache c(16);
  const std::vector<std::uint64_t> a{1, 2, 3, 4}, b{1, 2, 9}, z{7, 1, 2};
  CHECK(c.match(a) == 0);
  c.hold(a, 4);  // a's prompt computed
  CHECK(c.match(a) == 4);
  CHECK(c.match(b) == 2);  // shares a's first two blocks
  CHECK(c.match(z) == 0);  // the run must start at the first block
  CHECK(c.evictable_tokens() == 0);
  c.trim(0);  // referenced blocks are never evicted
  CHECK(c.match(a) == 4);
  c.hold(b, 3);  // b: hit on 1, 2; computed 9
  c.release(a, 4);
  CHECK(c.evictable_tokens() == 2 * 16);  // 3 and 4: 1 and 2 are still b's
  c.release(b, 3);
  CHECK(c.evictable_tokens() == 5 * 16);
  // a's tail (4, 3) is older than b's (9, then 2, 1): evict two blocks, a's tail goes first.
  c.trim(3 * 16);
  CHECK(c.evicted_blocks() == 2);
  CHECK(c.match(a) == 2);
  CHECK(c.match(b) == 3);
  c.trim(0);
  CHECK(c.match(b) == 0);
  CHECK_THROWS_AS(c.release(b, 1), std::logic_error);
}

TEST_CASE("prefix cache: a host tier keeps what GPU memory evicts, drops its own least recently used, and gives hits back") {
  PrefixCache c(16, 2 * 16);  // a host tier of two blocks
  const std::vector<std::uint64_t> a{1, 2, 3, 4};
  c.hold(a, 4);
  c.release(a, 4);  // tail first: 4 is the least recently used, 1 the most
  c.trim(0);        // all four leave GPU memory, oldest first: 4, 3, 2, 1; the host keeps the last two
  CHECK(c.evicted_blocks() == 4);
  CHECK(c.host_dropped_blocks() == 2);
  CHECK(c.evictable_tokens() == 0);
  const PrefixCache::Hit h = c.find(a, 4);
  CHECK(h.blocks == 2);
  CHECK(h.from_host == 2);
  CHECK(c.find(a, 1).blocks == 1);  // at most `limit`
  c.hold(a, 2);  // back in GPU memory
  CHECK(c.find(a, 4).from_host == 0);
  CHECK(c.find(a, 4).blocks == 2);
  // Without a host tier an evicted block is gone.
  PrefixCache g(16);
  g.hold(a, 4);
  g.release(a, 4);
  g.trim(0);
  CHECK(g.match(a) == 0);
  CHECK(g.host_dropped_blocks() == 0);
}

namespace {

struct Served {
  ServingResult r;
  Metrics m;
};

Served serve_trace(const std::string& plan_text, const RequestTrace& t, double rate = 0) {
  ModelSpec m = load_model("mixtral-8x7b");
  Cluster c = load_cluster("dgx-h100:1");
  Plan p = plan_from_string(plan_text, 8, plan_defaults(m));
  AnalyticExecutor ex(c);
  ServingOptions o;
  o.offline = rate <= 0;
  const RequestTrace paced = rate > 0 ? at_rate(t, rate, Arrival::Poisson, 1) : t;
  Served s{serve(p, m, c, paced, nullptr, ex, o), {}};
  s.m = summarize(s.r, o, 8);
  return s;
}

}  // namespace

TEST_CASE("prefix cache: a shared half of every prompt is prefilled once per replica, and the engine key turns it off") {
  // 1,024-token system prompt + 1,024 tokens of its own: about half of the prompt tokens are cached.
  const RequestTrace t = load_request_trace("synthetic:n=200,system=1024,prompt=fixed:1024,output=fixed:32,seed=4");
  const Served on = serve_trace("tp=2,dp=4", t, 20);
  const Served off = serve_trace("tp=2,dp=4,prefix_cache=off", t, 20);
  CHECK(on.m.completed == 200);
  CHECK(off.m.completed == 200);
  CHECK(off.r.breakdown.cached_tokens == 0);
  CHECK(off.r.breakdown.prefill_tokens == 200 * 2048);
  // Each replica computes the system prompt once (its first request), then finds it: the
  // prefill halves, less those first requests.
  const double ratio = static_cast<double>(on.r.breakdown.prefill_tokens) / static_cast<double>(off.r.breakdown.prefill_tokens);
  CHECK(ratio == doctest::Approx(0.5).epsilon(0.03));
  CHECK(on.r.breakdown.cached_tokens + on.r.breakdown.prefill_tokens == 200 * 2048);
  CHECK(on.r.breakdown.cached_tokens == static_cast<long>(200 - 4) * 1024);
  int hits = 0;
  for (const auto& q : on.r.requests) hits += q.cached_tokens == 1024;
  CHECK(hits == 196);
  // Less prefill: a shorter first token.
  CHECK(on.m.ttft_ms.p50 < 0.8 * off.m.ttft_ms.p50);
  // A prompt that is all cached still computes its last token. (Paced: prompts admitted in one
  // step find nothing, their blocks enter the cache once computed.)
  RequestTrace same = load_request_trace("synthetic:n=20,system=1024,prompt=fixed:1,output=fixed:4,block=1");
  for (auto& q : same.requests) q.prefix_blocks.resize(1024), q.prompt_tokens = 1024;  // the system prompt alone
  const Served all = serve_trace("tp=8", same, 5);
  CHECK(all.m.completed == 20);
  CHECK(all.r.breakdown.prefill_tokens == 1024 + 19);
}

TEST_CASE("prefix cache: prefix-affinity dispatch sends a prompt where its prefix went") {
  // 40 system prompts of 2,048 tokens over 4 replicas: round robin spreads each over all four, so
  // each replica computes each system prompt; affinity computes each once.
  const RequestTrace t = load_request_trace("synthetic:n=400,system=2048:40,prompt=fixed:64,output=fixed:8,seed=9");
  const Served rr = serve_trace("tp=2,dp=4", t, 40);
  const Served aff = serve_trace("tp=2,dp=4,dispatch=prefix", t, 40);
  CHECK(rr.m.completed == 400);
  CHECK(aff.m.completed == 400);
  CHECK(aff.r.breakdown.prefill_tokens < rr.r.breakdown.prefill_tokens);
  CHECK(aff.r.breakdown.cached_tokens == static_cast<long>(400 - 40) * 2048);
  // Each system prompt's requests all went to one replica.
  std::vector<int> where(40, -1);
  bool together = true;
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    const auto& q = aff.r.requests[i];
    int sys = -1;
    for (std::size_t j = 0; j < i && sys < 0; ++j)
      if (t.requests[j].prefix_blocks[0] == t.requests[i].prefix_blocks[0]) sys = aff.r.requests[j].replica;
    together = together && (sys < 0 || sys == q.replica);
  }
  CHECK(together);
  // The plan string carries both keys.
  ModelSpec m = load_model("mixtral-8x7b");
  const Plan p = plan_from_string("tp=2,dp=4,dispatch=prefix,prefix_cache=off", 8, plan_defaults(m));
  const std::string s = plan_to_string(p);
  CHECK(s.find("dispatch=prefix") != std::string::npos);
  CHECK(s.find("prefix_cache=off") != std::string::npos);
  CHECK_THROWS_AS(plan_from_string("tp=2,dp=4,dispatch=nearest", 8, plan_defaults(m)), InputError);
}

TEST_CASE("prefix cache: conversations find their earlier turns, answers included, up to the trace's ceiling") {
  // 4-turn conversations, 30 s apart on average: one replica finds almost every earlier turn; four
  // replicas dealt round robin find a turn's history only where it went before, prefix dispatch
  // keeps a conversation on one replica.
  const RequestTrace t = load_request_trace("synthetic:n=400,turns=4,think=30,rate=4,prompt=fixed:200,output=fixed:100,seed=5");
  const double ceiling = prefix_reuse(t).ceiling();
  CHECK(ceiling > 0.5);
  auto hit_rate = [](const Served& s) {
    return static_cast<double>(s.r.breakdown.cached_tokens) / static_cast<double>(s.r.breakdown.prompt_tokens_admitted);
  };
  const RequestTrace paced = t;  // the trace's own arrivals
  ModelSpec m = load_model("mixtral-8x7b");
  Cluster c = load_cluster("dgx-h100:1");
  AnalyticExecutor ex(c);
  ServingOptions o;
  auto run = [&](const char* plan) {
    Served s{serve(plan_from_string(plan, 8, plan_defaults(m)), m, c, paced, nullptr, ex, o), {}};
    s.m = summarize(s.r, o, 8);
    return s;
  };
  const Served one = run("tp=8"), rr = run("tp=2,dp=4"), aff = run("tp=2,dp=4,dispatch=prefix");
  CHECK(one.m.completed == 400);
  CHECK(hit_rate(one) <= ceiling + 1e-12);
  CHECK(hit_rate(one) > 0.97 * ceiling);
  CHECK(hit_rate(aff) > 0.97 * ceiling);
  CHECK(hit_rate(rr) < 0.5 * hit_rate(aff));
}

TEST_CASE("prefix cache: host memory (kv_host_gb) serves prefixes GPU memory had to evict, copied back at swap_bw") {
  // 100 system prompts of 8,192 tokens, more than the cut GPU KV keeps beside the running work.
  const RequestTrace t = load_request_trace("synthetic:n=400,system=8192:100,prompt=fixed:256,output=fixed:32,rate=4,seed=3");
  const Served gpu = serve_trace("tp=8,mem_util=0.3", t, 4);
  const Served host = serve_trace("tp=8,mem_util=0.3,kv_host_gb=50", t, 4);
  CHECK(gpu.m.completed == 400);
  CHECK(host.m.completed == 400);
  CHECK(gpu.r.breakdown.prefix_evicted_blocks > 0);
  CHECK(gpu.r.breakdown.host_cached_tokens == 0);
  CHECK(host.r.breakdown.host_cached_tokens > 0);
  CHECK(host.r.breakdown.cached_tokens > gpu.r.breakdown.cached_tokens);
  CHECK(host.r.breakdown.cached_tokens - host.r.breakdown.host_cached_tokens <= gpu.r.breakdown.cached_tokens);
  CHECK(host.r.breakdown.prefill_tokens < gpu.r.breakdown.prefill_tokens);
  // The copies back are host time: at a slower link they cost more.
  const Served slow = serve_trace("tp=8,mem_util=0.3,kv_host_gb=50,swap_bw=1e9", t, 4);
  CHECK(slow.r.breakdown.host_time > host.r.breakdown.host_time);
}
