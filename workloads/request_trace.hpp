// workloads/request_trace.hpp — request traces: when requests arrive and how many tokens they carry.
//
// Owns: Request / RequestTrace, the loaders behind one spec string (the embedded Azure
// conversation trace, Azure CSV files, Mooncake-style JSONL files, the `synthetic:` generator),
// helpers that cut and rescale a trace, and its summary statistics. Also owns two small pieces the
// synthetic routing generator shares: SpecParams (the `key=value,…` parameter lists of synthetic
// specs) and SplitMix64 (a portable seeded random source). Formats: docs/trace-formats.md.
// Units: seconds for times (arrivals relative to the first request), tokens for lengths.
// Invariants of a loaded RequestTrace: at least one request, arrivals sorted ascending with the
// first at 0, prompt_tokens ≥ 1, output_tokens ≥ 0.
// Errors: InputError naming the file and "line N", or the spec and the parameter name.
// Thread-safety: everything here is a value or a pure function; SpecParams and SplitMix64 are
// cursors for one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardsim {

struct Request {
  double arrival_s = 0;   // seconds after the first request of the trace
  int prompt_tokens = 0;  // ≥ 1
  int output_tokens = 0;  // ≥ 0: generated tokens
  // The request's blocks of RequestTrace::prefix_block_tokens tokens, each named by an id standing
  // for the whole prefix up to it (Mooncake's hash_ids): equal leading ids = a shared prefix, which
  // an engine's prefix cache serves (sim/serving/prefix_cache.hpp). The prompt's blocks (Mooncake),
  // or the prompt's and its answer's (synthetic conversations: the next turn repeats both, and the
  // engines cache generated blocks too). Empty: no prefix structure.
  std::vector<std::uint64_t> prefix_blocks;
};

struct RequestTrace {
  std::string source;              // the spec or path it came from, for messages and provenance
  std::vector<Request> requests;   // sorted by arrival_s, first at 0
  int prefix_block_tokens = 0;     // tokens per Request::prefix_blocks id (Mooncake: 512); 0 = none
};

// Loads a request trace from a spec:
//   azure-conv            the embedded Azure LLM inference trace 2023, conversation (19,366 requests)
//   mooncake-synthetic    the embedded Mooncake FAST'25 synthetic trace (3,993 requests, with hash_ids)
//   <path>                an Azure CSV (header TIMESTAMP,ContextTokens,GeneratedTokens) or a
//                         Mooncake-style JSONL file (one {"timestamp": ms, "input_length": …,
//                         "output_length": …} per line); told apart by the first character
//   synthetic[:k=v,…]     generated (see synthetic_request_trace)
RequestTrace load_request_trace(const std::string& spec);

// Parsers for text already in memory; `source` names it in errors.
RequestTrace parse_azure_csv(std::string_view text, const std::string& source);
RequestTrace parse_mooncake_jsonl(std::string_view text, const std::string& source);

// The generator behind "synthetic:…". `params` is the text after "synthetic:" (may be empty):
//   n=1000                          number of requests (1 … 10,000,000)
//   rate=5                          mean arrival rate, requests per second (> 0)
//   arrival=poisson                 poisson | gamma | constant (fixed spacing 1/rate)
//   cv=2                            coefficient of variation of gamma inter-arrivals (arrival=gamma only)
//   prompt=lognormal:1024:1.0       prompt-length distribution, see below
//   output=lognormal:256:0.9        output-length distribution, see below
//   seed=1                          any unsigned 64-bit integer
//   system=TOKENS[:COUNT]           every prompt starts with one of COUNT (1) shared system prompts
//                                   of TOKENS tokens, added to its drawn length; its blocks carry
//                                   prefix ids (Request::prefix_blocks), so a prefix cache serves them
//   turns=1                         conversations of this many turns: turn k's prompt is the whole
//                                   conversation so far plus a new message of the drawn prompt length
//                                   (its blocks shared with the earlier turns); conversations start at
//                                   rate/turns per second, so requests arrive at about `rate`
//   think=30                        mean seconds (exponential) between a conversation's turns (turns > 1)
//   block=16                        tokens per prefix block (with system= or turns > 1)
// Length distributions: fixed:N | uniform:LO:HI (inclusive) | lognormal:MEAN:SIGMA[:MAX]
// (MEAN is the arithmetic mean, SIGMA the standard deviation of the log; samples are rounded
// and clamped to [1, MAX], MAX defaulting to 1,000,000). Prompts are ≥ 1 token, outputs ≥ 1.
// `spec` names the whole spec in errors.
RequestTrace synthetic_request_trace(std::string_view params, const std::string& spec);

