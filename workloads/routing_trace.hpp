// workloads/routing_trace.hpp — token-level expert routing: which top-k experts each token visits
// at each MoE layer, from a file or a seeded generator, and the load statistics derived from it.
//
// Owns: RoutingShape (the routing-relevant dimensions of a model, kept apart from ModelSpec),
// RoutingSource (the interface the simulator calls per serving step), its two implementations —
// RoutingTraceFile (the project's binary "SSRT" format, reader and encoder) and SyntheticRouting
// (the generator of docs/references.md §E.3) — make_routing (spec string → source), and the statistics:
// per-expert loads per layer, imbalance (max/mean, CV, Gini), expert placements on EP ranks and
// per-rank loads. Formats and the generator's model: docs/trace-formats.md.
//
// Addressing: a token is (request index, position), position counting the request's prompt tokens
// first, then its generated tokens. Experts are numbered [0, experts), MoE layers [0, moe_layers)
// (the model's MoE layers in order, dense layers skipped).
// Determinism: every answer is a pure function of (source, request, position, layer) — the same
// inputs give the same experts in any order, from any thread, in any process.
// Thread-safety: RoutingSource objects are immutable after construction; all methods are const
// and may be called concurrently ("constant", docs/architecture.md, Conventions). ExpertLoad is a plain
// accumulator for one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardsim {

using ExpertId = std::uint16_t;  // routed-expert index; models have at most 65,536 experts

struct RoutingShape {
  int moe_layers = 0;   // layers with routed experts
  int experts = 0;      // routed experts per MoE layer (≤ 65,536)
  int top_k = 0;        // experts per token per layer (≤ experts)
  int n_group = 1;      // group-limited routing: experts split into n_group equal groups …
  int topk_group = 1;   // … of which a token may use topk_group (DeepSeek-V3: 8 and 4)

  std::size_t ids_per_token() const { return static_cast<std::size_t>(moe_layers) * static_cast<std::size_t>(top_k); }
  bool group_limited() const { return n_group > 1 && topk_group < n_group; }
  bool operator==(const RoutingShape&) const = default;
};

// "58 MoE layers × 256 experts, top-8, 4 of 8 groups".
std::string to_string(const RoutingShape& shape);
// Throws InputError(source, field, reason) unless 1 ≤ top_k ≤ experts ≤ 65,536, moe_layers ≥ 1,
// n_group divides experts, 1 ≤ topk_group ≤ n_group and the allowed groups hold ≥ top_k experts.
void validate_routing_shape(const RoutingShape& shape, const std::string& source);

// ---- the interface the simulator calls -------------------------------------------------------

class RoutingSource {
 public:
  virtual ~RoutingSource() = default;

  const RoutingShape& shape() const { return shape_; }
  // The spec or path this routing came from (provenance, messages).
  const std::string& source() const { return source_; }

  // The top_k experts of token (request, position) at one MoE layer. out.size() must be top_k.
  void route(std::uint32_t request, std::uint32_t position, int moe_layer, std::span<ExpertId> out) const;
  // All MoE layers of one token: out[layer·top_k + j]; out.size() must be ids_per_token().
  void route_token(std::uint32_t request, std::uint32_t position, std::span<ExpertId> out) const;
  // Positions [first, first + count) of one request (a prefill chunk, or count = 1 for a decode
  // token): out[(i·moe_layers + layer)·top_k + j]; out.size() must be count·ids_per_token().
  // Cheaper per token than route_token for synthetic routing with temporal locality.
  void route_tokens(std::uint32_t request, std::uint32_t first, std::uint32_t count, std::span<ExpertId> out) const;
  // The same for a subset of MoE layers (ascending, each in range): out[(i·layers.size() + j)·top_k + q]
  // holds layer layers[j]. File sources answer exactly; SyntheticRouting draws each listed layer
  // after the kChainDepth layers before it (its layer-to-layer transition chain truncated there,
  // the first of them drawn from its popularity/domain mixture alone; consecutive listed layers
  // continue one chain): exact without affinity. With depth 0 the transition's pull is lost, which
  // moved TPOT by 2–6% under zipf=1.4 with EP (the fast-path test); depth 1 stays inside 1%.
  // Determinism: a pure function of its arguments, like route_tokens.
  void route_layers(std::uint32_t request, std::uint32_t first, std::uint32_t count, std::span<const int> layers,
                    std::span<ExpertId> out) const;
  // Several requests' positions at once (a step's tokens): out holds each span's block of
  // count·layers.size()·top_k ids in turn, each as route_layers lays it out, with the same ids.
  // SyntheticRouting draws them layer by layer across all the spans' tokens, so one layer's
  // tables stay in cache for the whole step instead of being walked again per token.
  struct TokenSpan {
    std::uint32_t request, first, count;
  };
  void route_layers(std::span<const TokenSpan> spans, std::span<const int> layers, std::span<ExpertId> out) const;
  static constexpr int kChainDepth = 1;

