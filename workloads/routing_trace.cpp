// workloads/routing_trace.cpp — routing sources (SSRT files, the synthetic generator), the SSRT
// encoder, make_routing, and load statistics.
#include "workloads/routing_trace.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "workloads/request_trace.hpp"

namespace shardsim {

namespace {

constexpr char kMagic[4] = {'S', 'S', 'R', 'T'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 24;

std::uint32_t read_u32(const std::string& b, std::size_t off) {
  auto byte = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(b[off + i])); };
  return byte(0) | byte(1) << 8 | byte(2) << 16 | byte(3) << 24;
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

int id_bytes_for(int experts) { return experts <= 256 ? 1 : 2; }

std::string offset_field(std::size_t offset, const std::string& what) {
  return "byte offset " + std::to_string(offset) + " (" + what + ")";
}

std::string shape_dims(const RoutingShape& s) {
  return std::to_string(s.moe_layers) + " MoE layers × " + std::to_string(s.experts) + " experts, top-" +
         std::to_string(s.top_k);
}

// Header + token counts of an SSRT image.
std::string encode_header(const RoutingShape& shape, std::span<const std::uint32_t> counts) {
  validate_routing_shape(shape, "routing trace");
  if (counts.empty()) throw std::invalid_argument("encode_routing_trace: no requests");
  if (counts.size() > std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument("encode_routing_trace: too many requests");
  std::string out(kMagic, 4);
  put_u32(out, kVersion);
  put_u32(out, static_cast<std::uint32_t>(shape.moe_layers));
  put_u32(out, static_cast<std::uint32_t>(shape.experts));
  put_u32(out, static_cast<std::uint32_t>(shape.top_k));
  put_u32(out, static_cast<std::uint32_t>(counts.size()));
  for (std::uint32_t c : counts) {
    if (c == 0) throw std::invalid_argument("encode_routing_trace: a request with 0 tokens");
    put_u32(out, c);
  }
  return out;
}

void append_ids(std::string& out, std::span<const ExpertId> ids, const RoutingShape& shape) {
  const std::size_t width = static_cast<std::size_t>(id_bytes_for(shape.experts));
  std::size_t at = out.size();
  out.resize(at + ids.size() * width);
  for (ExpertId id : ids) {
    if (id >= shape.experts)
      throw std::invalid_argument("encode_routing_trace: expert id " + std::to_string(id) + " out of range");
    out[at++] = static_cast<char>(id & 0xff);
    if (width == 2) out[at++] = static_cast<char>(id >> 8);
  }
}

}  // namespace

// ---- RoutingShape ----

std::string to_string(const RoutingShape& s) {
  std::string out = shape_dims(s);
  if (s.group_limited()) out += ", ≤" + std::to_string(s.topk_group) + " of " + std::to_string(s.n_group) + " groups";
  return out;
}

void validate_routing_shape(const RoutingShape& s, const std::string& source) {
  auto fail = [&](const char* field, const std::string& reason) { throw InputError(source, field, reason); };
  if (s.moe_layers < 1) fail("moe_layers", "expected ≥ 1 MoE layer, got " + std::to_string(s.moe_layers));
  if (s.experts < 1 || s.experts > 65536)
    fail("experts", "expected 1 … 65536 routed experts, got " + std::to_string(s.experts));
  if (s.top_k < 1 || s.top_k > s.experts)
    fail("top_k", "expected 1 … " + std::to_string(s.experts) + " (the experts), got " + std::to_string(s.top_k));
  if (s.n_group < 1 || s.experts % s.n_group != 0)
    fail("n_group", std::to_string(s.n_group) + " groups do not divide " + std::to_string(s.experts) + " experts");
  if (s.topk_group < 1 || s.topk_group > s.n_group)
    fail("topk_group", "expected 1 … " + std::to_string(s.n_group) + " (n_group), got " + std::to_string(s.topk_group));
  if (static_cast<std::int64_t>(s.topk_group) * (s.experts / s.n_group) < s.top_k)
    fail("topk_group", std::to_string(s.topk_group) + " groups of " + std::to_string(s.experts / s.n_group) +
                           " experts hold fewer than top_k = " + std::to_string(s.top_k) + " experts");
}

// ---- RoutingSource ----

struct RoutingSource::Shares {
  std::once_flag once;
  std::vector<double> shares;
  double concentration = 0;
};

RoutingSource::RoutingSource(RoutingShape shape, std::string source)
    : shape_(shape), source_(std::move(source)), shares_(std::make_shared<Shares>()) {}

namespace {

// The κ that weighs a window of n picks against the shares as well as the sample allows: the
// least-squares weight of a request's first window in predicting its second one is
// w = Σ cov(first, second) / Σ var(first) over every layer and expert (each centred on the
// shares), and a window of n picks then weighs n : κ with κ = n·(1 − w)/w. A persistent
// per-request preference shows in the covariance; clumps inside one window (a token reusing its
// predecessor's experts) only in the variance, so they lower w instead of raising it.
double concentration_of(const std::vector<ExpertLoad>& first, const std::vector<ExpertLoad>& second,
                        const std::vector<double>& shares, double n) {
  const RoutingShape& shape = first.front().shape();
  const std::size_t E = static_cast<std::size_t>(shape.experts);
  double cov = 0, var = 0;
  for (std::size_t r = 0; r < first.size(); ++r)
    for (int l = 0; l < shape.moe_layers; ++l) {
      const auto x = first[r].layer(l), y = second[r].layer(l);
      for (std::size_t i = 0; i < E; ++i) {
        const double mean = n * shares[static_cast<std::size_t>(l) * E + i];
        const double a = static_cast<double>(x[i]) - mean, b = static_cast<double>(y[i]) - mean;
        cov += a * b;
        var += a * a;
      }
    }
  if (var <= 0) return 0;
  const double w = std::min(1.0, cov / var);
  if (w <= n / (n + RoutingSource::kMaxConcentration)) return RoutingSource::kMaxConcentration;
  return n * (1 - w) / w;
}

}  // namespace

std::span<const double> RoutingSource::pick_shares() const {
  std::call_once(shares_->once, [this] {
    // Two windows of each request, counted per layer and expert.
    std::vector<ExpertLoad> window[2];
    std::vector<ExpertId> ids(static_cast<std::size_t>(kShareTokens) * shape_.ids_per_token());
    for (int w = 0; w < 2; ++w)
      for (std::uint32_t r = 0; r < static_cast<std::uint32_t>(kShareRequests); ++r) {
        route_tokens(r, w == 0 ? 0 : kSecondWindow, kShareTokens, ids);
        window[w].emplace_back(shape_).add(ids);
      }
    const std::size_t E = static_cast<std::size_t>(shape_.experts);
    const double n = static_cast<double>(kShareTokens) * shape_.top_k;  // picks per window and layer
    std::vector<double>& shares = shares_->shares;
    shares.assign(static_cast<std::size_t>(shape_.moe_layers) * E, 0);
    for (const auto& w : window)
      for (const ExpertLoad& load : w)
        for (int l = 0; l < shape_.moe_layers; ++l) {
          const auto c = load.layer(l);
          for (std::size_t i = 0; i < E; ++i)
            shares[static_cast<std::size_t>(l) * E + i] += static_cast<double>(c[i]) / (2 * n * kShareRequests);
        }
    shares_->concentration = concentration_of(window[0], window[1], shares, n);
  });
  return shares_->shares;
}

double RoutingSource::pick_concentration() const {
  pick_shares();
  return shares_->concentration;
}

void RoutingSource::route(std::uint32_t request, std::uint32_t position, int moe_layer, std::span<ExpertId> out) const {
  if (moe_layer < 0 || moe_layer >= shape_.moe_layers)
    throw std::out_of_range("RoutingSource::route: MoE layer " + std::to_string(moe_layer) + " not in [0, " +
                            std::to_string(shape_.moe_layers) + ")");
  if (out.size() != static_cast<std::size_t>(shape_.top_k))
    throw std::invalid_argument("RoutingSource::route: output holds " + std::to_string(out.size()) + " ids, top_k is " +
                                std::to_string(shape_.top_k));
  do_route(request, position, moe_layer, out.data());
}

void RoutingSource::route_token(std::uint32_t request, std::uint32_t position, std::span<ExpertId> out) const {
  route_tokens(request, position, 1, out);
}

void RoutingSource::route_tokens(std::uint32_t request, std::uint32_t first, std::uint32_t count,
                                 std::span<ExpertId> out) const {
  if (out.size() != static_cast<std::size_t>(count) * shape_.ids_per_token())
    throw std::invalid_argument("RoutingSource::route_tokens: output holds " + std::to_string(out.size()) +
                                " ids, " + std::to_string(count) + " tokens need " +
                                std::to_string(static_cast<std::size_t>(count) * shape_.ids_per_token()));
  if (count > 0 && first > std::numeric_limits<std::uint32_t>::max() - (count - 1))
    throw std::out_of_range("RoutingSource::route_tokens: positions overflow 32 bits");
  if (count > 0) do_route_tokens(request, first, count, out.data());
}

void RoutingSource::route_layers(std::uint32_t request, std::uint32_t first, std::uint32_t count,
                                 std::span<const int> layers, std::span<ExpertId> out) const {
  const TokenSpan span{request, first, count};
  route_layers(std::span<const TokenSpan>(&span, 1), layers, out);
}

void RoutingSource::route_layers(std::span<const TokenSpan> spans, std::span<const int> layers,
                                 std::span<ExpertId> out) const {
  std::size_t tokens = 0;
  for (const TokenSpan& s : spans) {
    if (s.count > 0 && s.first > std::numeric_limits<std::uint32_t>::max() - (s.count - 1))
      throw std::out_of_range("RoutingSource::route_layers: positions overflow 32 bits");
    tokens += s.count;
  }
  const std::size_t need = tokens * layers.size() * static_cast<std::size_t>(shape_.top_k);
  if (out.size() != need)
    throw std::invalid_argument("RoutingSource::route_layers: output holds " + std::to_string(out.size()) + " ids, " +
                                std::to_string(need) + " needed");
  for (std::size_t j = 0; j < layers.size(); ++j)
    if (layers[j] < 0 || layers[j] >= shape_.moe_layers || (j > 0 && layers[j] <= layers[j - 1]))
      throw std::out_of_range("RoutingSource::route_layers: layers must ascend inside [0, " +
                              std::to_string(shape_.moe_layers) + ")");
  if (tokens > 0 && !layers.empty())
    do_route_layers(spans.data(), spans.size(), layers.data(), static_cast<int>(layers.size()), out.data());
}

void RoutingSource::do_route_layers(const TokenSpan* spans, std::size_t num_spans, const int* layers, int num_layers,
                                    ExpertId* out) const {
  const std::size_t n = shape_.ids_per_token(), k = static_cast<std::size_t>(shape_.top_k);
  std::vector<ExpertId> token(n);
  for (std::size_t s = 0; s < num_spans; ++s) {
    for (std::uint32_t i = 0; i < spans[s].count; ++i) {
      do_route_tokens(spans[s].request, spans[s].first + i, 1, token.data());
      for (int j = 0; j < num_layers; ++j, out += k)
        std::copy_n(token.begin() + static_cast<std::ptrdiff_t>(layers[j]) * shape_.top_k, k, out);
    }
  }
}

void RoutingSource::do_route(std::uint32_t request, std::uint32_t position, int moe_layer, ExpertId* out) const {
  std::vector<ExpertId> token(shape_.ids_per_token());
  do_route_tokens(request, position, 1, token.data());
  std::copy_n(token.begin() + static_cast<std::ptrdiff_t>(moe_layer) * shape_.top_k, shape_.top_k, out);
}

bool is_synthetic_routing_spec(std::string_view spec) {
  return spec == "uniform" || spec == "synthetic" || spec.substr(0, 10) == "synthetic:";
}

std::unique_ptr<RoutingSource> make_routing(const std::string& spec, const RoutingShape& shape) {
  validate_routing_shape(shape, "model");
  if (spec == "uniform") return std::make_unique<SyntheticRouting>(shape, uniform_routing_params(), spec);
  if (spec == "synthetic") return std::make_unique<SyntheticRouting>(shape, parse_synthetic_routing("", spec), spec);
  if (spec.rfind("synthetic:", 0) == 0)
    return std::make_unique<SyntheticRouting>(shape, parse_synthetic_routing(std::string_view(spec).substr(10), spec),
                                              spec);
  auto file = std::make_unique<RoutingTraceFile>(RoutingTraceFile::open(spec));
  const RoutingShape& fs = file->shape();
  if (fs.moe_layers != shape.moe_layers || fs.experts != shape.experts || fs.top_k != shape.top_k)
    throw InputError(spec, "", "routing trace has " + shape_dims(fs) + " but the model has " + shape_dims(shape));
  return file;
}

// ---- RoutingTraceFile ----

RoutingTraceFile RoutingTraceFile::open(const std::string& path) {
  // Up to 8 GiB, the size `trace generate` writes at most; devices are refused.
  return RoutingTraceFile(read_text_file(path, std::size_t{8} << 30), path);
}

RoutingTraceFile::RoutingTraceFile(std::string bytes, std::string source)
    : RoutingTraceFile(check(bytes, source), std::move(bytes), std::move(source)) {}

RoutingTraceFile::RoutingTraceFile(Layout&& layout, std::string&& bytes, std::string&& source)
    : RoutingSource(layout.shape, std::move(source)),
      bytes_(std::move(bytes)),
      first_token_(std::move(layout.first_token)),
      ids_offset_(layout.ids_offset),
      id_bytes_(layout.id_bytes) {}

RoutingTraceFile::Layout RoutingTraceFile::check(const std::string& b, const std::string& source) {
  auto need = [&](std::size_t off, std::size_t n, const std::string& what) {
    if (b.size() < off + n)
      throw InputError(source, offset_field(off, what),
                       "truncated: the field needs " + std::to_string(n) + " bytes, the file ends at byte " +
                           std::to_string(b.size()));
  };
  auto field = [&](std::size_t off, const char* what, std::uint32_t lo, std::uint32_t hi) {
    need(off, 4, what);
    std::uint32_t v = read_u32(b, off);
    if (v < lo || v > hi)
      throw InputError(source, offset_field(off, what),
                       "value " + std::to_string(v) + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  };
  need(0, 4, "magic");
  if (std::memcmp(b.data(), kMagic, 4) != 0)
    throw InputError(source, offset_field(0, "magic"), "not a shardsim routing trace: expected \"SSRT\"");
  need(4, 4, "version");
  if (std::uint32_t v = read_u32(b, 4); v != kVersion)
    throw InputError(source, offset_field(4, "version"),
                     "unsupported version " + std::to_string(v) + ", this build reads version " + std::to_string(kVersion));
  Layout out;
  RoutingShape& s = out.shape;
  s.moe_layers = static_cast<int>(field(8, "num_moe_layers", 1, 1 << 20));
  s.experts = static_cast<int>(field(12, "num_experts", 1, 65536));
  s.top_k = static_cast<int>(field(16, "top_k", 1, static_cast<std::uint32_t>(s.experts)));
  std::uint32_t requests = field(20, "num_requests", 1, std::numeric_limits<std::uint32_t>::max());
  need(kHeaderBytes, 4 * static_cast<std::size_t>(requests), "token counts of " + std::to_string(requests) + " requests");
  auto& first = out.first_token;
  first.resize(static_cast<std::size_t>(requests) + 1);
  first[0] = 0;
  for (std::uint32_t r = 0; r < requests; ++r) {
    std::size_t off = kHeaderBytes + 4 * static_cast<std::size_t>(r);
    std::uint32_t c = read_u32(b, off);
    if (c == 0) throw InputError(source, offset_field(off, "tokens of request " + std::to_string(r)), "a request needs ≥ 1 token");
    first[r + 1] = first[r] + c;
  }
  out.id_bytes = id_bytes_for(s.experts);
  out.ids_offset = kHeaderBytes + 4 * static_cast<std::size_t>(requests);
  const std::uint64_t per_token = s.ids_per_token() * static_cast<std::size_t>(out.id_bytes);
  const std::uint64_t tokens = first.back();
  const std::uint64_t available = b.size() - out.ids_offset;
  if (tokens > available / per_token) {
    bool overflow = tokens > (std::numeric_limits<std::uint64_t>::max() - out.ids_offset) / per_token;
    throw InputError(source, offset_field(b.size(), "expert ids"),
                     "truncated: " + std::to_string(tokens) + " tokens × " + std::to_string(s.moe_layers) +
                         " MoE layers × top-" + std::to_string(s.top_k) + " need the file to end at byte " +
                         (overflow ? std::string("> 2^64") : std::to_string(out.ids_offset + tokens * per_token)) +
                         ", it ends at byte " + std::to_string(b.size()));
  }
  const std::size_t end = out.ids_offset + tokens * per_token;
  if (b.size() > end)
    throw InputError(source, offset_field(end, "end of expert ids"),
                     std::to_string(b.size() - end) + " unexpected trailing bytes");
  // Every id must name an expert. (Distinctness within a top-k is the writer's promise; not checked.)
  if (out.id_bytes == 2 || s.experts < 256) {
    const auto* p = reinterpret_cast<const unsigned char*>(b.data()) + out.ids_offset;
    const std::size_t n = tokens * s.ids_per_token();
    for (std::size_t i = 0; i < n; ++i) {
      unsigned id = out.id_bytes == 1 ? p[i] : (p[2 * i] | p[2 * i + 1] << 8);
      if (id < static_cast<unsigned>(s.experts)) continue;
      std::uint64_t token = i / s.ids_per_token();
      auto r = static_cast<std::size_t>(std::upper_bound(first.begin(), first.end(), token) - first.begin() - 1);
      std::size_t layer = (i % s.ids_per_token()) / static_cast<std::size_t>(s.top_k);
      throw InputError(source,
                       offset_field(out.ids_offset + i * static_cast<std::size_t>(out.id_bytes),
                                    "expert id of request " + std::to_string(r) + ", token " +
                                        std::to_string(token - first[r]) + ", MoE layer " + std::to_string(layer)),
                       "expert " + std::to_string(id) + " out of range [0, " + std::to_string(s.experts) + ")");
    }
  }
  return out;
}

std::uint32_t RoutingTraceFile::stored_tokens(std::uint32_t request) const {
  return static_cast<std::uint32_t>(first_token_.at(request + 1) - first_token_.at(request));
}

const unsigned char* RoutingTraceFile::token_ids(std::uint32_t request, std::uint32_t position) const {
  std::uint32_t r = request % num_requests();
  std::uint64_t stored = first_token_[r + 1] - first_token_[r];
  std::uint64_t token = first_token_[r] + position % stored;
  return reinterpret_cast<const unsigned char*>(bytes_.data()) + ids_offset_ +
         token * shape().ids_per_token() * static_cast<std::size_t>(id_bytes_);
}

void RoutingTraceFile::do_route_tokens(std::uint32_t request, std::uint32_t first, std::uint32_t count,
                                       ExpertId* out) const {
  const std::size_t n = shape().ids_per_token();
  for (std::uint32_t i = 0; i < count; ++i, out += n) {
    const unsigned char* p = token_ids(request, first + i);
    if (id_bytes_ == 1) {
      for (std::size_t j = 0; j < n; ++j) out[j] = p[j];
    } else {
      for (std::size_t j = 0; j < n; ++j) out[j] = static_cast<ExpertId>(p[2 * j] | p[2 * j + 1] << 8);
    }
  }
}

void RoutingTraceFile::do_route(std::uint32_t request, std::uint32_t position, int moe_layer, ExpertId* out) const {
  const std::size_t k = static_cast<std::size_t>(shape().top_k);
  const unsigned char* p = token_ids(request, position) + static_cast<std::size_t>(moe_layer) * k * static_cast<std::size_t>(id_bytes_);
  for (std::size_t j = 0; j < k; ++j)
    out[j] = id_bytes_ == 1 ? p[j] : static_cast<ExpertId>(p[2 * j] | p[2 * j + 1] << 8);
}

void RoutingTraceFile::do_route_layers(const TokenSpan* spans, std::size_t num_spans, const int* layers,
                                       int num_layers, ExpertId* out) const {
  for (std::size_t s = 0; s < num_spans; ++s)
    for (std::uint32_t i = 0; i < spans[s].count; ++i)
      for (int j = 0; j < num_layers; ++j, out += shape().top_k) do_route(spans[s].request, spans[s].first + i, layers[j], out);
}

std::string encode_routing_trace(const RoutingShape& shape, std::span<const std::uint32_t> token_counts,
                                 std::span<const ExpertId> ids) {
  std::string out = encode_header(shape, token_counts);
  std::uint64_t tokens = 0;
  for (std::uint32_t c : token_counts) tokens += c;
  if (ids.size() != tokens * shape.ids_per_token())
    throw std::invalid_argument("encode_routing_trace: " + std::to_string(ids.size()) + " ids for " +
                                std::to_string(tokens) + " tokens");
  out.reserve(out.size() + ids.size() * static_cast<std::size_t>(id_bytes_for(shape.experts)));
  append_ids(out, ids, shape);
  return out;
}

std::string encode_routing_trace(const RoutingSource& source, std::span<const std::uint32_t> token_counts) {
  const RoutingShape& shape = source.shape();
  std::string out = encode_header(shape, token_counts);
  std::uint64_t tokens = 0;
  for (std::uint32_t c : token_counts) tokens += c;
  out.reserve(out.size() + tokens * shape.ids_per_token() * static_cast<std::size_t>(id_bytes_for(shape.experts)));
  constexpr std::uint32_t kChunk = 1024;  // tokens routed per call
  std::vector<ExpertId> buf(kChunk * shape.ids_per_token());
  for (std::size_t r = 0; r < token_counts.size(); ++r) {
    for (std::uint32_t first = 0; first < token_counts[r]; first += kChunk) {
      std::uint32_t n = std::min(kChunk, token_counts[r] - first);
      std::span<ExpertId> ids(buf.data(), n * shape.ids_per_token());
      source.route_tokens(static_cast<std::uint32_t>(r), first, n, ids);
      append_ids(out, ids, shape);
    }
  }
  return out;
}

// ---- the synthetic generator ----

SyntheticRoutingParams uniform_routing_params() {
  SyntheticRoutingParams p;
  p.popularity = SyntheticRoutingParams::Popularity::Zipf;
  p.zipf = 0;
  p.beta = 0;
  p.locality = 0;
  p.affinity = 0;
  p.drift = 0;
  return p;
}

SyntheticRoutingParams parse_synthetic_routing(std::string_view text, const std::string& spec) {
  SpecParams p(spec, text);
  SyntheticRoutingParams r;
  std::string dist = p.choice_or("dist", "", {"zipf", "dirichlet"});
  if (dist.empty()) dist = p.has("zipf") ? "zipf" : "dirichlet";
  if (dist == "zipf" && p.has("alpha")) p.fail("alpha", "applies only to dist=dirichlet");
  if (dist == "dirichlet" && p.has("zipf")) p.fail("zipf", "applies only to dist=zipf");
  r.popularity = dist == "zipf" ? SyntheticRoutingParams::Popularity::Zipf : SyntheticRoutingParams::Popularity::Dirichlet;
  r.zipf = p.number_or("zipf", r.zipf, 0, 10);
  r.alpha = p.number_or("alpha", r.alpha, 1e-3, 1e6);
  r.domains = static_cast<int>(p.integer_or("domains", r.domains, 1, 4096));
  r.beta = p.number_or("beta", r.beta, 0, 1);
  r.domain_alpha = p.number_or("domain_alpha", r.domain_alpha, 1e-3, 1e6);
  r.locality = p.number_or("locality", r.locality, 0, 1);
  r.affinity = p.number_or("affinity", r.affinity, 0, 1);
  r.fanout = static_cast<int>(p.integer_or("fanout", r.fanout, 1, 16));
  r.n_group = static_cast<int>(p.integer_or("groups", 0, 1, 64));
  r.topk_group = static_cast<int>(p.integer_or("topk_groups", 0, 1, 64));
  r.drift = p.number_or("drift", r.drift, 0, 10);
  r.drift_period = static_cast<int>(p.integer_or("drift_period", r.drift_period, 1, 1'000'000'000));
  r.seed = p.seed_or("seed", r.seed);
  p.finish();
  return r;
}

namespace {
constexpr int kMaxTopK = 64;        // top_k bound of the generator
constexpr int kMaxGroups = 64;      // groups are a 64-bit mask
constexpr int kMaxFanout = 16;      // transition successors per expert
constexpr int kDriftEpochs = 64;    // precomputed drift epochs, replayed back and forth
constexpr double kDriftPhi = 0.9;   // AR(1) coefficient of the drift between epochs
constexpr double kFloor = 1e-9;     // minimum probability (relative), so no expert is unreachable
// Stream labels, so the random numbers of different purposes never coincide.
enum Stream : std::uint64_t { kPerm = 1, kDirichlet, kDrift, kDomainTable, kSuccessors, kDomainOf, kLocality, kRoute };

// Everything fixed for one request: which tables it reads.
struct RequestCtx {
  std::size_t pop = 0;     // popularity table of (drift epoch, layer 0)
  std::size_t domain = 0;  // domain table of (domain, layer 0), when has_domain
  bool has_domain = false;
};

double unit(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

std::vector<double> dirichlet_log_weights(int n, double alpha, SplitMix64& rng) {
  std::vector<double> w(static_cast<std::size_t>(n));
  for (double& x : w) x = std::log(std::max(rng.gamma(alpha), 1e-300));
  return w;
}
}  // namespace

// Precomputed, immutable tables and the sampling procedures over them. Table t (popularity of
// (drift epoch, layer), or of (domain, layer)) holds the probabilities, and per sampling segment
// its mass and an alias table for O(1) draws inside it.
struct SyntheticRouting::Tables {
  int L = 0, E = 0, k = 0, F = 1;
  int G = 1, TG = 1, group_size = 1;  // group-limited routing: TG of G groups of group_size experts
  bool limited = false;               // TG < G
  // Sampling segments: the groups when routing is group-limited, else one segment of all experts.
  int SG = 1, sg = 1;
  int epochs = 1;        // drift epochs precomputed
  int drift_period = 1;  // requests per drift epoch
  int domains = 0;       // 0 = no domain mixing
  double a = 0, beta = 0, rho = 0;
  std::uint64_t seed = 0;
  struct Alias {
    // Slot i is kept when the draw's low 32 bits x satisfy x ≤ keep_max: keep_max =
    // ⌈p·2³²⌉ − 1 for the slot's keep probability p rounded to float, so that integer test is
    // exactly the test x·2⁻³² < p (p > 0 always: kFloor) without a conversion or a float compare.
    std::uint32_t keep_max;
    ExpertId other;  // the expert taken otherwise
    static std::uint32_t threshold(double keep) {
      const double k = std::ceil(static_cast<double>(static_cast<float>(keep)) * 0x1.0p32);
      return k >= 1 ? static_cast<std::uint32_t>(std::min(k, 0x1.0p32) - 1) : 0;  // NaN too: no cast of it
    }
  };
  std::vector<Alias> alias;             // [t·E + i]: alias tables, one per segment
  std::vector<float> prob;              // [t·E + i]: probabilities (sum 1 per table)
  std::vector<double> segment_mass;     // [t·SG + s]
  std::vector<std::uint8_t> group_of;   // [expert] when limited
  std::vector<ExpertId> successors;     // [(layer·E + expert of layer−1)·F + j]

  std::size_t pop_table(int epoch, int layer) const { return static_cast<std::size_t>(epoch) * L + layer; }
  std::size_t domain_table(int domain, int layer) const {
    return static_cast<std::size_t>(epochs) * L + static_cast<std::size_t>(domain) * L + layer;
  }

  // The drift epoch table a request reads: epochs 0 … K−1, then back down and up again.
  int epoch_of(std::uint32_t request) const {
    if (epochs == 1) return 0;
    std::uint64_t e = request / static_cast<std::uint32_t>(drift_period);
    std::uint64_t cycle = 2 * static_cast<std::uint64_t>(epochs) - 2;
    e %= cycle;
    return static_cast<int>(e < static_cast<std::uint64_t>(epochs) ? e : cycle - e);
  }
  int domain_of(std::uint32_t request) const {
    if (domains == 0) return 0;
    return static_cast<int>(hash_combine(hash_combine(seed, kDomainOf), request) % static_cast<std::uint64_t>(domains));
  }
  RequestCtx context(std::uint32_t request) const {
    RequestCtx c;
    c.pop = pop_table(epoch_of(request), 0);
    c.has_domain = domains > 0;
    if (c.has_domain) c.domain = domain_table(domain_of(request), 0);
    return c;
  }

  // Token `pos` reuses token pos−1's experts at every layer with probability rho (one event per
  // token); token 0 never does.
  bool reuses(std::uint32_t request, std::uint32_t pos) const {
    if (pos == 0 || rho <= 0) return false;
    return unit(hash_combine(hash_combine(hash_combine(seed, kLocality), request), pos)) < rho;
  }
  // The last token at or before `pos` that drew fresh experts: O(1/(1−rho)) expected.
  std::uint32_t fresh_source(std::uint32_t request, std::uint32_t pos) const {
    if (rho >= 1) return 0;
    while (reuses(request, pos)) --pos;
    return pos;
  }
  std::uint64_t token_seed(std::uint32_t request, std::uint32_t pos) const {
    return hash_combine(hash_combine(hash_combine(seed, kRoute), request), pos);
  }
  static SplitMix64 layer_rng(std::uint64_t token_seed, int layer) {
    return SplitMix64(hash_combine(token_seed, static_cast<std::uint64_t>(layer)));
  }
  // All layers of a token that draws fresh experts; layer l conditions on layer l−1.
  void fresh_token(const RequestCtx& c, std::uint32_t request, std::uint32_t pos, ExpertId* out) const {
    const std::uint64_t ts = token_seed(request, pos);
    for (int l = 0; l < L; ++l) {
      SplitMix64 rng = layer_rng(ts, l);
      draw_layer(c, l, l > 0 ? out + (l - 1) * k : nullptr, rng, out + l * k);
    }
  }

  // Adds a table from unnormalised log-weights: probabilities, segment masses, and per segment
  // an alias table (Vose) of the distribution restricted to the segment.
  void add_table(std::vector<double> logw) {
    double mx = *std::max_element(logw.begin(), logw.end());
    double sum = 0;
    for (double& x : logw) sum += (x = std::exp(x - mx));
    std::vector<double> p(static_cast<std::size_t>(E));
    for (int i = 0; i < E; ++i) p[i] = (logw[i] / sum + kFloor / E) / (1 + kFloor);
    std::size_t base = alias.size();
    alias.resize(base + E, Alias{Alias::threshold(1.0), 0});
    std::vector<double> scaled(static_cast<std::size_t>(sg));
    std::vector<int> small, large;
    for (int s = 0; s < SG; ++s) {
      const int lo = s * sg;
      double mass = 0;
      for (int i = lo; i < lo + sg; ++i) mass += p[i];
      segment_mass.push_back(mass);
      small.clear();
      large.clear();
      for (int i = 0; i < sg; ++i) {
        scaled[i] = p[lo + i] * sg / mass;
        alias[base + lo + i].other = static_cast<ExpertId>(lo + i);
        (scaled[i] < 1 ? small : large).push_back(i);
      }
      while (!small.empty() && !large.empty()) {
        int sm = small.back(), lg = large.back();
        small.pop_back();
        alias[base + lo + sm] = Alias{Alias::threshold(scaled[sm]), static_cast<ExpertId>(lo + lg)};
        scaled[lg] -= 1 - scaled[sm];
        if (scaled[lg] < 1) {
          large.pop_back();
          small.push_back(lg);
        }
      }
    }
    for (int i = 0; i < E; ++i) prob.push_back(static_cast<float>(p[i]));
  }

  // An expert drawn by table t's whole distribution (a segment by its mass, then inside it).
  ExpertId draw_any(std::size_t t, SplitMix64& rng) const {
    double u = rng.uniform();
    int s = 0;
    while (s + 1 < SG && u >= segment_mass[t * SG + s]) u -= segment_mass[t * SG + s++];
    return alias_draw(t, s, rng.next());
  }

  // An expert of segment s of table t, drawn by the table's distribution within the segment.
  ExpertId alias_draw(std::size_t t, int s, std::uint64_t bits) const {
    std::size_t i = t * E + static_cast<std::size_t>(s) * sg +
                    static_cast<std::size_t>(((bits >> 32) * static_cast<std::uint64_t>(sg)) >> 32);
    // Branch-free: whether the slot is kept is a coin flip the predictor cannot learn.
    const Alias a = alias[i];
    const std::uint32_t keep = 0u - static_cast<std::uint32_t>(static_cast<std::uint32_t>(bits) <= a.keep_max);
    const std::uint32_t self = static_cast<std::uint32_t>(i - t * E);
    return static_cast<ExpertId>((self & keep) | (a.other & ~keep));
  }

  // One MoE layer of one fresh token: top-k distinct experts, drawn without replacement from the
  // mixture (1−a)·[(1−β)·popularity + β·domain] + a·transition(prev), restricted to the allowed
  // groups (themselves drawn first, by the mixture's group masses). Each draw picks a component
  // by its mass inside the allowed groups, then a group, then an expert (alias table), so only
  // repeats are rejected; this is exactly sampling without replacement from the restricted
  // mixture. After too many repeats the remaining slots come from explicit weights.
  void draw_layer(const RequestCtx& c, int l, const ExpertId* prev, SplitMix64& rng, ExpertId* out) const {
    const std::size_t pt = c.pop + l;
    const std::size_t dt = c.has_domain ? c.domain + l : pt;
    const double a_l = prev && a > 0 ? a : 0;
    const double b_l = c.has_domain ? beta : 0;
    // Transition candidates: the successors of the previous layer's experts (k·F, with repeats).
    ExpertId all[kMaxTopK * kMaxFanout];
    std::size_t na = 0;
    if (a_l > 0) {
      const ExpertId* succ = &successors[static_cast<std::size_t>(l) * E * F];
      for (int j = 0; j < k; ++j)
        for (int f = 0; f < F; ++f) all[na++] = succ[static_cast<std::size_t>(prev[j]) * F + f];
    }

    // The allowed segments.
    int seg[kMaxGroups];
    int nseg = 1;
    seg[0] = 0;
    std::uint64_t allowed = ~0ULL;
    if (limited) {
      double gm[kMaxGroups];
      for (int g = 0; g < G; ++g)
        gm[g] = (1 - a_l) * ((1 - b_l) * segment_mass[pt * SG + g] + b_l * segment_mass[dt * SG + g]);
      if (na > 0) {
        int hits[kMaxGroups] = {};
        for (std::size_t i = 0; i < na; ++i) ++hits[group_of[all[i]]];
        for (int g = 0; g < G; ++g) gm[g] += a_l * hits[g] / static_cast<double>(na);
      }
      allowed = 0;
      double total = 0;
      for (int g = 0; g < G; ++g) total += gm[g];
      for (nseg = 0; nseg < TG; ++nseg) {  // sequentially, without replacement, by mass
        double u = rng.uniform() * total;
        int chosen = -1;
        for (int g = 0; g < G; ++g) {
          if (allowed >> g & 1) continue;
          chosen = g;  // the last remaining group absorbs rounding
          if (u < gm[g]) break;
          u -= gm[g];
        }
        allowed |= 1ULL << chosen;
        seg[nseg] = chosen;
        total -= gm[chosen];
      }
    }
    // Component masses inside the allowed segments (cumulative over the segments).
    double cum_p[kMaxGroups], cum_d[kMaxGroups];
    double sp = 0, sd = 0;
    for (int j = 0; j < nseg; ++j) {
      cum_p[j] = (sp += segment_mass[pt * SG + seg[j]]);
      cum_d[j] = (sd += segment_mass[dt * SG + seg[j]]);
    }
    // Candidates inside the allowed groups (compacted in place).
    std::size_t nc = na;
    if (limited) {
      nc = 0;
      for (std::size_t i = 0; i < na; ++i) {  // branch-free: the keep/drop pattern is random
        all[nc] = all[i];
        nc += allowed >> group_of[all[i]] & 1;
      }
    }
    const double w_aff = na > 0 ? a_l * static_cast<double>(nc) / static_cast<double>(na) : 0;
    const double w_dom = (1 - a_l) * b_l * sd;
    const double w_pop = (1 - a_l) * (1 - b_l) * sp;
    const double w_all = w_aff + w_dom + w_pop;
    // A uniform position in a component's weight, mapped onto its mass inside the allowed segments.
    const double to_dom = w_dom > 0 ? sd / w_dom : 0, to_pop = w_pop > 0 ? sp / w_pop : 0;

    int filled = 0;
    const int max_attempts = 64 + 32 * k;
    for (int attempt = 0; filled < k && attempt < max_attempts; ++attempt) {
      double u = rng.uniform() * w_all;
      std::uint64_t bits = rng.next();
      ExpertId e;
      if (u < w_aff) {
        e = all[((bits >> 32) * nc) >> 32];
      } else {
        const bool dom = u - w_aff < w_dom;
        const double* cum = dom ? cum_d : cum_p;
        const double v = dom ? (u - w_aff) * to_dom : (u - w_aff - w_dom) * to_pop;
        int j = 0;
        for (int i = 0; i + 1 < nseg; ++i) j += v >= cum[i];  // the segment (branch-free)
        e = alias_draw(dom ? dt : pt, seg[j], bits);
      }
      if (std::find(out, out + filled, e) == out + filled) out[filled++] = e;
    }
    if (filled == k) return;
    // Rare (very skewed popularity): explicit weights over the eligible experts.
    auto eligible = [&](int e) {
      if (limited && !(allowed >> group_of[e] & 1)) return false;
      return std::find(out, out + filled, static_cast<ExpertId>(e)) == out + filled;
    };
    std::vector<double> w(static_cast<std::size_t>(E));
    for (int e = 0; e < E; ++e) w[e] = (1 - a_l) * ((1 - b_l) * prob[pt * E + e] + b_l * prob[dt * E + e]);
    for (std::size_t i = 0; i < nc; ++i) w[all[i]] += a_l / static_cast<double>(na);
    while (filled < k) {
      double total = 0;
      for (int e = 0; e < E; ++e)
        if (eligible(e)) total += w[e];
      double u = rng.uniform() * total;
      int pick = -1;
      for (int e = 0; e < E; ++e) {
        if (!eligible(e)) continue;
        pick = e;  // the last eligible expert absorbs rounding
        if (u < w[e]) break;
        u -= w[e];
      }
      out[filled++] = static_cast<ExpertId>(pick);
    }
  }
};

namespace {

// The generator precomputes one popularity table of E entries per (drift epoch or domain, layer).
// Specs beyond kMaxTableEntries (about a second and 300 MB) are refused instead of running for
// minutes into gigabytes: domains=4096 on a 58-layer, 256-expert model is 61 million entries.
constexpr double kMaxTableEntries = 16.0 * 1024 * 1024;

void check_table_size(int layers, int experts, int epochs, int domains, const std::string& source) {
  const double per_table = static_cast<double>(layers) * experts;
  const double entries = (epochs + domains) * per_table;
  if (entries <= kMaxTableEntries) return;
  std::ostringstream why;
  why << "needs " << static_cast<long long>(entries) << " popularity entries ((" << epochs
      << (epochs > 1 ? " drift epochs" : " table");
  if (domains > 0) why << " + " << domains << " domains";
  why << ") x " << layers << " MoE layers x " << experts << " experts); the generator holds at most "
      << static_cast<long long>(kMaxTableEntries);
  if (domains > 0)
    why << ": use at most " << std::max(0LL, static_cast<long long>(kMaxTableEntries / per_table) - epochs) << " domains";
  throw InputError(source, domains > 0 ? "domains" : epochs > 1 ? "drift" : "experts", why.str());
}

}  // namespace

SyntheticRouting::SyntheticRouting(const RoutingShape& shape, const SyntheticRoutingParams& params, std::string source)
    : RoutingSource(shape, source), params_(params) {
  validate_routing_shape(shape, source);
  auto fail = [&](const char* param, const std::string& reason) { throw InputError(source, param, reason); };
  auto t = std::make_unique<Tables>();
  t->L = shape.moe_layers;
  t->E = shape.experts;
  t->k = shape.top_k;
  if (t->k > kMaxTopK) fail("top_k", "synthetic routing supports top_k ≤ 64, the model has " + std::to_string(t->k));
  t->G = params.n_group > 0 ? params.n_group : shape.n_group;
  if (t->G > kMaxGroups) fail("groups", "synthetic routing supports ≤ 64 groups, got " + std::to_string(t->G));
  if (t->E % t->G != 0)
    fail("groups", std::to_string(t->G) + " groups do not divide " + std::to_string(t->E) + " experts");
  if (params.topk_group > t->G)
    fail("topk_groups", "expected ≤ groups = " + std::to_string(t->G) + ", got " + std::to_string(params.topk_group));
  t->TG = std::min(params.topk_group > 0 ? params.topk_group : shape.topk_group, t->G);
  t->group_size = t->E / t->G;
  t->limited = t->TG < t->G;
  t->SG = t->limited ? t->G : 1;
  t->sg = t->E / t->SG;
  if (t->limited)
    for (int e = 0; e < t->E; ++e) t->group_of.push_back(static_cast<std::uint8_t>(e / t->group_size));
  if (t->TG * t->group_size < t->k)
    fail(params.topk_group > 0 ? "topk_groups" : "groups",
         std::to_string(t->TG) + " of " + std::to_string(t->G) + " groups hold " + std::to_string(t->TG * t->group_size) +
             " experts, fewer than top_k = " + std::to_string(t->k));
  t->F = std::min(params.fanout, t->E);
  t->a = params.affinity;
  t->rho = params.locality;
  t->beta = params.beta;
  t->domains = params.beta > 0 ? params.domains : 0;
  t->epochs = params.drift > 0 ? kDriftEpochs : 1;
  t->drift_period = params.drift_period;
  t->seed = mix64(params.seed);
  check_table_size(t->L, t->E, t->epochs, t->domains, source);

  // Base log-popularity per layer: Zipf over a seeded permutation, or Dirichlet.
  std::vector<std::vector<double>> base(static_cast<std::size_t>(t->L));
  for (int l = 0; l < t->L; ++l) {
    if (params.popularity == SyntheticRoutingParams::Popularity::Zipf) {
      SplitMix64 rng(hash_combine(hash_combine(t->seed, kPerm), l));
      std::vector<int> perm(static_cast<std::size_t>(t->E));
      for (int i = 0; i < t->E; ++i) perm[i] = i;
      for (int i = t->E - 1; i > 0; --i) std::swap(perm[i], perm[static_cast<int>(rng.uniform() * (i + 1))]);
      base[l].resize(static_cast<std::size_t>(t->E));
      for (int rank = 0; rank < t->E; ++rank) base[l][perm[rank]] = -params.zipf * std::log(rank + 1.0);
    } else {
      SplitMix64 rng(hash_combine(hash_combine(t->seed, kDirichlet), l));
      base[l] = dirichlet_log_weights(t->E, params.alpha, rng);
    }
  }
  // Drift: log-popularity + x_e, x_0 = 0, x_e = φ·x_{e−1} + drift·√(1−φ²)·N(0, 1) per expert.
  std::vector<std::vector<double>> x(static_cast<std::size_t>(t->L), std::vector<double>(static_cast<std::size_t>(t->E), 0.0));
  std::vector<SplitMix64> drift_rng;
  for (int l = 0; l < t->L; ++l) drift_rng.emplace_back(hash_combine(hash_combine(t->seed, kDrift), l));
  const double innovation = params.drift * std::sqrt(1 - kDriftPhi * kDriftPhi);
  for (int e = 0; e < t->epochs; ++e) {
    for (int l = 0; l < t->L; ++l) {
      std::vector<double> logw = base[l];
      for (int i = 0; i < t->E; ++i) {
        if (e > 0) x[l][i] = kDriftPhi * x[l][i] + innovation * drift_rng[l].normal();
        logw[i] += x[l][i];
      }
      t->add_table(std::move(logw));
    }
  }
  // Domain popularity: Dirichlet(domain_alpha) per (domain, layer).
  for (int d = 0; d < t->domains; ++d)
    for (int l = 0; l < t->L; ++l) {
      SplitMix64 rng(hash_combine(hash_combine(hash_combine(t->seed, kDomainTable), d), l));
      t->add_table(dirichlet_log_weights(t->E, params.domain_alpha, rng));
    }
  // Sparse layer→layer transition: each expert of layer l−1 has F distinct successors at layer l,
  // drawn by layer l's base popularity.
  if (t->a > 0) {
    t->successors.assign(static_cast<std::size_t>(t->L) * t->E * t->F, 0);
    for (int l = 1; l < t->L; ++l) {
      SplitMix64 rng(hash_combine(hash_combine(t->seed, kSuccessors), l));
      for (int e = 0; e < t->E; ++e) {
        ExpertId* s = &t->successors[(static_cast<std::size_t>(l) * t->E + e) * t->F];
        int j = 0;
        for (int attempt = 0; j < t->F && attempt < 64 * t->F; ++attempt) {
          ExpertId c = t->draw_any(t->pop_table(0, l), rng);
          if (std::find(s, s + j, c) == s + j) s[j++] = c;
        }
        // Very skewed popularity: complete with the next unused experts after a random start.
        for (int c = static_cast<int>(rng.uniform() * t->E); j < t->F; c = (c + 1) % t->E)
          if (std::find(s, s + j, static_cast<ExpertId>(c)) == s + j) s[j++] = static_cast<ExpertId>(c);
      }
    }
  }
  t_ = std::move(t);
}

SyntheticRouting::~SyntheticRouting() = default;
SyntheticRouting::SyntheticRouting(SyntheticRouting&&) noexcept = default;

int SyntheticRouting::n_group() const { return t_->G; }
int SyntheticRouting::topk_group() const { return t_->TG; }
int SyntheticRouting::domain_of(std::uint32_t request) const { return t_->domain_of(request); }

double SyntheticRouting::popularity(std::uint32_t request, int moe_layer, int expert) const {
  if (moe_layer < 0 || moe_layer >= t_->L || expert < 0 || expert >= t_->E)
    throw std::out_of_range("SyntheticRouting::popularity: layer or expert out of range");
  return t_->prob[t_->pop_table(t_->epoch_of(request), moe_layer) * t_->E + expert];
}

void SyntheticRouting::do_route_tokens(std::uint32_t request, std::uint32_t first, std::uint32_t count,
                                       ExpertId* out) const {
  const Tables& t = *t_;
  const RequestCtx c = t.context(request);
  const std::size_t n = shape().ids_per_token();
  t.fresh_token(c, request, t.fresh_source(request, first), out);
  for (std::uint32_t i = 1; i < count; ++i) {
    ExpertId* dst = out + i * n;
    if (t.reuses(request, first + i)) std::copy_n(dst - n, n, dst);
    else t.fresh_token(c, request, first + i, dst);
  }
}

void SyntheticRouting::do_route_layers(const TokenSpan* spans, std::size_t num_spans, const int* layers,
                                       int num_layers, ExpertId* out) const {
  const Tables& t = *t_;
  const std::size_t k = static_cast<std::size_t>(t.k), n = static_cast<std::size_t>(num_layers) * k;
  // The tokens that draw fresh experts (a span's first token draws its fresh source's), and those
  // that copy the previous token's.
  struct Fresh {
    RequestCtx c;
    std::uint64_t seed;
    ExpertId* dst;
  };
  thread_local std::vector<Fresh> fresh;
  thread_local std::vector<ExpertId*> reused;
  thread_local std::vector<ExpertId> chains;  // per fresh token: its last two drawn layers
  fresh.clear();
  reused.clear();
  ExpertId* dst = out;
  for (const TokenSpan* s = spans; s != spans + num_spans; ++s) {
    const RequestCtx c = t.context(s->request);
    for (std::uint32_t i = 0; i < s->count; ++i, dst += n) {
      if (i == 0) fresh.push_back({c, t.token_seed(s->request, t.fresh_source(s->request, s->first)), dst});
      else if (t.reuses(s->request, s->first + i)) reused.push_back(dst);
      else fresh.push_back({c, t.token_seed(s->request, s->first + i), dst});
    }
  }
  chains.resize(fresh.size() * 2 * k);
  // Each listed layer drawn after its truncated chain (from l − depth, or on from the previous
  // listed layer when that is closer), layer by layer across the tokens.
  const int depth = t.a > 0 ? kChainDepth : 0;
  int last = -1;  // the last layer drawn; a token's experts there are in its chain[(last % 2)·k]
  for (int j = 0; j < num_layers; ++j) {
    const int l = layers[j];
    int m = std::max(0, l - depth);
    if (last >= m - 1 && last >= 0) m = last + 1;
    bool chained = last >= 0 && last == m - 1;
    for (; m <= l; ++m, chained = true) {
      for (std::size_t f = 0; f < fresh.size(); ++f) {
        ExpertId* chain = &chains[f * 2 * k];
        SplitMix64 rng = Tables::layer_rng(fresh[f].seed, m);
        t.draw_layer(fresh[f].c, m, chained ? chain + ((m - 1) % 2) * k : nullptr, rng, chain + (m % 2) * k);
      }
    }
    last = l;
    for (std::size_t f = 0; f < fresh.size(); ++f)
      std::copy_n(&chains[f * 2 * k + (l % 2) * k], k, fresh[f].dst + static_cast<std::size_t>(j) * k);
  }
  for (ExpertId* d : reused) std::copy_n(d - n, n, d);  // in token order: a copy of a copy is right
}

void SyntheticRouting::do_route(std::uint32_t request, std::uint32_t position, int moe_layer, ExpertId* out) const {
  const Tables& t = *t_;
  if (t.a > 0 && moe_layer > 0) {  // layers chain through the transition: route the whole token
    RoutingSource::do_route(request, position, moe_layer, out);
    return;
  }
  SplitMix64 rng = Tables::layer_rng(t.token_seed(request, t.fresh_source(request, position)), moe_layer);
  t.draw_layer(t.context(request), moe_layer, nullptr, rng, out);
}

// ---- statistics ----

ExpertLoad::ExpertLoad(const RoutingShape& shape)
    : shape_(shape), counts_(static_cast<std::size_t>(shape.moe_layers) * shape.experts, 0) {}

void ExpertLoad::add(std::span<const ExpertId> ids) {
  const std::size_t n = shape_.ids_per_token();
  if (ids.size() % n != 0)
    throw std::invalid_argument("ExpertLoad::add: " + std::to_string(ids.size()) + " ids are not whole tokens of " +
                                std::to_string(n));
  const std::size_t k = static_cast<std::size_t>(shape_.top_k), E = static_cast<std::size_t>(shape_.experts);
  const ExpertId* id = ids.data();
  for (std::size_t token = 0; token < ids.size() / n; ++token)
    for (std::size_t layer = 0; layer < static_cast<std::size_t>(shape_.moe_layers); ++layer)
      for (std::size_t j = 0; j < k; ++j, ++id) {
        if (*id >= E) throw std::out_of_range("ExpertLoad::add: expert id " + std::to_string(*id) + " out of range");
        ++counts_[layer * E + *id];
      }
  tokens_ += ids.size() / n;
}

std::span<const std::uint64_t> ExpertLoad::layer(int moe_layer) const {
  if (moe_layer < 0 || moe_layer >= shape_.moe_layers) throw std::out_of_range("ExpertLoad::layer: MoE layer out of range");
  return std::span<const std::uint64_t>(counts_).subspan(static_cast<std::size_t>(moe_layer) * shape_.experts,
                                                        static_cast<std::size_t>(shape_.experts));
}

std::vector<std::uint64_t> ExpertLoad::total() const {
  std::vector<std::uint64_t> out(static_cast<std::size_t>(shape_.experts), 0);
  for (std::size_t i = 0; i < counts_.size(); ++i) out[i % out.size()] += counts_[i];
  return out;
}

Imbalance imbalance_of(std::span<const std::uint64_t> loads) {
  Imbalance im;
  if (loads.empty()) return im;
  const double n = static_cast<double>(loads.size());
  double sum = 0, mx = 0;
  for (auto x : loads) {
    sum += static_cast<double>(x);
    mx = std::max(mx, static_cast<double>(x));
  }
  if (sum <= 0) return im;
  im.max = mx;
  im.mean = sum / n;
  im.ratio = mx / im.mean;
  double var = 0;
  for (auto x : loads) var += (static_cast<double>(x) - im.mean) * (static_cast<double>(x) - im.mean);
  im.cv = std::sqrt(var / n) / im.mean;
  std::vector<std::uint64_t> sorted(loads.begin(), loads.end());
  std::sort(sorted.begin(), sorted.end());
  double weighted = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) weighted += static_cast<double>(i + 1) * static_cast<double>(sorted[i]);
  im.gini = 2 * weighted / (n * sum) - (n + 1) / n;
  return im;
}

ExpertPlacement ExpertPlacement::contiguous(int experts, int ranks) {
  ExpertPlacement p;
  p.ranks = ranks;
  p.rank_of_expert.resize(static_cast<std::size_t>(experts));
  for (int e = 0; e < experts; ++e)
    p.rank_of_expert[e] = static_cast<int>(static_cast<std::int64_t>(e) * ranks / experts);
  return p;
}

ExpertPlacement ExpertPlacement::round_robin(int experts, int ranks) {
  ExpertPlacement p;
  p.ranks = ranks;
  p.rank_of_expert.resize(static_cast<std::size_t>(experts));
  for (int e = 0; e < experts; ++e) p.rank_of_expert[e] = e % ranks;
  return p;
}

ExpertPlacement ExpertPlacement::make(std::string_view kind, int experts, int ranks, const std::string& source) {
  if (ranks < 1 || ranks > experts)
    throw InputError(source, "ep", "expected 1 … " + std::to_string(experts) + " EP ranks (the experts), got " +
                                       std::to_string(ranks));
  if (kind == "contiguous") return contiguous(experts, ranks);
  if (kind == "round-robin") return round_robin(experts, ranks);
  throw InputError(source, "placement", "unknown placement \"" + std::string(kind) + "\", expected contiguous or round-robin");
}

std::vector<std::uint64_t> rank_loads(std::span<const std::uint64_t> expert_loads, const ExpertPlacement& placement) {
  if (expert_loads.size() != placement.rank_of_expert.size())
    throw std::invalid_argument("rank_loads: " + std::to_string(expert_loads.size()) + " expert loads for a placement of " +
                                std::to_string(placement.rank_of_expert.size()) + " experts");
  std::vector<std::uint64_t> out(static_cast<std::size_t>(placement.ranks), 0);
  for (std::size_t e = 0; e < expert_loads.size(); ++e) out[placement.rank_of_expert[e]] += expert_loads[e];
  return out;
}

}  // namespace shardsim
