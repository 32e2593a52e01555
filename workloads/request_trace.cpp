// workloads/request_trace.cpp — request-trace loaders (Azure CSV, Mooncake JSONL, synthetic),
// trace helpers and statistics, spec-parameter lists and the portable random source.
#include "workloads/request_trace.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <numbers>
#include <unordered_set>

#include "common/embedded.hpp"
#include "common/input_error.hpp"
#include "common/json_reader.hpp"

namespace shardsim {

namespace {

constexpr std::string_view kAzureEmbedded = "workloads/traces/azure_conv_2023.csv";
constexpr std::string_view kMooncakeSyntheticEmbedded = "workloads/traces/mooncake_synthetic_trace.jsonl";
constexpr std::string_view kAzureHeader = "TIMESTAMP,ContextTokens,GeneratedTokens";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    std::size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) return out;
    start = p + 1;
  }
}

// Calls fn(line_number, line) for each line (without "\r\n"), numbering from 1.
template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  std::size_t start = 0, number = 1;
  while (start < text.size()) {
    std::size_t p = text.find('\n', start);
    std::string_view line = text.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fn(number, line);
    if (p == std::string_view::npos) break;
    start = p + 1;
    ++number;
  }
}

std::string line_field(std::size_t line) { return "line " + std::to_string(line); }

// Sorts by arrival (stable, so equal timestamps keep file order) and makes arrivals relative.
void normalise(RequestTrace& t, const std::vector<double>& absolute) {
  std::vector<std::size_t> order(t.requests.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return absolute[a] < absolute[b]; });
  std::vector<Request> sorted;
  sorted.reserve(order.size());
  for (std::size_t i : order) sorted.push_back(t.requests[i]);
  double first = absolute[order.front()];
  for (std::size_t k = 0; k < order.size(); ++k) sorted[k].arrival_s = absolute[order[k]] - first;
  t.requests = std::move(sorted);
}

// Days since 1970-01-01 of a proleptic Gregorian date (only differences are used).
std::int64_t days_since_epoch(std::int64_t y, int m, int d) {
  static constexpr int cumulative[12] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
  auto leaps_before = [](std::int64_t year) {  // leap years in [1, year)
    std::int64_t p = year - 1;
    return p / 4 - p / 100 + p / 400;
  };
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  std::int64_t days = 365 * (y - 1970) + (leaps_before(y) - leaps_before(1970));
  return days + cumulative[m - 1] + (leap && m > 2 ? 1 : 0) + (d - 1);
}