  // Each expert's share of the top-k picks at each MoE layer (shares[layer·experts + expert], each
  // layer's shares summing to 1) over a fixed sample — two windows of kShareTokens tokens, from
  // positions 0 and kSecondWindow, of kShareRequests requests: the population an estimate of
  // unrouted tokens leans on (sim/step/batch_routing.hpp). Computed on first use, once per source
  // and its copies, then kept.
  std::span<const double> pick_shares() const;
  // How much a window of n = kShareTokens·top_k picks says about the same request's other tokens,
  // as a pseudo-count: the window and the shares weigh n : κ in the best linear estimate of the
  // request's later picks, fitted on the same sample (the first window predicting the second).
  // 0: a request's window says everything; kMaxConcentration: nothing beyond the shares.
  double pick_concentration() const;
  static constexpr double kMaxConcentration = 1e6;
  static constexpr int kShareRequests = 64;
  static constexpr std::uint32_t kSecondWindow = 256;
  static constexpr int kShareTokens = 32;

 protected:
  RoutingSource(RoutingShape shape, std::string source);
  RoutingSource(const RoutingSource&) = default;
  RoutingSource(RoutingSource&&) = default;
  RoutingSource& operator=(const RoutingSource&) = delete;

  // Implementations receive checked arguments (moe_layer in range, out large enough).
  virtual void do_route_tokens(std::uint32_t request, std::uint32_t first, std::uint32_t count, ExpertId* out) const = 0;
  // Default: routes the whole token and copies one layer.
  virtual void do_route(std::uint32_t request, std::uint32_t position, int moe_layer, ExpertId* out) const;
  // Default: routes each span's whole tokens and copies the listed layers.
  virtual void do_route_layers(const TokenSpan* spans, std::size_t num_spans, const int* layers, int num_layers,
                               ExpertId* out) const;

 private:

  RoutingShape shape_;   // fixed at construction
  std::string source_;   // fixed at construction
  struct Shares;
  std::shared_ptr<Shares> shares_;  // pick_shares(), filled once (std::call_once)
};

// A routing source from a spec, for a model of the given shape:
//   uniform                  every expert equally popular, no locality/affinity/drift (group
//                            limits of the shape still apply)
//   synthetic[:k=v,…]        SyntheticRouting, parameters below
//   <path>                   an SSRT file; its layers/experts/top_k must equal the shape's
// Throws InputError naming the spec (and parameter) or the file (and byte offset).
std::unique_ptr<RoutingSource> make_routing(const std::string& spec, const RoutingShape& shape);
// True for the specs that make_routing does not read from a file.
bool is_synthetic_routing_spec(std::string_view spec);

// ---- the binary file format ("SSRT", version 1, little-endian; docs/trace-formats.md) --------
//   offset 0   char[4]  magic "SSRT"
//          4   u32      version = 1
//          8   u32      num_moe_layers  L ≥ 1
//         12   u32      num_experts     E in [1, 65536]
//         16   u32      top_k           k in [1, E]
//         20   u32      num_requests    R ≥ 1
//         24   u32[R]   tokens of each request (each ≥ 1)
//   24 + 4R    ids      for each request, token, layer: k expert ids, u8 when E ≤ 256 else u16
// The file is exactly that long. A (request, position) beyond what the file holds wraps around:
// request r reads stored request r mod R, position p reads stored token p mod tokens(r mod R).

