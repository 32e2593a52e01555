// tools/cli/cmd_trace.cpp — `shardsim trace stats` and `shardsim trace generate`: request traces
// (arrivals, prompt/output lengths) and token-level expert routing (load imbalance per layer and
// per EP rank; writing SSRT routing files).
//
// Tokens of a request trace are routed request after request: request i contributes positions
// 0 … prompt+output−1 (prompt first). The model only provides the routing shape here.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/readable_number.hpp"
#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "tools/cli/commands.hpp"
#include "workloads/model.hpp"
#include "workloads/request_trace.hpp"
#include "workloads/routing_trace.hpp"

namespace shardsim::cli {

namespace {

struct TraceOptions {
  std::string trace = "azure-conv";
  std::size_t requests = 0;  // 0 = all (stats) / 100 (generate)
  double rate_scale = 1.0;
  std::string routing;
  std::string model;
  int ep = 0;  // 0 = min(8, experts)
  std::string placement = "contiguous";
  std::uint64_t tokens = 8192;
  std::string out;
};

std::string (*const fmt)(const char*, double) = formatted;  // common/readable_number

RequestTrace load_trace(const TraceOptions& o, std::size_t default_requests) {
  RequestTrace t = load_request_trace(o.trace);
  std::size_t n = o.requests > 0 ? o.requests : default_requests;
  if (n > 0) t = head(t, n);
  if (o.rate_scale != 1.0) t = scale_rate(t, o.rate_scale);
  return t;
}

RoutingShape routing_shape_of(const ModelSpec& m, const std::string& spec) {
  if (!m.is_moe()) throw InputError(spec, "experts", "a dense model: it has no routed experts");
  return m.routing_shape();
}

// The routing source of --routing: synthetic specs need --model; a file may stand alone, and
// must match the model when one is given.
std::unique_ptr<RoutingSource> open_routing(const TraceOptions& o) {
  if (!o.model.empty()) return make_routing(o.routing, routing_shape_of(load_model(o.model), o.model));
  if (is_synthetic_routing_spec(o.routing))
    throw InputError(o.routing, "--model", "a synthetic routing spec needs --model to know the layers, experts and top-k");
  return std::make_unique<RoutingTraceFile>(RoutingTraceFile::open(o.routing));
}

// Token counts per request (prompt + output), cut so the total is at most max_tokens
// (0 = no cut); the last request may be cut short.
std::vector<std::uint32_t> token_counts(const RequestTrace& t, std::uint64_t max_tokens) {
  std::vector<std::uint32_t> counts;
  std::uint64_t total = 0;
  for (const auto& r : t.requests) {
    std::uint64_t n = static_cast<std::uint64_t>(r.prompt_tokens) + static_cast<std::uint64_t>(r.output_tokens);
    if (max_tokens > 0) n = std::min(n, max_tokens - total);
    if (n == 0) break;
    counts.push_back(static_cast<std::uint32_t>(n));
    total += n;
  }
  return counts;
}

void print_request_stats(const RequestTrace& t, const TraceOptions& o) {
  auto s = request_trace_stats(t);
  std::string how;
  if (o.requests > 0) how += "first " + std::to_string(o.requests) + " requests";
  if (o.rate_scale != 1.0) how += std::string(how.empty() ? "" : ", ") + "arrivals " + fmt("%g", o.rate_scale) + "× faster";
  std::printf("request trace: %s%s\n", t.source.c_str(), how.empty() ? "" : (" (" + how + ")").c_str());
  std::printf("  requests      %zu\n", s.count);
  std::printf("  duration      %.1f s\n", s.duration_s);
  std::printf("  arrival rate  %.3f requests/s\n", s.rate_per_s);
  std::printf("  tokens        %lld prompt, %lld output\n", static_cast<long long>(s.prompt_tokens_total),
              static_cast<long long>(s.output_tokens_total));
  std::printf("  per request     mean      p50      p90      p99      max\n");
  auto row = [](const char* name, const Distribution& d) {
    std::printf("  %-10s %9.1f %8.0f %8.0f %8.0f %8.0f\n", name, d.mean, d.p50, d.p90, d.p99, d.max);
  };
  row("prompt", s.prompt);
  row("output", s.output);
  if (const PrefixReuse u = prefix_reuse(t); u.block_tokens > 0)
    std::printf("  prefixes      %lld requests in %lld distinct blocks of %d tokens; a cache that never evicts would\n"
                "                serve %.1f%% of the prompt tokens (each block computed once): the ceiling of any hit rate\n",
                static_cast<long long>(u.requests_with_blocks), static_cast<long long>(u.distinct_blocks), u.block_tokens,
                100 * u.ceiling());
}

void print_routing_stats(const TraceOptions& o, const RequestTrace& trace, const RoutingSource& src,
                         const ExpertPlacement& placement) {
  const RoutingShape& shape = src.shape();
  auto counts = token_counts(trace, o.tokens);
  ExpertLoad load(shape);
  std::vector<ExpertId> buf;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    buf.resize(counts[r] * shape.ids_per_token());
    src.route_tokens(static_cast<std::uint32_t>(r), 0, counts[r], buf);
    load.add(buf);
  }
  std::printf("\nrouting: %s — %s\n", src.source().c_str(), to_string(shape).c_str());
  std::printf("  tokens routed: %llu (the first %zu requests of %s, prompt then output tokens)\n",
              static_cast<unsigned long long>(load.tokens()), counts.size(), trace.source.c_str());