bool parse_fixed_digits(std::string_view s, std::size_t pos, std::size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

// "2023-11-16 18:15:46.6805900" (or with 'T') → whole seconds since the epoch + fraction; a plain
// number is taken as seconds. Returns false on anything else.
bool parse_timestamp(std::string_view s, std::int64_t& whole, double& frac) {
  double plain;
  if (parse_double(s, plain)) {
    if (plain < 0 || plain > 1e15) return false;
    whole = static_cast<std::int64_t>(std::floor(plain));
    frac = plain - static_cast<double>(whole);
    return true;
  }
  int y, mo, d, h, mi, sec;
  if (s.size() < 19 || !parse_fixed_digits(s, 0, 4, y) || s[4] != '-' || !parse_fixed_digits(s, 5, 2, mo) ||
      s[7] != '-' || !parse_fixed_digits(s, 8, 2, d) || (s[10] != ' ' && s[10] != 'T') ||
      !parse_fixed_digits(s, 11, 2, h) || s[13] != ':' || !parse_fixed_digits(s, 14, 2, mi) || s[16] != ':' ||
      !parse_fixed_digits(s, 17, 2, sec))
    return false;
  static constexpr int month_days[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1 || d > month_days[mo - 1] || h > 23 || mi > 59 || sec > 60) return false;
  frac = 0;
  if (s.size() > 19) {
    if (s[19] != '.' || s.size() == 20) return false;
    double scale = 0.1;
    for (std::size_t i = 20; i < s.size(); ++i, scale /= 10) {
      if (s[i] < '0' || s[i] > '9') return false;
      frac += (s[i] - '0') * scale;
    }
  }
  whole = days_since_epoch(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
  return true;
}

int parse_tokens(std::string_view text, const std::string& source, std::size_t line, std::string_view column,
                 int minimum) {
  std::int64_t v;
  std::string where = line_field(line) + ": " + std::string(column);
  if (!parse_int64(text, v))
    throw InputError(source, where, "expected a whole number of tokens, got \"" + std::string(text) + "\"");
  if (v < 0) throw InputError(source, where, "negative token count " + std::to_string(v));
  if (v < minimum) throw InputError(source, where, "a request needs at least " + std::to_string(minimum) + " prompt token");
  if (v > INT_MAX) throw InputError(source, where, "token count " + std::to_string(v) + " too large");
  return static_cast<int>(v);
}

// ---- synthetic request traces ----

struct LengthDist {
  enum Kind { Fixed, Uniform, LogNormal } kind = Fixed;
  double a = 0, b = 0;   // fixed: a; uniform: [a, b]; lognormal: mean a, sigma b
  double max = 1e6;

  int sample(SplitMix64& rng, int minimum) const {
    double v = a;
    if (kind == Uniform) v = a + std::floor(rng.uniform() * (b - a + 1));
    if (kind == LogNormal) v = std::round(std::exp(std::log(a) - b * b / 2 + b * rng.normal()));
    return static_cast<int>(std::clamp(v, static_cast<double>(minimum), max));
  }
};

LengthDist parse_length(const SpecParams& p, std::string_view key, std::string_view text) {
  auto fail = [&]() {
    p.fail(key, "expected fixed:N, uniform:LO:HI or lognormal:MEAN:SIGMA[:MAX] with N, LO, HI, MEAN, MAX in "
                "[1, 1e6] and SIGMA in [0, 5], got \"" + std::string(text) + "\"");
  };
  auto parts = split(text, ':');
  std::vector<double> v;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    double x;
    if (!parse_double(parts[i], x)) fail();
    v.push_back(x);
  }
  auto count_ok = [&](double x) { return x >= 1 && x <= 1e6 && x == std::floor(x); };
  LengthDist d;
  if (parts[0] == "fixed" && v.size() == 1 && count_ok(v[0])) {
    d.kind = LengthDist::Fixed;
    d.a = v[0];
  } else if (parts[0] == "uniform" && v.size() == 2 && count_ok(v[0]) && count_ok(v[1]) && v[0] <= v[1]) {
    d.kind = LengthDist::Uniform;
    d.a = v[0];
    d.b = v[1];
  } else if (parts[0] == "lognormal" && (v.size() == 2 || v.size() == 3) && v[0] >= 1 && v[0] <= 1e6 && v[1] >= 0 &&
             v[1] <= 5 && (v.size() == 2 || count_ok(v[2]))) {
    d.kind = LengthDist::LogNormal;
    d.a = v[0];
    d.b = v[1];
    if (v.size() == 3) d.max = v[2];
  } else {
    fail();
  }
  return d;
}

}  // namespace

// ---- numbers ----

