// tests/workloads/trace_test.cpp — request traces (Azure, Mooncake, synthetic) and expert routing (SSRT
// files, the synthetic generator, load statistics, placements), plus the `trace` command line.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "common/input_error.hpp"
#include "tests/cli_runner.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

using namespace shardsim;

namespace {

// A fresh file path in the temp directory, removed at scope exit.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name) {
    static int counter = 0;
    path = (std::filesystem::temp_directory_path() /
            ("shardsim_trace_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + name))
               .string();
  }
  void write(const std::string& bytes) const {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

// The message of the InputError `fn` throws ("" if none).
template <class Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<ExpertId> route_all(const RoutingSource& src, std::uint32_t request, std::uint32_t first, std::uint32_t count) {
  std::vector<ExpertId> out(count * src.shape().ids_per_token());
  src.route_tokens(request, first, count, out);
  return out;
}

const RoutingShape kDeepSeek{58, 256, 8, 8, 4};
const RoutingShape kMixtral{32, 8, 2, 1, 1};

}  // namespace

// ---- request traces ----------------------------------------------------------------------------

TEST_CASE("request trace: embedded Azure conversation trace") {
  RequestTrace t = load_request_trace("azure-conv");
  REQUIRE(t.requests.size() == 19366);
  CHECK(t.source == "azure-conv");
  // First rows: 18:15:46.6805900,374,44 then 18:15:50.9951690,396,109.
  CHECK(t.requests[0].arrival_s == 0.0);
  CHECK(t.requests[0].prompt_tokens == 374);
  CHECK(t.requests[0].output_tokens == 44);
  CHECK(t.requests[1].arrival_s == doctest::Approx(4.314579).epsilon(1e-9));
  CHECK(t.requests[1].prompt_tokens == 396);
  CHECK(t.requests[1].output_tokens == 109);
  CHECK(std::is_sorted(t.requests.begin(), t.requests.end(),
                       [](const Request& a, const Request& b) { return a.arrival_s < b.arrival_s; }));
  // Last row 19:14:08.4025270: 58 min 21.7219370 s after the first.
  CHECK(t.requests.back().arrival_s == doctest::Approx(3501.721937).epsilon(1e-9));
  auto s = request_trace_stats(t);
  CHECK(s.count == 19366);
  CHECK(s.prompt.mean == doctest::Approx(1154.70).epsilon(1e-4));
  CHECK(s.output.mean == doctest::Approx(211.13).epsilon(1e-4));
  CHECK(s.prompt.p50 == 1020);
}

TEST_CASE("request trace: Azure CSV rows are sorted and checked") {
  std::string csv =
      "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
      "2023-11-16 18:00:02.5,100,10\r\n"
      "2023-11-16 18:00:01.0,200,20\r\n"
      "2023-11-16 18:00:03,300,0\r\n";
  RequestTrace t = parse_azure_csv(csv, "x.csv");
  REQUIRE(t.requests.size() == 3);
  CHECK(t.requests[0].prompt_tokens == 200);
  CHECK(t.requests[1].arrival_s == doctest::Approx(1.5));
  CHECK(t.requests[2].arrival_s == doctest::Approx(2.0));
  CHECK(t.requests[2].output_tokens == 0);
  // Across midnight and a month end.
  RequestTrace m = parse_azure_csv("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-02-28 23:59:59,1,1\n2024-03-01 00:00:01,1,1\n", "m.csv");
  CHECK(m.requests[1].arrival_s == doctest::Approx(86400 + 2));

  const std::string head = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,1,1\n";
  CHECK(contains(message_of([&] { parse_azure_csv(head + "2023-11-16 18:00:01,5\n", "a.csv"); }),
                 "a.csv: line 3: expected 3 columns"));
  CHECK(contains(message_of([&] { parse_azure_csv(head + "2023-11-16 18:00:01,five,1\n", "a.csv"); }),
                 "a.csv: line 3: ContextTokens: expected a whole number of tokens, got \"five\""));
  CHECK(contains(message_of([&] { parse_azure_csv(head + "2023-11-16 18:00:01,5,-3\n", "a.csv"); }),
                 "line 3: GeneratedTokens: negative token count -3"));
  CHECK(contains(message_of([&] { parse_azure_csv(head + "yesterday,5,3\n", "a.csv"); }), "line 3: TIMESTAMP"));
  CHECK(contains(message_of([&] { parse_azure_csv(head + "2023-13-16 18:00:01,5,3\n", "a.csv"); }), "line 3: TIMESTAMP"));
  CHECK(contains(message_of([&] { parse_azure_csv("", "e.csv"); }), "e.csv: empty file"));
  CHECK(contains(message_of([&] { parse_azure_csv("a,b,c\n1,2,3\n", "h.csv"); }), "h.csv: line 1: expected the header"));
  CHECK(contains(message_of([&] { parse_azure_csv("TIMESTAMP,ContextTokens,GeneratedTokens\n", "h.csv"); }), "no requests"));
}

TEST_CASE("request trace: Mooncake JSONL") {
  std::string jsonl =
      "{\"timestamp\": 27482, \"input_length\": 6955, \"output_length\": 52, \"hash_ids\": [46, 47, 48]}\n"
      "{\"timestamp\": 0, \"input_length\": 6472, \"output_length\": 26, \"hash_ids\": [0, 1]}\n"
      "\n"
      "{\"timestamp\": 30000, \"input_length\": 100, \"output_length\": 1}\n";
  RequestTrace t = parse_mooncake_jsonl(jsonl, "m.jsonl");
  REQUIRE(t.requests.size() == 3);
  CHECK(t.requests[0].prompt_tokens == 6472);
  CHECK(t.requests[0].arrival_s == 0);
  CHECK(t.requests[1].arrival_s == doctest::Approx(27.482));
  CHECK(t.requests[1].output_tokens == 52);
  CHECK(t.requests[2].arrival_s == doctest::Approx(30.0));
  // hash_ids: the prompt's 512-token blocks by prefix id, carried with their request through the sort.
  CHECK(t.prefix_block_tokens == 512);
  CHECK(t.requests[0].prefix_blocks == std::vector<std::uint64_t>{0, 1});
  CHECK(t.requests[1].prefix_blocks == std::vector<std::uint64_t>{46, 47, 48});
  CHECK(t.requests[2].prefix_blocks.empty());
  CHECK(contains(message_of([&] { parse_mooncake_jsonl("{\"timestamp\": 1, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1, 2, 3]}\n", "m.jsonl"); }),
                 "m.jsonl: line 1: /hash_ids: 3 block ids for input_length 600, at most 2 at Mooncake's 512 tokens per block"));
  CHECK(contains(message_of([&] { parse_mooncake_jsonl("{\"timestamp\": 1, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [-1]}\n", "m.jsonl"); }),
                 "line 1: /hash_ids: expected non-negative integer block ids, got -1"));
  CHECK(contains(message_of([&] { parse_mooncake_jsonl("{\"timestamp\": 1, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": 7}\n", "m.jsonl"); }),
                 "line 1: /hash_ids: expected an array"));

  CHECK(contains(message_of([&] { parse_mooncake_jsonl("{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1}\n{bad\n", "m.jsonl"); }),
                 "m.jsonl: line 2, column"));
  CHECK(contains(message_of([&] { parse_mooncake_jsonl("{\"timestamp\": 1, \"input_length\": \"5\", \"output_length\": 1}\n", "m.jsonl"); }),
                 "m.jsonl: line 1: /input_length: expected an integer"));
  CHECK(contains(message_of([&] { parse_mooncake_jsonl("{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1, \"x\": 2}\n", "m.jsonl"); }),
                 "line 1: /x: unknown key"));
  CHECK(contains(message_of([&] { parse_mooncake_jsonl(" \n", "m.jsonl"); }), "empty file"));

  // load_request_trace tells the formats apart by the first character.
  TempFile f("m.jsonl");
  f.write(jsonl);
  CHECK(load_request_trace(f.path).requests.size() == 3);
  TempFile c("a.csv");
  c.write("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,1,1\n");
  CHECK(load_request_trace(c.path).requests.size() == 1);
  CHECK(contains(message_of([] { load_request_trace("/nonexistent/trace.csv"); }), "/nonexistent/trace.csv: cannot open"));
}

TEST_CASE("request trace: synthetic Poisson and gamma arrivals, lengths, seeds") {
  RequestTrace p = load_request_trace("synthetic:rate=4,n=20000,seed=3");
  REQUIRE(p.requests.size() == 20000);
  CHECK(p.requests.front().arrival_s == 0);
  double mean_gap = p.requests.back().arrival_s / (p.requests.size() - 1);
  CHECK(mean_gap == doctest::Approx(0.25).epsilon(0.03));
  double var = 0;
  for (std::size_t i = 1; i < p.requests.size(); ++i) {
    double g = p.requests[i].arrival_s - p.requests[i - 1].arrival_s;
    var += (g - mean_gap) * (g - mean_gap);
  }
  CHECK(std::sqrt(var / (p.requests.size() - 1)) / mean_gap == doctest::Approx(1.0).epsilon(0.05));  // exponential: CV 1

  RequestTrace g = load_request_trace("synthetic:rate=2,arrival=gamma,cv=3,n=40000,seed=3");
  double gmean = g.requests.back().arrival_s / (g.requests.size() - 1);
  CHECK(gmean == doctest::Approx(0.5).epsilon(0.06));
  double gvar = 0;
  for (std::size_t i = 1; i < g.requests.size(); ++i) {
    double d = g.requests[i].arrival_s - g.requests[i - 1].arrival_s;
    gvar += (d - gmean) * (d - gmean);
  }
  CHECK(std::sqrt(gvar / (g.requests.size() - 1)) / gmean == doctest::Approx(3.0).epsilon(0.15));

  RequestTrace c = load_request_trace("synthetic:rate=10,arrival=constant,n=11,prompt=fixed:512,output=uniform:10:20");
  CHECK(c.requests.back().arrival_s == doctest::Approx(1.0));
  for (const auto& r : c.requests) {
    CHECK(r.prompt_tokens == 512);
    CHECK(r.output_tokens >= 10);
    CHECK(r.output_tokens <= 20);
  }
  auto ln = request_trace_stats(load_request_trace("synthetic:n=20000,prompt=lognormal:800:0.5,seed=9"));
  CHECK(ln.prompt.mean == doctest::Approx(800).epsilon(0.03));

  // Same seed → same trace; another seed → another trace.
  auto a = load_request_trace("synthetic:n=200,seed=7"), b = load_request_trace("synthetic:n=200,seed=7"),
       d = load_request_trace("synthetic:n=200,seed=8");
  bool same = true, differ = false;
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    same = same && a.requests[i].arrival_s == b.requests[i].arrival_s && a.requests[i].prompt_tokens == b.requests[i].prompt_tokens &&
           a.requests[i].output_tokens == b.requests[i].output_tokens;
    differ = differ || a.requests[i].prompt_tokens != d.requests[i].prompt_tokens;
  }
  CHECK(same);
  CHECK(differ);
  CHECK(load_request_trace("synthetic").requests.size() == 1000);
}

TEST_CASE("request trace: synthetic spec errors name the parameter") {
  CHECK(contains(message_of([] { load_request_trace("synthetic:rate=5,burst=2"); }),
                 "synthetic:rate=5,burst=2: burst: unknown parameter (known: n, rate, arrival, cv, prompt, output, seed, system, block, turns, think)"));
  CHECK(contains(message_of([] { load_request_trace("synthetic:system=big"); }), "system: expected TOKENS[:COUNT]"));
  CHECK(contains(message_of([] { load_request_trace("synthetic:system=512:0"); }), "system: expected TOKENS[:COUNT]"));
  CHECK(contains(message_of([] { load_request_trace("synthetic:system="); }), "system: expected TOKENS[:COUNT]"));
  CHECK(contains(message_of([] { load_request_trace("synthetic:rate=fast"); }), "rate: expected a number, got \"fast\""));
  CHECK(contains(message_of([] { load_request_trace("synthetic:rate=0"); }), "rate: value 0 out of range"));
  CHECK(contains(message_of([] { load_request_trace("synthetic:cv=2"); }), "cv: applies only to arrival=gamma"));
  CHECK(contains(message_of([] { load_request_trace("synthetic:arrival=bursty"); }), "arrival: unknown value \"bursty\""));
  CHECK(contains(message_of([] { load_request_trace("synthetic:prompt=normal:5"); }), "prompt: expected fixed:N"));
  CHECK(contains(message_of([] { load_request_trace("synthetic:n=5,n=6"); }), "n: given twice"));
  CHECK(contains(message_of([] { load_request_trace("synthetic:n"); }), "expected key=value"));
  CHECK(contains(message_of([] { load_request_trace("synthetic:seed=-1"); }), "seed: expected an unsigned"));
}

TEST_CASE("request trace: synthetic shared system prompts carry prefix blocks") {
  RequestTrace t = load_request_trace("synthetic:n=200,system=100:3,block=16,prompt=fixed:40,output=fixed:5,seed=2");
  CHECK(t.prefix_block_tokens == 16);
  std::map<std::vector<std::uint64_t>, int> systems;  // the 6 whole system-prompt blocks (96 tokens)
  for (const Request& r : t.requests) {
    CHECK(r.prompt_tokens == 140);
    REQUIRE(r.prefix_blocks.size() == 10);  // ⌈(140 + 5) / 16⌉: the prompt's and its answer's blocks
    systems[std::vector<std::uint64_t>(r.prefix_blocks.begin(), r.prefix_blocks.begin() + 6)]++;
  }
  CHECK(systems.size() == 3);  // three system prompts, each drawn by about a third
  for (const auto& [blocks, n] : systems) CHECK(n > 40);
  // The requests' own blocks are their own.
  std::set<std::uint64_t> own;
  for (const Request& r : t.requests) own.insert(r.prefix_blocks.begin() + 6, r.prefix_blocks.end());
  CHECK(own.size() == 200 * 4);
  // Without system= there are none, and the drawn lengths are those of the same seed.
  RequestTrace plain = load_request_trace("synthetic:n=200,prompt=lognormal:40:0.5,output=fixed:5,seed=2");
  RequestTrace sys = load_request_trace("synthetic:n=200,system=100,prompt=lognormal:40:0.5,output=fixed:5,seed=2");
  CHECK(plain.prefix_block_tokens == 0);
  CHECK(plain.requests[7].prefix_blocks.empty());
  CHECK(sys.requests[7].prompt_tokens == plain.requests[7].prompt_tokens + 100);
}

TEST_CASE("request trace: synthetic conversations repeat their earlier turns, and the reuse ceiling counts it") {
  // 3 turns: turn k's prompt = the earlier turns' messages and answers + its own 100-token message.
  RequestTrace t = load_request_trace("synthetic:n=300,turns=3,think=5,prompt=fixed:100,output=fixed:60,block=16,seed=3");
  REQUIRE(t.requests.size() == 300);
  std::map<int, int> by_length;
  for (std::size_t i = 0; i < t.requests.size(); ++i) {
    by_length[t.requests[i].prompt_tokens]++;
    if (i > 0) CHECK(t.requests[i].arrival_s >= t.requests[i - 1].arrival_s);
  }
  CHECK(by_length == std::map<int, int>{{100, 100}, {260, 100}, {420, 100}});
  // A later turn starts with its conversation's earlier blocks: each 260-token turn shares its
  // first 6 whole blocks (96 tokens of the 100-token first message) with exactly one 100-token turn
  // that arrived before it.
  for (const Request& r : t.requests) {
    if (r.prompt_tokens != 260) continue;
    int parents = 0;
    for (const Request& q : t.requests)
      if (q.prompt_tokens == 100 && std::equal(q.prefix_blocks.begin(), q.prefix_blocks.begin() + 6, r.prefix_blocks.begin())) {
        ++parents;
        CHECK(q.arrival_s <= r.arrival_s);
      }
    CHECK(parents == 1);
  }
  // The ceiling: every whole block of the earlier turns, answers included, is found again.
  const PrefixReuse u = prefix_reuse(t);
  CHECK(u.block_tokens == 16);
  CHECK(u.prompt_tokens == 100 * (100 + 260 + 420));
  // Turn 2 finds turn 1's prompt and answer (160 tokens, 10 whole blocks), turn 3 turn 2's
  // (320 tokens), turn 1 nothing.
  CHECK(u.reusable_tokens == 100 * (160 + 320));
  CHECK(u.ceiling() == doctest::Approx(480.0 / 780.0));
  // One turn: the trace of before (same lengths, arrivals and system prompts).
  RequestTrace one = load_request_trace("synthetic:n=50,turns=1,system=64:2,seed=8");
  RequestTrace plain = load_request_trace("synthetic:n=50,system=64:2,seed=8");
  for (std::size_t i = 0; i < 50; ++i) {
    CHECK(one.requests[i].arrival_s == plain.requests[i].arrival_s);
    CHECK(one.requests[i].prefix_blocks == plain.requests[i].prefix_blocks);
  }
  CHECK(prefix_reuse(load_request_trace("synthetic:n=50")).block_tokens == 0);
  CHECK(contains(message_of([] { load_request_trace("synthetic:think=3"); }), "think: applies only to turns > 1"));
  // Prefix ids are 8 bytes each: a spec that would need more than 20 million is refused, not run out of memory.
  CHECK(contains(message_of([] { load_request_trace("synthetic:n=20000,turns=1000,prompt=fixed:100000,block=1"); }),
                 "block: the trace's prefix blocks would pass 20000000 ids"));
}

TEST_CASE("request trace: head, rate scaling and statistics") {
  RequestTrace t = load_request_trace("synthetic:n=100,rate=2,arrival=constant,prompt=fixed:10,output=fixed:5");
  RequestTrace h = head(t, 10);
  CHECK(h.requests.size() == 10);
  CHECK(head(t, 1000).requests.size() == 100);
  RequestTrace fast = scale_rate(t, 2.0);
  CHECK(fast.requests.back().arrival_s == doctest::Approx(t.requests.back().arrival_s / 2));
  auto s = request_trace_stats(fast);
  CHECK(s.rate_per_s == doctest::Approx(4.0));
  CHECK(s.prompt.p99 == 10);
  CHECK(s.output_tokens_total == 500);
  CHECK_THROWS_AS(scale_rate(t, 0), InputError);
  auto d = distribution_of({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  CHECK(d.p50 == 5);
  CHECK(d.p90 == 9);
  CHECK(d.p99 == 10);
  CHECK(d.mean == doctest::Approx(5.5));
}

// ---- routing: files ----------------------------------------------------------------------------

TEST_CASE("routing: SSRT write → read round trip") {
  for (RoutingShape shape : {kDeepSeek, kMixtral, RoutingShape{3, 300, 4, 1, 1}}) {
    CAPTURE(to_string(shape));
    auto src = make_routing("synthetic:locality=0.3,seed=11", shape);
    std::vector<std::uint32_t> counts = {5, 1, 17, 3};
    std::string image = encode_routing_trace(*src, counts);
    std::size_t id_bytes = shape.experts <= 256 ? 1 : 2;
    CHECK(image.size() == 24 + 4 * counts.size() + 26 * shape.ids_per_token() * id_bytes);
    CHECK(image.substr(0, 4) == "SSRT");

    TempFile f("rt.ssrt");
    f.write(image);
    RoutingTraceFile file = RoutingTraceFile::open(f.path);
    CHECK(file.shape().moe_layers == shape.moe_layers);
    CHECK(file.shape().experts == shape.experts);
    CHECK(file.shape().top_k == shape.top_k);
    CHECK(file.num_requests() == 4);
    CHECK(file.stored_tokens(2) == 17);
    CHECK(file.total_tokens() == 26);
    for (std::uint32_t r = 0; r < counts.size(); ++r) {
      CHECK(route_all(file, r, 0, counts[r]) == route_all(*src, r, 0, counts[r]));
      std::vector<ExpertId> one(shape.top_k), expect(shape.top_k);
      file.route(r, counts[r] - 1, shape.moe_layers - 1, one);
      src->route(r, counts[r] - 1, shape.moe_layers - 1, expect);
      CHECK(one == expect);
    }
    // Beyond the stored requests and tokens: wraps around.
    CHECK(route_all(file, 6, 0, 3) == route_all(file, 2, 0, 3));
    CHECK(route_all(file, 2, 17 + 4, 1) == route_all(file, 2, 4, 1));
    // Explicit ids give the same image.
    std::vector<ExpertId> ids;
    for (std::uint32_t r = 0; r < counts.size(); ++r) {
      auto part = route_all(*src, r, 0, counts[r]);
      ids.insert(ids.end(), part.begin(), part.end());
    }
    CHECK(encode_routing_trace(shape, counts, ids) == image);
  }
}

TEST_CASE("routing: truncated or corrupt SSRT files are refused naming the offset") {
  auto src = make_routing("uniform", kMixtral);
  std::vector<std::uint32_t> counts = {4, 4};
  const std::string image = encode_routing_trace(*src, counts);  // 24 + 8 + 8·64 = 544 bytes
  REQUIRE(image.size() == 544);
  auto err = [](std::string bytes) { return message_of([&] { RoutingTraceFile(bytes, "t.ssrt"); }); };
  CHECK(contains(err(image.substr(0, 543)), "t.ssrt: byte offset 543 (expert ids): truncated"));
  CHECK(contains(err(image.substr(0, 22)), "t.ssrt: byte offset 20 (num_requests): truncated"));
  CHECK(contains(err(image.substr(0, 30)), "byte offset 24 (token counts of 2 requests): truncated"));
  CHECK(contains(err(""), "byte offset 0 (magic): truncated"));
  CHECK(contains(err("XSRT" + image.substr(4)), "byte offset 0 (magic): not a shardsim routing trace"));
  std::string v2 = image;
  v2[4] = 2;
  CHECK(contains(err(v2), "byte offset 4 (version): unsupported version 2"));
  std::string k0 = image;
  k0[16] = 0;
  CHECK(contains(err(k0), "byte offset 16 (top_k): value 0 out of range [1, 8]"));
  CHECK(contains(err(image + "x"), "byte offset 544 (end of expert ids): 1 unexpected trailing bytes"));
  std::string bad = image;
  bad[24 + 8 + 64 + 5] = 9;  // request 0, token 1, layer 2, second id
  CHECK(contains(err(bad), "byte offset 101 (expert id of request 0, token 1, MoE layer 2): expert 9 out of range [0, 8)"));
  std::string zero = image;
  zero[28] = 0;
  CHECK(contains(err(zero), "byte offset 28 (tokens of request 1)"));
  CHECK(contains(message_of([] { RoutingTraceFile::open("/nonexistent.ssrt"); }), "/nonexistent.ssrt: cannot open"));
}

TEST_CASE("routing: make_routing checks a file's shape against the model") {
  auto src = make_routing("uniform", kMixtral);
  std::vector<std::uint32_t> counts = {2};
  TempFile f("m.ssrt");
  f.write(encode_routing_trace(*src, counts));
  CHECK(make_routing(f.path, kMixtral)->shape().experts == 8);
  CHECK(contains(message_of([&] { make_routing(f.path, kDeepSeek); }),
                 "routing trace has 32 MoE layers × 8 experts, top-2 but the model has 58 MoE layers × 256 experts, top-8"));
  CHECK(contains(message_of([] { make_routing("synthetic:zipf=1,temperature=3", kMixtral); }), "temperature: unknown parameter"));
  CHECK(contains(message_of([] { make_routing("synthetic:locality=1.5", kMixtral); }), "locality: value 1.5 out of range"));
  CHECK(contains(message_of([] { make_routing("synthetic:zipf=1,alpha=2", kMixtral); }), "alpha: applies only to dist=dirichlet"));
  CHECK(contains(message_of([] { make_routing("synthetic:groups=3", kDeepSeek); }), "groups: 3 groups do not divide 256 experts"));
  CHECK(contains(message_of([] { make_routing("synthetic:groups=8,topk_groups=9", kDeepSeek); }), "topk_groups"));
  CHECK(contains(message_of([] { make_routing("synthetic:groups=8,topk_groups=1", RoutingShape{4, 16, 4, 1, 1}); }),
                 "topk_groups: 1 of 8 groups hold 2 experts, fewer than top_k = 4"));
}

// ---- routing: the synthetic generator ------------------------------------------------------------

TEST_CASE("routing: synthetic tokens get top_k distinct experts in range") {
  const char* specs[] = {"uniform", "synthetic", "synthetic:zipf=2,locality=0.5,affinity=0.8,beta=0.5,drift=0.5,drift_period=3",
                         "synthetic:dist=dirichlet,alpha=0.05,affinity=1,fanout=1", "synthetic:zipf=6",
                         "synthetic:zipf=10,affinity=1,fanout=16,drift=10"};
  for (RoutingShape shape : {kDeepSeek, kMixtral, RoutingShape{4, 64, 6, 4, 2}, RoutingShape{2, 3, 3, 1, 1}}) {
    for (const char* spec : specs) {
      CAPTURE(spec);
      CAPTURE(to_string(shape));
      auto src = make_routing(spec, shape);
      for (std::uint32_t r = 0; r < 12; ++r) {
        auto ids = route_all(*src, r, 0, 40);
        for (std::size_t i = 0; i < ids.size(); i += shape.top_k) {
          std::set<ExpertId> s(ids.begin() + i, ids.begin() + i + shape.top_k);
          REQUIRE(s.size() == static_cast<std::size_t>(shape.top_k));
          REQUIRE(*s.rbegin() < shape.experts);
        }
      }
    }
  }
}

TEST_CASE("routing: group-limited top-k uses at most topk_group groups") {
  for (const char* spec : {"synthetic", "synthetic:zipf=1.2,affinity=0.9", "uniform"}) {
    CAPTURE(spec);
    auto src = make_routing(spec, kDeepSeek);
    std::set<int> used_groups_all;
    for (std::uint32_t r = 0; r < 20; ++r) {
      auto ids = route_all(*src, r, 0, 30);
      for (std::size_t i = 0; i < ids.size(); i += 8) {
        std::set<int> groups;
        for (int j = 0; j < 8; ++j) groups.insert(ids[i + j] / 32);
        REQUIRE(groups.size() <= 4);
        used_groups_all.insert(groups.begin(), groups.end());
      }
    }
    CHECK(used_groups_all.size() == 8);
  }
  // groups= overrides the model: 2 of 16 groups of 16 experts.
  auto src = make_routing("synthetic:groups=16,topk_groups=2", kDeepSeek);
  auto ids = route_all(*src, 0, 0, 50);
  for (std::size_t i = 0; i < ids.size(); i += 8) {
    std::set<int> groups;
    for (int j = 0; j < 8; ++j) groups.insert(ids[i + j] / 16);
    REQUIRE(groups.size() <= 2);
  }
}

TEST_CASE("routing: Zipf skew shows in the imbalance ratio") {
  const RoutingShape shape{4, 64, 4, 1, 1};
  auto ratio = [&](const std::string& spec) {
    auto src = make_routing(spec, shape);
    ExpertLoad load(shape);
    for (std::uint32_t r = 0; r < 2000; ++r) load.add(route_all(*src, r, 0, 10));
    CHECK(load.tokens() == 20000);
    double worst = 0;
    for (int l = 0; l < shape.moe_layers; ++l) worst = std::max(worst, imbalance_of(load.layer(l)).ratio);
    return worst;
  };
  double uniform = ratio("synthetic:zipf=0,beta=0,locality=0,affinity=0");
  double skewed = ratio("synthetic:zipf=1.2,beta=0,locality=0,affinity=0");
  CHECK(uniform < 1.15);
  CHECK(skewed > 3.0);
  CHECK(ratio("uniform") < 1.15);
}

TEST_CASE("routing: locality=1 reuses the previous token's experts, locality=0 does not") {
  auto sticky = make_routing("synthetic:locality=1", kDeepSeek);
  auto ids = route_all(*sticky, 3, 0, 20);
  const std::size_t n = kDeepSeek.ids_per_token();
  for (std::size_t t = 1; t < 20; ++t) REQUIRE(std::equal(ids.begin(), ids.begin() + n, ids.begin() + t * n));
  CHECK(route_all(*sticky, 3, 1000, 1) == route_all(*sticky, 3, 0, 1));
  auto other_request = route_all(*sticky, 4, 0, 1);
  CHECK(other_request != route_all(*sticky, 3, 0, 1));

  auto fresh = make_routing("synthetic:locality=0", kDeepSeek);
  auto f = route_all(*fresh, 3, 0, 20);
  int repeats = 0;
  for (std::size_t t = 1; t < 20; ++t) repeats += std::equal(f.begin() + (t - 1) * n, f.begin() + t * n, f.begin() + t * n);
  CHECK(repeats == 0);

  // Partial locality: about that share of tokens repeat the previous token exactly.
  auto half = make_routing("synthetic:locality=0.5", kMixtral);
  const std::size_t m = kMixtral.ids_per_token();
  auto h = route_all(*half, 0, 0, 4000);
  int same = 0;
  for (std::size_t t = 1; t < 4000; ++t) same += std::equal(h.begin() + (t - 1) * m, h.begin() + t * m, h.begin() + t * m);
  CHECK(same / 3999.0 == doctest::Approx(0.5).epsilon(0.08));
}

TEST_CASE("routing: every access path gives the same answer, from any thread, in any order") {
  for (const char* spec : {"synthetic:locality=0.6,affinity=0.5,beta=0.4,drift=0.3,drift_period=2,seed=9",
                           "synthetic:affinity=0,locality=0.3,seed=4"}) {
    CAPTURE(spec);
    auto src = make_routing(spec, kDeepSeek);
    const std::size_t n = kDeepSeek.ids_per_token();
    // route_tokens over a range == token by token == layer by layer.
    auto range = route_all(*src, 5, 10, 30);
    for (std::uint32_t i = 0; i < 30; ++i) {
      std::vector<ExpertId> tok(n);
      src->route_token(5, 10 + i, tok);
      REQUIRE(std::equal(tok.begin(), tok.end(), range.begin() + i * n));
      for (int l = 0; l < kDeepSeek.moe_layers; l += 7) {
        std::vector<ExpertId> one(8);
        src->route(5, 10 + i, l, one);
        REQUIRE(std::equal(one.begin(), one.end(), tok.begin() + l * 8));
      }
    }
    // Two threads, opposite orders, same answers as a third pass.
    const std::uint32_t requests = 40, positions = 25;
    std::vector<ExpertId> a(requests * positions * n), b(a.size()), c(a.size());
    auto worker = [&](std::vector<ExpertId>& out, bool reverse) {
      for (std::uint32_t i = 0; i < requests * positions; ++i) {
        std::uint32_t j = reverse ? requests * positions - 1 - i : i;
        src->route_token(j / positions, j % positions, std::span<ExpertId>(out.data() + j * n, n));
      }
    };
    std::thread t1(worker, std::ref(a), false), t2(worker, std::ref(b), true);
    t1.join();
    t2.join();
    worker(c, false);
    CHECK(a == b);
    CHECK(a == c);
    // A second generator with the same spec agrees; another seed does not.
    auto twin = make_routing(spec, kDeepSeek);
    CHECK(route_all(*twin, 7, 0, 5) == route_all(*src, 7, 0, 5));
    auto other = make_routing(std::string(spec) + "1", kDeepSeek);  // seed=91 or seed=41
    CHECK(route_all(*other, 7, 0, 5) != route_all(*src, 7, 0, 5));
  }
}

TEST_CASE("routing: drift moves popularity with the request index") {
  SyntheticRoutingParams p = parse_synthetic_routing("drift=0.5,drift_period=10", "test");
  SyntheticRouting drifting(kMixtral, p, "test");
  CHECK(drifting.popularity(0, 0, 3) == drifting.popularity(9, 0, 3));
  CHECK(drifting.popularity(0, 0, 3) != drifting.popularity(200, 0, 3));
  // Epochs replay back and forth after the 64 precomputed: 0..63, 62..1, 0, …
  CHECK(drifting.popularity(10 * 62, 1, 2) == drifting.popularity(10 * 64, 1, 2));
  SyntheticRouting still(kMixtral, parse_synthetic_routing("", "test"), "test");
  CHECK(still.popularity(0, 0, 3) == still.popularity(100000, 0, 3));
  double sum = 0;
  for (int e = 0; e < 8; ++e) sum += drifting.popularity(345, 2, e);
  CHECK(sum == doctest::Approx(1.0));
  CHECK(drifting.domain_of(17) >= 0);
  CHECK(drifting.domain_of(17) < 4);
}

// ---- statistics ----------------------------------------------------------------------------------

TEST_CASE("routing: imbalance measures") {
  std::vector<std::uint64_t> even = {5, 5, 5, 5};
  auto e = imbalance_of(even);
  CHECK(e.ratio == doctest::Approx(1.0));
  CHECK(e.cv == doctest::Approx(0.0));
  CHECK(e.gini == doctest::Approx(0.0));
  std::vector<std::uint64_t> one = {0, 0, 0, 8};
  auto o = imbalance_of(one);
  CHECK(o.ratio == doctest::Approx(4.0));
  CHECK(o.gini == doctest::Approx(0.75));
  CHECK(o.cv == doctest::Approx(std::sqrt(3.0)));
  CHECK(imbalance_of(std::vector<std::uint64_t>{}).ratio == 0);
}

TEST_CASE("routing: EP placement per-rank loads sum to the total") {
  auto src = make_routing("synthetic:zipf=1.0", kDeepSeek);
  ExpertLoad load(kDeepSeek);
  for (std::uint32_t r = 0; r < 50; ++r) load.add(route_all(*src, r, 0, 20));
  CHECK(load.tokens() == 1000);
  auto total = load.total();
  std::uint64_t sum = 0;
  for (auto x : total) sum += x;
  CHECK(sum == 1000ull * 58 * 8);
  for (const char* kind : {"contiguous", "round-robin"}) {
    for (int ep : {1, 8, 12, 256}) {
      auto placement = ExpertPlacement::make(kind, 256, ep, "test");
      for (int l = 0; l < 58; l += 19) {
        auto ranks = rank_loads(load.layer(l), placement);
        REQUIRE(ranks.size() == static_cast<std::size_t>(ep));
        std::uint64_t s = 0;
        for (auto x : ranks) s += x;
        CHECK(s == 1000ull * 8);
      }
    }
  }
  auto c = ExpertPlacement::contiguous(256, 8);
  CHECK(c.rank_of_expert[31] == 0);
  CHECK(c.rank_of_expert[32] == 1);
  auto rr = ExpertPlacement::round_robin(256, 8);
  CHECK(rr.rank_of_expert[9] == 1);
  CHECK(contains(message_of([] { ExpertPlacement::make("random", 8, 2, "cli"); }), "placement: unknown placement \"random\""));
  CHECK(contains(message_of([] { ExpertPlacement::make("contiguous", 8, 9, "cli"); }), "ep: expected 1 … 8 EP ranks"));
}

// ---- the command line ----------------------------------------------------------------------------

TEST_CASE("trace command: stats and generate") {
  auto s = test::run_cli("trace stats");
  CHECK(s.exit_code == 0);
  CHECK(contains(s.out, "requests      19366"));
  TempFile f("cli.ssrt");
  auto g = test::run_cli("trace generate --routing synthetic:seed=3 --model mixtral-8x7b --trace synthetic:n=20,prompt=fixed:30,output=fixed:10 --out " + f.path);
  CHECK(g.exit_code == 0);
  CHECK(contains(g.out, "20 requests, 800 tokens"));
  RoutingTraceFile file = RoutingTraceFile::open(f.path);
  CHECK(file.total_tokens() == 800);
  auto r = test::run_cli("trace stats --routing " + f.path + " --model mixtral-8x7b --ep 4 --trace synthetic:n=20,prompt=fixed:30,output=fixed:10");
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "tokens routed: 800"));
  CHECK(contains(r.out, "EP placement: 4 ranks, contiguous"));
  auto bad = test::run_cli("trace stats --routing synthetic:zipf=x --model mixtral-8x7b");
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.empty());
  CHECK(contains(bad.err, "zipf: expected a number"));
}