  // Per layer: expert imbalance, hottest expert, and EP-rank imbalance.
  std::printf("\n  per MoE layer: tokens per expert (max/mean, CV, Gini), hottest expert, EP-rank max/mean\n");
  std::printf("  layer  max/mean     CV   Gini  hottest (share of layer)  EP max/mean\n");
  double sum_ratio = 0, sum_rank_ratio = 0, worst_rank_ratio = 0;
  int worst_rank_layer = 0;
  struct Hot {
    int layer, expert;
    std::uint64_t load;
  };
  std::vector<Hot> hot;
  for (int l = 0; l < shape.moe_layers; ++l) {
    auto loads = load.layer(l);
    Imbalance im = imbalance_of(loads);
    auto ranks = rank_loads(loads, placement);
    Imbalance rim = imbalance_of(ranks);
    auto top = static_cast<int>(std::max_element(loads.begin(), loads.end()) - loads.begin());
    double per_layer_ids = static_cast<double>(load.tokens()) * shape.top_k;
    std::printf("  %5d  %8.2f %6.2f %6.3f  %7d (%5.1f%%)          %8.2f\n", l, im.ratio, im.cv, im.gini, top,
                per_layer_ids > 0 ? 100.0 * static_cast<double>(loads[top]) / per_layer_ids : 0.0, rim.ratio);
    sum_ratio += im.ratio;
    sum_rank_ratio += rim.ratio;
    if (rim.ratio > worst_rank_ratio) worst_rank_ratio = rim.ratio, worst_rank_layer = l;
    for (int e = 0; e < shape.experts; ++e) hot.push_back({l, e, loads[e]});
  }
  const double layers = shape.moe_layers;
  std::printf("  mean   %8.2f  (expert max/mean over layers; 1.00 = balanced)\n", sum_ratio / layers);

  std::size_t nhot = std::min<std::size_t>(5, hot.size());
  std::partial_sort(hot.begin(), hot.begin() + static_cast<std::ptrdiff_t>(nhot), hot.end(),
                    [](const Hot& a, const Hot& b) { return a.load > b.load; });
  const double mean_load = static_cast<double>(load.tokens()) * shape.top_k / shape.experts;
  std::printf("\n  hottest experts (layer, expert): tokens, × the layer mean\n");
  for (std::size_t i = 0; i < nhot; ++i)
    std::printf("    layer %3d expert %5d: %10llu  %5.2f×\n", hot[i].layer, hot[i].expert,
                static_cast<unsigned long long>(hot[i].load),
                mean_load > 0 ? static_cast<double>(hot[i].load) / mean_load : 0.0);