bool parse_double(std::string_view text, double& out) {
  text = trim(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && p == text.data() + text.size() && std::isfinite(out);
}

bool parse_int64(std::string_view text, std::int64_t& out) {
  text = trim(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && p == text.data() + text.size();
}

// ---- loaders ----

RequestTrace parse_azure_csv(std::string_view text, const std::string& source) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw InputError(source, "", "empty file, expected the header " + std::string(kAzureHeader));
  RequestTrace t;
  t.source = source;
  std::vector<double> absolute;
  std::size_t ncols = 0, c_time = 0, c_prompt = 0, c_output = 0;
  std::int64_t first_whole = 0;
  bool have_first = false;
  for_each_line(text, [&](std::size_t line, std::string_view row) {
    if (line == 1) {
      auto cols = split(row, ',');
      ncols = cols.size();
      bool found[3] = {false, false, false};
      for (std::size_t i = 0; i < cols.size(); ++i) {
        auto c = trim(cols[i]);
        if (!c.empty() && c.front() == '\xEF') c = trim(c.substr(std::min<std::size_t>(3, c.size())));  // UTF-8 BOM
        const int k = c == "TIMESTAMP" ? 0 : c == "ContextTokens" ? 1 : c == "GeneratedTokens" ? 2 : -1;
        if (k < 0) continue;
        if (found[k])  // which one was meant cannot be known: the second used to win silently
          throw InputError(source, line_field(line), "the column " + std::string(c) + " appears twice in the header");
        (k == 0 ? c_time : k == 1 ? c_prompt : c_output) = i;
        found[k] = true;
      }
      if (!found[0] || !found[1] || !found[2])
        throw InputError(source, line_field(line),
                         "expected the header " + std::string(kAzureHeader) + ", got \"" + std::string(row) + "\"");
      return;
    }
    if (trim(row).empty()) return;
    auto cols = split(row, ',');
    if (cols.size() != ncols)
      throw InputError(source, line_field(line),
                       "expected " + std::to_string(ncols) + " columns (" + std::string(kAzureHeader) + "), got " +
                           std::to_string(cols.size()));
    std::int64_t whole;
    double frac;
    auto ts = trim(cols[c_time]);
    if (!parse_timestamp(ts, whole, frac))
      throw InputError(source, line_field(line) + ": TIMESTAMP",
                       "expected \"YYYY-MM-DD HH:MM:SS[.fraction]\" or seconds, got \"" + std::string(ts) + "\"");
    if (!have_first) first_whole = whole, have_first = true;
    Request r;
    r.prompt_tokens = parse_tokens(cols[c_prompt], source, line, "ContextTokens", 1);
    r.output_tokens = parse_tokens(cols[c_output], source, line, "GeneratedTokens", 0);
    t.requests.push_back(r);
    absolute.push_back(static_cast<double>(whole - first_whole) + frac);  // exact whole-second differences
  });
  if (t.requests.empty()) throw InputError(source, "", "no requests after the header");
  normalise(t, absolute);
  return t;
}

// Tokens per hash_ids block in Mooncake's traces (and Dynamo's and AIPerf's readers of them).
constexpr int kMooncakeBlock = 512;

RequestTrace parse_mooncake_jsonl(std::string_view text, const std::string& source) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw InputError(source, "", "empty file, expected one JSON object per line");
  RequestTrace t;
  t.source = source;
  std::vector<double> absolute;
  for_each_line(text, [&](std::size_t line, std::string_view row) {
    if (trim(row).empty()) return;
    try {
      json j = parse_json(row, source);
      JsonObject o(j, source);
      double ms = o.number("timestamp", 0, 1e18);
      Request r;
      r.prompt_tokens = static_cast<int>(o.integer("input_length", 1, INT_MAX));
      r.output_tokens = static_cast<int>(o.integer("output_length", 0, INT_MAX));
      if (o.has("hash_ids")) {  // the prompt's blocks of 512 tokens (Mooncake's), by prefix id
        const json& ids = o.raw("hash_ids");
        if (!ids.is_array()) throw InputError(source, "/hash_ids", "expected an array of block ids");
        const std::size_t most = (static_cast<std::size_t>(r.prompt_tokens) + kMooncakeBlock - 1) / kMooncakeBlock;
        if (ids.size() > most)
          throw InputError(source, "/hash_ids",
                           std::to_string(ids.size()) + " block ids for input_length " + std::to_string(r.prompt_tokens) +
                               ", at most " + std::to_string(most) + " at Mooncake's " + std::to_string(kMooncakeBlock) +
                               " tokens per block");
        r.prefix_blocks.reserve(ids.size());
        for (const json& id : ids) {
          if (!id.is_number_integer() || id.get<std::int64_t>() < 0)
            throw InputError(source, "/hash_ids", "expected non-negative integer block ids, got " + id.dump());
          r.prefix_blocks.push_back(id.get<std::uint64_t>());
        }
        t.prefix_block_tokens = kMooncakeBlock;
      }
      o.finish();
      t.requests.push_back(r);
      absolute.push_back(ms / 1000.0);
    } catch (const InputError& e) {
      // parse_json numbers lines within `row` ("line 1, column C"); JsonObject names a pointer.
      std::string field = e.field();
      if (field.rfind("line 1", 0) == 0) field = field.substr(6);
      else if (!field.empty()) field = ": " + field;
      throw InputError(source, line_field(line) + field, e.reason());
    }
  });
  normalise(t, absolute);
  return t;
}