// The first `n` requests (all of them when n ≥ size).
RequestTrace head(const RequestTrace& trace, std::size_t n);
// The same requests arriving `factor` times faster (arrivals divided by factor; factor > 0).
RequestTrace scale_rate(const RequestTrace& trace, double factor);
// The same requests (lengths and order) offered at `rate` requests per second (rate > 0):
// Arrival::Poisson draws exponential gaps of mean 1/rate from `seed` (the same seed gives the
// same unit gaps at every rate, so a sweep's points differ only in rate); Arrival::Trace keeps
// the trace's own inter-arrival shape, rescaled to the mean 1/rate (a trace whose arrivals are
// all at 0 is spaced evenly). The first request arrives at 0.
enum class Arrival { Poisson, Trace };
RequestTrace at_rate(const RequestTrace& trace, double rate, Arrival shape, std::uint64_t seed);

struct Distribution {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;  // nearest-rank percentiles
};
Distribution distribution_of(std::vector<double> values);

// How much of a trace's prompts a prefix cache could serve: requests in arrival order, each block
// computed once and never evicted (an unbounded cache on one replica; a request's blocks, its
// answer's included, cached as soon as it arrives), hits at most all but the prompt's last token,
// whole blocks only — the ceiling any engine's hit rate stays under.
struct PrefixReuse {
  int block_tokens = 0;                 // RequestTrace::prefix_block_tokens (0: no prefix structure)
  std::int64_t prompt_tokens = 0;       // all requests'
  std::int64_t reusable_tokens = 0;     // found in that cache
  std::int64_t distinct_blocks = 0;
  std::int64_t requests_with_blocks = 0;
  double ceiling() const { return prompt_tokens > 0 ? static_cast<double>(reusable_tokens) / static_cast<double>(prompt_tokens) : 0; }
};
PrefixReuse prefix_reuse(const RequestTrace& trace);

struct RequestTraceStats {
  std::size_t count = 0;
  double duration_s = 0;     // last arrival (the first is at 0)
  double rate_per_s = 0;     // (count − 1) / duration: mean arrival rate; 0 for one request
  std::int64_t prompt_tokens_total = 0;
  std::int64_t output_tokens_total = 0;
  Distribution prompt;       // tokens per request
  Distribution output;
};
RequestTraceStats request_trace_stats(const RequestTrace& trace);

// ---- shared by the synthetic generators (request traces here, routing in routing_trace.cpp) ----

// The parameter list of a synthetic spec: "key=value,key=value". Each accessor marks its key as
// known; finish() refuses any key no accessor asked for, naming it and the known ones. Errors are
// InputError(spec, key, reason).
class SpecParams {
 public:
  SpecParams(std::string spec, std::string_view params);

  bool has(std::string_view key) const;
  double number_or(std::string_view key, double fallback, double lo, double hi);
  std::int64_t integer_or(std::string_view key, std::int64_t fallback, std::int64_t lo, std::int64_t hi);
  std::uint64_t seed_or(std::string_view key, std::uint64_t fallback);
  std::string string_or(std::string_view key, std::string fallback);
  std::string choice_or(std::string_view key, std::string fallback, std::initializer_list<std::string_view> choices);
  void finish() const;

  [[noreturn]] void fail(std::string_view key, const std::string& reason) const;
  const std::string& spec() const { return spec_; }

 private:
  const std::string* find(std::string_view key);
  std::string spec_;
  std::vector<std::pair<std::string, std::string>> items_;  // in spec order
  std::vector<std::string> known_;                         // keys asked for, in asking order
};

// Strict number parsing (whole text, finite); false when `text` is not a number.
bool parse_double(std::string_view text, double& out);
bool parse_int64(std::string_view text, std::int64_t& out);

// SplitMix64 (Steele, Lea & Flood 2014): tiny, fast, portable — a given seed yields the same
// numbers on every platform. The transforms are our own so results do not depend on the
// standard library's distribution implementations.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1), 53 bits
  double exponential();        // mean 1
  double normal();             // standard normal (Box–Muller)
  double gamma(double shape);  // Gamma(shape, 1), shape > 0 (Marsaglia–Tsang)

 private:
  std::uint64_t state_;
};

// A 64-bit mixing function (the SplitMix64 finaliser) and a combiner for hashing tuples into
// independent stream seeds.
inline std::uint64_t mix64(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
inline std::uint64_t hash_combine(std::uint64_t h, std::uint64_t v) { return mix64(h ^ mix64(v ^ 0x9e3779b97f4a7c15ULL)); }

}  // namespace shardsim