  auto ranks = rank_loads(load.total(), placement);
  Imbalance rim = imbalance_of(ranks);
  std::printf("\n  EP placement: %d ranks, %s (%s experts per rank)\n", placement.ranks, o.placement.c_str(),
              shape.experts % placement.ranks == 0 ? std::to_string(shape.experts / placement.ranks).c_str() : "uneven");
  std::printf("  per-layer rank max/mean: mean %.2f, worst %.2f (layer %d)\n", sum_rank_ratio / layers, worst_rank_ratio,
              worst_rank_layer);
  std::printf("  tokens per rank, all layers (max/mean %.2f, CV %.2f):\n", rim.ratio, rim.cv);
  for (std::size_t r = 0; r < ranks.size(); ++r)
    std::printf("%s%5zu: %11llu%s", r % 4 == 0 ? "    " : "  ", r, static_cast<unsigned long long>(ranks[r]),
                r % 4 == 3 || r + 1 == ranks.size() ? "\n" : "");
}

void run_stats(const TraceOptions& o) {
  RequestTrace trace = load_trace(o, 0);
  if (o.routing.empty()) {
    print_request_stats(trace, o);
    return;
  }
  // Load everything before printing anything, so bad input leaves stdout empty.
  auto src = open_routing(o);
  const int experts = src->shape().experts;
  auto placement = ExpertPlacement::make(o.placement, experts, o.ep > 0 ? o.ep : std::min(8, experts), "--ep/--placement");
  print_request_stats(trace, o);
  print_routing_stats(o, trace, *src, placement);
}

void run_generate(const TraceOptions& o) {
  RequestTrace trace = load_trace(o, 100);
  auto src = open_routing(o);
  auto counts = token_counts(trace, 0);
  std::uint64_t tokens = 0;
  for (auto c : counts) tokens += c;
  const RoutingShape& shape = src->shape();
  double bytes = static_cast<double>(tokens) * static_cast<double>(shape.ids_per_token()) * (shape.experts <= 256 ? 1 : 2);
  constexpr double kMaxBytes = 8.0 * (1ULL << 30);
  if (bytes > kMaxBytes)
    throw InputError("--requests", "", fmt("%.1f", bytes / 1e9) + " GB of routing for " + std::to_string(tokens) +
                                           " tokens exceeds the 8 GiB limit; ask for fewer requests");
  std::string image = encode_routing_trace(*src, counts);
  write_file_atomically(o.out, image);
  std::printf("wrote %s: %zu requests, %llu tokens, %s, %zu bytes\n", o.out.c_str(), counts.size(),
              static_cast<unsigned long long>(tokens), to_string(shape).c_str(), image.size());
}

}  // namespace