// An embedded trace, read by `parse` from `path` and named by its `spec`.
RequestTrace embedded_trace(const std::string& spec, std::string_view path, const char* what,
                            RequestTrace (*parse)(std::string_view, const std::string&)) {
  auto text = embedded_file(path);
  if (!text) throw InputError(spec, "", std::string("the embedded ") + what + " trace is missing from this build");
  RequestTrace t = parse(*text, "embedded:" + std::string(path));
  t.source = spec;
  return t;
}

RequestTrace load_request_trace(const std::string& spec) {
  if (spec == "azure-conv") return embedded_trace(spec, kAzureEmbedded, "Azure", parse_azure_csv);
  if (spec == "mooncake-synthetic") return embedded_trace(spec, kMooncakeSyntheticEmbedded, "Mooncake", parse_mooncake_jsonl);
  if (spec == "synthetic") return synthetic_request_trace("", spec);
  if (spec.rfind("synthetic:", 0) == 0) return synthetic_request_trace(std::string_view(spec).substr(10), spec);
  std::string text = read_text_file(spec, std::size_t{2} << 30);  // traces: up to 2 GiB
  auto first = text.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  if (first != std::string::npos && text[first] == '{') return parse_mooncake_jsonl(text, spec);
  return parse_azure_csv(text, spec);
}