class RoutingTraceFile final : public RoutingSource {
 public:
  // Reads the whole file with one read and checks it (header fields, sizes, every id < E).
  static RoutingTraceFile open(const std::string& path);
  // The same checks on bytes already in memory; `source` names them in errors.
  RoutingTraceFile(std::string bytes, std::string source);

  std::uint32_t num_requests() const { return static_cast<std::uint32_t>(first_token_.size() - 1); }
  std::uint32_t stored_tokens(std::uint32_t request) const;  // request < num_requests()
  std::uint64_t total_tokens() const { return first_token_.back(); }

 private:
  struct Layout {  // what the header says, checked against the bytes
    RoutingShape shape;
    std::vector<std::uint64_t> first_token;
    std::size_t ids_offset = 0;
    int id_bytes = 1;
  };
  static Layout check(const std::string& bytes, const std::string& source);
  RoutingTraceFile(Layout&& layout, std::string&& bytes, std::string&& source);

  void do_route_tokens(std::uint32_t request, std::uint32_t first, std::uint32_t count, ExpertId* out) const override;
  void do_route(std::uint32_t request, std::uint32_t position, int moe_layer, ExpertId* out) const override;
  void do_route_layers(const TokenSpan* spans, std::size_t num_spans, const int* layers, int num_layers,
                       ExpertId* out) const override;
  const unsigned char* token_ids(std::uint32_t request, std::uint32_t position) const;

  std::string bytes_;                       // the whole file, immutable
  std::vector<std::uint64_t> first_token_;  // prefix sums of token counts, size R + 1
  std::size_t ids_offset_ = 0;
  int id_bytes_ = 1;
};

// Encodes an SSRT image of the routing `source` gives to requests with these token counts
// (request i gets positions [0, token_counts[i])). Counts must be ≥ 1 and there must be ≥ 1.
std::string encode_routing_trace(const RoutingSource& source, std::span<const std::uint32_t> token_counts);
// Encodes explicit ids: ids.size() == Σ token_counts · ids_per_token(), every id < experts.
std::string encode_routing_trace(const RoutingShape& shape, std::span<const std::uint32_t> token_counts,
                                 std::span<const ExpertId> ids);

// ---- the synthetic generator (docs/references.md §E.3) -----------------------------------------------

struct SyntheticRoutingParams {
  enum class Popularity { Zipf, Dirichlet };
  // dist=dirichlet|zipf; giving zipf= alone selects zipf. The default (Dirichlet, alpha 6) gives
  // a per-layer max/mean load of ≈ 2.3–2.6 for 128–384 experts and ≈ 1.5 for Mixtral's 8, in the
  // 1.5–3 range typical of models trained with load balancing (docs/references.md §E.3).
  Popularity popularity = Popularity::Dirichlet;
  double zipf = 0.8;          // zipf=S: expert of popularity rank i ∝ 1/(i+1)^S, S ≥ 0 (0 = uniform)
  double alpha = 6.0;         // alpha=A: Dirichlet(A·1) popularity (large → uniform)
  int domains = 4;            // domains=D: request domains, each with its own hot experts
  double beta = 0.2;          // beta=B: weight of the request's domain mixture, in [0, 1]
  double domain_alpha = 0.3;  // domain_alpha=A: Dirichlet concentration of domain popularity
  double locality = 0.2;      // locality=P: probability a token reuses the previous token's experts
  double affinity = 0.3;      // affinity=P: weight of the sparse layer→layer transition
  int fanout = 4;             // fanout=F: successors of each expert in the next layer's transition
  int n_group = 0;            // groups=G: 0 = the shape's n_group
  int topk_group = 0;         // topk_groups=T: 0 = the shape's topk_group
  double drift = 0.0;         // drift=S: stationary std-dev of the log-popularity AR(1); 0 = off
  int drift_period = 500;     // drift_period=R: requests per drift epoch
  std::uint64_t seed = 1;     // seed=N
};