void add_trace_command(CLI::App& app) {
  auto* trace = app.add_subcommand("trace", "Request traces and token-level expert routing: statistics, generation");
  trace->require_subcommand(1);
  auto opts = std::make_shared<TraceOptions>();

  auto* stats = trace->add_subcommand("stats", "Request-trace statistics; with --routing, expert and EP-rank load imbalance");
  stats->footer(
      "Request traces: azure-conv (embedded, the default), an Azure CSV, a Mooncake JSONL file, or\n"
      "synthetic:n=1000,rate=5,arrival=poisson|gamma|constant,cv=2,prompt=lognormal:1024:1.0,output=lognormal:256:0.9,seed=1\n"
      "(every parameter optional; lengths: fixed:N | uniform:LO:HI | lognormal:MEAN:SIGMA[:MAX]); shared prefixes:\n"
      "system=TOKENS[:COUNT] (system prompts), turns=T,think=30 (conversations), block=16. With prefix blocks\n"
      "(those, or Mooncake hash_ids) the stats say how much of the prompts a prefix cache could serve.\n"
      "Routing: uniform, an .ssrt file, or synthetic:dist=dirichlet|zipf,alpha=6,zipf=0.8,domains=4,beta=0.2,\n"
      "domain_alpha=0.3,locality=0.2,affinity=0.3,fanout=4,groups=G,topk_groups=T,drift=0,drift_period=500,seed=1\n"
      "(every parameter optional; groups default to the model's). Tokens are routed request after request,\n"
      "prompt then output tokens. Formats and defaults: docs/trace-formats.md.\n\n"
      "Examples:\n"
      "  shardsim trace stats\n"
      "  shardsim trace stats --trace synthetic:rate=10,arrival=gamma,cv=3,n=5000 --rate-scale 2\n"
      "  shardsim trace stats --trace mooncake.jsonl --requests 1000\n"
      "  shardsim trace stats --trace synthetic:n=4000,turns=4,system=2000:8\n"
      "  shardsim trace stats --routing synthetic:zipf=1.2,seed=5 --model mixtral-8x7b --ep 8\n"
      "  shardsim trace stats --routing synthetic:locality=0.5 --model deepseek-v3 --ep 32 --placement round-robin --tokens 65536\n"
      "  shardsim trace stats --routing routing.ssrt --model deepseek-v3");
  stats->add_option("--trace,-t", opts->trace, "request trace: azure-conv, a CSV/JSONL path, or synthetic:…")
      ->capture_default_str();
  stats->add_option("--requests,-n", opts->requests, "use only the first N requests (default: all)");
  stats->add_option("--rate-scale", opts->rate_scale, "arrivals this many times faster (2 = twice the rate)")
      ->capture_default_str();
  stats->add_option("--routing,-r", opts->routing, "routing: uniform, synthetic:…, or an .ssrt file");
  stats->add_option("--model,-m", opts->model, "model preset, model JSON or HF config.json (for the routing shape)");
  stats->add_option("--ep", opts->ep, "EP ranks the experts are placed on (default: 8, or fewer for fewer experts)");
  stats->add_option("--placement", opts->placement, "contiguous (blocks of experts) | round-robin")
      ->capture_default_str();
  stats->add_option("--tokens", opts->tokens, "route the trace's first N tokens (0 = all)")->capture_default_str();
  stats->callback([opts] { run_stats(*opts); });

  auto* gen = trace->add_subcommand("generate", "Write the routing of a trace's tokens as a binary SSRT file");
  gen->footer(
      "Routes every token of the first N requests of the trace (prompt then output tokens) and writes the\n"
      "result atomically (nothing is left half-written on error). Size: tokens × MoE layers × top-k bytes\n"
      "(2 bytes per id above 256 experts); at most 8 GiB. Format: docs/trace-formats.md.\n\n"
      "Examples:\n"
      "  shardsim trace generate --routing synthetic:zipf=1.0,locality=0.3,seed=7 --model deepseek-v3 --requests 100 --out ds.ssrt\n"
      "  shardsim trace generate --routing uniform --model mixtral-8x7b --trace synthetic:n=50,prompt=fixed:512 --out mx.ssrt\n"
      "  shardsim trace stats --routing ds.ssrt --model deepseek-v3 --ep 64");
  gen->add_option("--routing,-r", opts->routing, "routing: uniform, synthetic:…, or an .ssrt file to re-encode")
      ->required();
  gen->add_option("--model,-m", opts->model, "model preset, model JSON or HF config.json")->required();
  gen->add_option("--trace,-t", opts->trace, "request trace giving each request's tokens")->capture_default_str();
  gen->add_option("--requests,-n", opts->requests, "the first N requests of the trace (default 100)");
  gen->add_option("--out,-o", opts->out, "output file (.ssrt)")->required();
  gen->callback([opts] { run_generate(*opts); });
}

}  // namespace shardsim::cli