RequestTrace synthetic_request_trace(std::string_view params, const std::string& spec) {
  SpecParams p(spec, params);
  auto n = p.integer_or("n", 1000, 1, 10'000'000);
  double rate = p.number_or("rate", 5.0, 1e-9, 1e9);
  std::string arrival = p.choice_or("arrival", "poisson", {"poisson", "gamma", "constant"});
  if (p.has("cv") && arrival != "gamma") p.fail("cv", "applies only to arrival=gamma");
  double cv = p.number_or("cv", 2.0, 0.01, 100);
  LengthDist prompt = parse_length(p, "prompt", p.string_or("prompt", "lognormal:1024:1.0"));
  LengthDist output = parse_length(p, "output", p.string_or("output", "lognormal:256:0.9"));
  std::uint64_t seed = p.seed_or("seed", 1);
  // system=TOKENS[:COUNT]: every prompt starts with one of COUNT shared system prompts of TOKENS
  // tokens (drawn uniformly), before its own drawn length; its blocks of `block` tokens carry ids
  // (Request::prefix_blocks) shared by the prompts with the same system prompt.
  long system_tokens = 0, systems = 1;
  if (const std::string v = p.string_or("system", ""); !v.empty() || p.has("system")) {
    const auto colon = v.find(':');
    std::int64_t a = 0, b = 1;
    if (!parse_int64(v.substr(0, colon), a) || a < 1 || a > 1'000'000 ||
        (colon != std::string::npos && (!parse_int64(v.substr(colon + 1), b) || b < 1 || b > 1'000'000)))
      p.fail("system", "expected TOKENS[:COUNT] (1 … 1,000,000 each), got \"" + v + "\"");
    system_tokens = a;
    systems = b;
  }
  const int block = static_cast<int>(p.integer_or("block", 16, 1, 1 << 16));
  // turns=T: conversations of T turns; turn k's prompt is the conversation so far (earlier
  // prompts and answers) and a new message of the drawn prompt length, sent an exponential think
  // time (mean `think` seconds) after the previous turn's arrival.
  const int turns = static_cast<int>(p.integer_or("turns", 1, 1, 1000));
  if (p.has("think") && turns == 1) p.fail("think", "applies only to turns > 1");
  const double think = p.number_or("think", 30.0, 0.0, 1e6);
  p.finish();

  // Separate streams, so changing one distribution leaves the other columns unchanged.
  SplitMix64 arrivals(hash_combine(seed, 1)), prompts(hash_combine(seed, 2)), outputs(hash_combine(seed, 3));
  double shape = 1.0 / (cv * cv);
  SplitMix64 pick(hash_combine(seed, 4)), thinking(hash_combine(seed, 5));
  const bool prefixed = system_tokens > 0 || turns > 1;
  RequestTrace t;
  t.source = spec;
  t.prefix_block_tokens = prefixed ? block : 0;
  t.requests.reserve(static_cast<std::size_t>(n));
  const double session_rate = rate / turns;  // conversations start at this rate: requests arrive at about `rate`
  constexpr long kMaxPrefixIds = 20'000'000;
  long prefix_ids = 0;
  double clock = 0;
  for (std::uint64_t s = 0; static_cast<long>(t.requests.size()) < n; ++s) {
    if (s > 0) {
      if (arrival == "poisson") clock += arrivals.exponential() / session_rate;
      else if (arrival == "gamma") clock += arrivals.gamma(shape) / (shape * session_rate);
      else clock += 1.0 / session_rate;
    }
    const std::uint64_t sys = system_tokens > 0 ? static_cast<std::uint64_t>(pick.uniform() * static_cast<double>(systems)) : 0;
    long history = system_tokens;  // tokens before this turn's new message
    double at = clock;
    for (int k = 0; k < turns && static_cast<long>(t.requests.size()) < n; ++k) {
      if (k > 0) at += think * thinking.exponential();
      Request r{at, 0, 0, {}};
      const long message = prompt.sample(prompts, 1);
      r.output_tokens = output.sample(outputs, 1);
      r.prompt_tokens = static_cast<int>(std::min<long>(history + message, 1L << 30));
      if (prefixed) {
        // The prompt's and its answer's blocks (the next turn repeats both): the system prompt's
        // whole blocks, then the conversation's own.
        const long shared = system_tokens / block, all = (r.prompt_tokens + r.output_tokens + block - 1) / block;
        if ((prefix_ids += all) > kMaxPrefixIds)  // 8 bytes each: refused before memory runs out
          p.fail("block", "the trace's prefix blocks would pass " + std::to_string(kMaxPrefixIds) +
                              " ids (requests × their tokens ÷ block): raise block or lower n, turns or the lengths");
        for (long j = 0; j < all; ++j)
          r.prefix_blocks.push_back(j < shared ? hash_combine(hash_combine(0x737973ULL, sys), static_cast<std::uint64_t>(j))
                                               : hash_combine(hash_combine(seed, s + 1), static_cast<std::uint64_t>(j) << 1 | 1));
      }
      history = std::min<long>(history + message + r.output_tokens, 1L << 30);
      t.requests.push_back(std::move(r));
    }
  }
  if (turns > 1)  // in arrival order; the first at 0 already
    std::stable_sort(t.requests.begin(), t.requests.end(), [](const Request& a, const Request& b) { return a.arrival_s < b.arrival_s; });
  return t;
}