// Parses the text after "synthetic:" (may be empty); `spec` names the whole spec in errors.
SyntheticRoutingParams parse_synthetic_routing(std::string_view params, const std::string& spec);
// The parameters of the "uniform" shorthand.
SyntheticRoutingParams uniform_routing_params();

class SyntheticRouting final : public RoutingSource {
 public:
  // Precomputes popularity (per drift epoch and layer), domain and transition tables; throws
  // InputError(source, parameter, reason) when the parameters do not fit the shape.
  SyntheticRouting(const RoutingShape& shape, const SyntheticRoutingParams& params, std::string source);
  ~SyntheticRouting() override;
  SyntheticRouting(SyntheticRouting&&) noexcept;

  const SyntheticRoutingParams& params() const { return params_; }
  // The group limits in effect (params override the shape's).
  int n_group() const;
  int topk_group() const;
  // The request's domain in [0, domains) (0 when domains are off).
  int domain_of(std::uint32_t request) const;
  // Base popularity of `expert` at `moe_layer` for `request` (drift included, domain excluded).
  double popularity(std::uint32_t request, int moe_layer, int expert) const;

 private:
  void do_route_tokens(std::uint32_t request, std::uint32_t first, std::uint32_t count, ExpertId* out) const override;
  void do_route(std::uint32_t request, std::uint32_t position, int moe_layer, ExpertId* out) const override;
  void do_route_layers(const TokenSpan* spans, std::size_t num_spans, const int* layers, int num_layers,
                       ExpertId* out) const override;

  struct Tables;
  SyntheticRoutingParams params_;     // fixed at construction
  std::unique_ptr<const Tables> t_;   // fixed at construction
};

// ---- load statistics ---------------------------------------------------------------------------

// Tokens per expert per MoE layer, accumulated over routed tokens.
class ExpertLoad {
 public:
  explicit ExpertLoad(const RoutingShape& shape);
  // Adds whole tokens laid out as route_tokens writes them (size a multiple of ids_per_token()).
  void add(std::span<const ExpertId> ids);
  std::uint64_t tokens() const { return tokens_; }
  const RoutingShape& shape() const { return shape_; }
  // Tokens routed to each expert at one MoE layer (size = experts).
  std::span<const std::uint64_t> layer(int moe_layer) const;
  // Summed over all MoE layers (size = experts).
  std::vector<std::uint64_t> total() const;

 private:
  RoutingShape shape_;
  std::vector<std::uint64_t> counts_;  // [layer · experts + expert]
  std::uint64_t tokens_ = 0;
};

struct Imbalance {
  double max = 0, mean = 0;
  double ratio = 0;  // max / mean: 1 = perfectly balanced (vLLM/SGLang "balancedness" = 1/ratio)
  double cv = 0;     // standard deviation / mean (population)
  double gini = 0;   // 0 = equal, → 1 = all load on one
};
// Of any load vector (experts or ranks); all zero for an empty or all-zero vector.
Imbalance imbalance_of(std::span<const std::uint64_t> loads);

// Which EP rank hosts each expert.
struct ExpertPlacement {
  int ranks = 1;
  std::vector<int> rank_of_expert;  // size = experts, values in [0, ranks)

  // Expert e on rank ⌊e·ranks/experts⌋: contiguous blocks (equal when ranks divides experts).
  static ExpertPlacement contiguous(int experts, int ranks);
  // Expert e on rank e mod ranks.
  static ExpertPlacement round_robin(int experts, int ranks);
  // kind = "contiguous" | "round-robin"; 1 ≤ ranks ≤ experts; InputError(source, field, …) otherwise.
  static ExpertPlacement make(std::string_view kind, int experts, int ranks, const std::string& source);
};

// Tokens each rank receives: the sum of its experts' loads (size = ranks).
std::vector<std::uint64_t> rank_loads(std::span<const std::uint64_t> expert_loads, const ExpertPlacement& placement);

}  // namespace shardsim