PrefixReuse prefix_reuse(const RequestTrace& trace) {
  PrefixReuse u;
  u.block_tokens = trace.prefix_block_tokens;
  if (u.block_tokens <= 0) return u;
  std::unordered_set<std::uint64_t> seen;
  for (const Request& r : trace.requests) {
    u.prompt_tokens += r.prompt_tokens;
    if (r.prefix_blocks.empty()) continue;
    ++u.requests_with_blocks;
    const std::size_t usable = std::min(r.prefix_blocks.size(), static_cast<std::size_t>(std::max(0, r.prompt_tokens - 1) / u.block_tokens));
    std::size_t run = 0;
    while (run < usable && seen.count(r.prefix_blocks[run])) ++run;
    u.reusable_tokens += static_cast<std::int64_t>(run) * u.block_tokens;
    const std::size_t whole = std::min(r.prefix_blocks.size(), static_cast<std::size_t>((r.prompt_tokens + r.output_tokens) / u.block_tokens));
    seen.insert(r.prefix_blocks.begin(), r.prefix_blocks.begin() + static_cast<std::ptrdiff_t>(whole));
  }
  u.distinct_blocks = static_cast<std::int64_t>(seen.size());
  return u;
}

// ---- helpers and statistics ----

RequestTrace head(const RequestTrace& trace, std::size_t n) {
  RequestTrace t;
  t.source = trace.source;
  t.prefix_block_tokens = trace.prefix_block_tokens;
  t.requests.assign(trace.requests.begin(), trace.requests.begin() + static_cast<std::ptrdiff_t>(std::min(n, trace.requests.size())));
  return t;
}

RequestTrace scale_rate(const RequestTrace& trace, double factor) {
  if (!(factor > 0) || !std::isfinite(factor))
    throw InputError(trace.source, "rate scale", "expected a factor > 0, got " + format_number(factor));
  RequestTrace t = trace;
  for (auto& r : t.requests) r.arrival_s /= factor;
  return t;
}

RequestTrace at_rate(const RequestTrace& trace, double rate, Arrival shape, std::uint64_t seed) {
  if (!(rate > 0) || !std::isfinite(rate))
    throw InputError(trace.source, "rate", "expected requests per second > 0, got " + format_number(rate));
  RequestTrace t = trace;
  const std::size_t n = t.requests.size();
  if (n == 0) return t;
  const double span = t.requests.back().arrival_s - t.requests.front().arrival_s;
  if (shape == Arrival::Trace && n > 1 && span > 0) {
    const double factor = rate * span / static_cast<double>(n - 1);  // to a mean gap of 1/rate
    const double first = t.requests.front().arrival_s;
    for (auto& r : t.requests) r.arrival_s = (r.arrival_s - first) / factor;
    return t;
  }
  SplitMix64 rng(hash_combine(seed, 0x617272697661ULL));  // "arriva": its own stream of the seed
  double clock = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) clock += shape == Arrival::Poisson ? rng.exponential() / rate : 1.0 / rate;
    t.requests[i].arrival_s = clock;
  }
  return t;
}

Distribution distribution_of(std::vector<double> v) {
  Distribution d;
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  auto rank = [&](double pct) {
    auto k = static_cast<std::size_t>(std::ceil(pct / 100.0 * static_cast<double>(v.size())));
    return v[std::clamp<std::size_t>(k, 1, v.size()) - 1];
  };
  d.mean = sum / static_cast<double>(v.size());
  d.p50 = rank(50);
  d.p90 = rank(90);
  d.p99 = rank(99);
  d.max = v.back();
  return d;
}

RequestTraceStats request_trace_stats(const RequestTrace& trace) {
  RequestTraceStats s;
  s.count = trace.requests.size();
  if (s.count == 0) return s;
  s.duration_s = trace.requests.back().arrival_s - trace.requests.front().arrival_s;
  s.rate_per_s = s.count > 1 && s.duration_s > 0 ? static_cast<double>(s.count - 1) / s.duration_s : 0;
  std::vector<double> prompt, output;
  prompt.reserve(s.count);
  output.reserve(s.count);
  for (const auto& r : trace.requests) {
    prompt.push_back(r.prompt_tokens);
    output.push_back(r.output_tokens);
    s.prompt_tokens_total += r.prompt_tokens;
    s.output_tokens_total += r.output_tokens;
  }
  s.prompt = distribution_of(std::move(prompt));
  s.output = distribution_of(std::move(output));
  return s;
}

// ---- SpecParams ----

SpecParams::SpecParams(std::string spec, std::string_view params) : spec_(std::move(spec)) {
  if (trim(params).empty()) return;
  for (auto item : split(params, ',')) {
    item = trim(item);
    auto eq = item.find('=');
    if (item.empty()) fail("", "empty parameter (two commas in a row?)");
    if (eq == std::string_view::npos || eq == 0)
      fail(std::string(item), "expected key=value");
    std::string key(trim(item.substr(0, eq)));
    for (const auto& kv : items_)
      if (kv.first == key) fail(key, "given twice");
    items_.emplace_back(key, std::string(trim(item.substr(eq + 1))));
  }
}

void SpecParams::fail(std::string_view key, const std::string& reason) const {
  throw InputError(spec_, std::string(key), reason);
}

bool SpecParams::has(std::string_view key) const {
  for (const auto& kv : items_)
    if (kv.first == key) return true;
  return false;
}

const std::string* SpecParams::find(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
  for (const auto& kv : items_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

double SpecParams::number_or(std::string_view key, double fallback, double lo, double hi) {
  const std::string* v = find(key);
  if (!v) return fallback;
  double x;
  if (!parse_double(*v, x)) fail(key, "expected a number, got \"" + *v + "\"");
  if (x < lo || x > hi)
    fail(key, "value " + *v + " out of range [" + format_number(lo) + ", " + format_number(hi) + "]");
  return x;
}

std::int64_t SpecParams::integer_or(std::string_view key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  const std::string* v = find(key);
  if (!v) return fallback;
  std::int64_t x;
  if (!parse_int64(*v, x)) fail(key, "expected an integer, got \"" + *v + "\"");
  if (x < lo || x > hi)
    fail(key, "value " + *v + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

std::uint64_t SpecParams::seed_or(std::string_view key, std::uint64_t fallback) {
  const std::string* v = find(key);
  if (!v) return fallback;
  std::uint64_t x;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
  if (v->empty() || ec != std::errc() || p != v->data() + v->size())
    fail(key, "expected an unsigned 64-bit integer, got \"" + *v + "\"");
  return x;
}

std::string SpecParams::string_or(std::string_view key, std::string fallback) {
  const std::string* v = find(key);
  return v ? *v : fallback;
}

std::string SpecParams::choice_or(std::string_view key, std::string fallback,
                                  std::initializer_list<std::string_view> choices) {
  const std::string* v = find(key);
  if (!v) return fallback;
  std::string list;
  for (auto c : choices) {
    if (*v == c) return *v;
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  fail(key, "unknown value \"" + *v + "\", expected one of: " + list);
}

void SpecParams::finish() const {
  for (const auto& kv : items_) {
    if (std::find(known_.begin(), known_.end(), kv.first) != known_.end()) continue;
    std::string list;
    for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
    fail(kv.first, "unknown parameter (known: " + list + ")");
  }
}

// ---- SplitMix64 transforms ----

double SplitMix64::exponential() { return -std::log1p(-uniform()); }

double SplitMix64::normal() {
  double u1 = 1.0 - uniform();  // (0, 1]
  double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double SplitMix64::gamma(double shape) {
  if (shape < 1.0) {
    // Gamma(a) = Gamma(a + 1) · U^(1/a)
    double u = 1.0 - uniform();
    return gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x = normal(), v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = 1.0 - uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

}  // namespace shardsim
