// optimizers/search/journal.cpp — journal lines out (hex floats, one write + fdatasync per batch) and in
// (torn last line ignored, everything else checked).
#include "optimizers/search/journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/display_text.hpp"
#include "common/input_error.hpp"

namespace shardsim {

namespace {

std::string hex_double(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}

double parse_hex_double(JsonObject& o, std::string_view key) {
  const std::string s = o.string(key);
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) o.fail(key, "\"" + s + "\" is not a number (expected a hex float)");
  return x;
}

std::string errno_text() { return std::strerror(errno); }

// Line 1: the header.
json parse_header(const std::string& line, const std::string& path) {
  json h = json::parse(line, nullptr, false);
  if (h.is_discarded() || !h.is_object() || h.value("schema", "") != kJournalSchema)
    throw InputError(path, "line 1", std::string("not a search journal (expected schema ") + kJournalSchema + ")");
  for (const char* k : {"args", "inputs"})
    if (!h.contains(k) || !h[k].is_object()) throw InputError(path, std::string("line 1: /") + k, "expected an object");
  if (!h.contains("runs") || !h["runs"].is_array()) throw InputError(path, "line 1: /runs", "expected an array");
  // Every run names its optimizer, seed and budget: the readers (resume, merge, compare) index them
  // without asking again (a run without "optimizer" was read past a map's end).
  const json& runs = h["runs"];
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string at = "line 1: /runs/" + std::to_string(i);
    const json& r = runs[i];
    if (!r.is_object()) throw InputError(path, at, "expected an object");
    if (!r.contains("optimizer") || !r["optimizer"].is_string())
      throw InputError(path, at + "/optimizer", "expected an optimizer's name");
    if (const std::string why = name_problem(r["optimizer"].get<std::string>()); !why.empty())
      throw InputError(path, at + "/optimizer", "an optimizer's name " + why);
    if (!r.contains("seed") || !r["seed"].is_number_unsigned())
      throw InputError(path, at + "/seed", "expected a whole number ≥ 0");
    if (!r.contains("budget") || !r["budget"].is_number_integer())
      throw InputError(path, at + "/budget", "expected a whole number");
  }
  return h;
}

ReplayEval parse_entry(const json& j, const std::string& source, long line, std::size_t& run, long& index,
                       std::size_t runs) {
  JsonObject o(j, source);
  run = static_cast<std::size_t>(o.integer("run", 0, static_cast<std::int64_t>(runs) - 1));
  index = static_cast<long>(o.integer("eval", 1, std::numeric_limits<std::int64_t>::max()));
  (void)o.string("optimizer");
  (void)o.integer("seed", 0, std::numeric_limits<std::int64_t>::max());
  (void)o.integer_array("genes", std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  ReplayEval r;
  r.line = line;
  r.key = o.string("key");
  Score& s = r.eval.score;
  s.feasible = o.boolean_or("feasible", false);
  s.objective = parse_hex_double(o, "objective");
  s.violation = parse_hex_double(o, "violation");
  s.failed = o.boolean_or("failed", false);
  s.reason = o.string_or("reason", "");
  r.eval.faults.sampled = static_cast<long>(o.integer_or("sampled", 0, 0, std::numeric_limits<std::int64_t>::max()));
  r.eval.faults.failed = static_cast<long>(o.integer_or("sample_failures", 0, 0, std::numeric_limits<std::int64_t>::max()));
  r.eval.faults.error = o.string_or("sample_error", "");
  o.finish();
  return r;
}

std::string read_all(const std::string& path) {
  // A journal is a file the search wrote: anything else (a FIFO, which opening would wait on
  // forever, a device, a socket) is refused before it is opened.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
    throw InputError(path, "", "is not a regular file (a pipe, device or socket): not a journal 'shardsim search' wrote");
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw InputError(path, "", "cannot read the journal (" + errno_text() +
                                   "): the folder is not a study started by 'shardsim search'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The whole lines of `text` (without their newlines) and where each ends (after its newline).
void split_lines(const std::string& text, std::vector<std::string>& lines, std::vector<std::uint64_t>& ends) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // torn: no newline
    lines.push_back(text.substr(pos, nl - pos));
    ends.push_back(nl + 1);
    pos = nl + 1;
  }
}

// Adds line `n` (1-based) of the journal; false when it does not parse (a torn last line).
bool add_entry(JournalContents& c, const std::string& text, long n, const std::string& path) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  std::size_t run = 0;
  long index = 0;
  ReplayEval r = parse_entry(j, path + ": line " + std::to_string(n), n, run, index, c.runs.size());
  auto& seq = c.runs[run];
  if (index != static_cast<long>(seq.size()) + 1)
    throw InputError(path, "line " + std::to_string(n),
                     "/eval: evaluation " + std::to_string(index) + " of run " + std::to_string(run) + " out of order (expected " +
                         std::to_string(seq.size() + 1) + ")");
  seq.push_back(std::move(r));
  ++c.evaluations;
  return true;
}

}  // namespace

JournalContents read_journal(const std::string& path) {
  const std::string text = read_all(path);
  std::vector<std::string> lines;
  std::vector<std::uint64_t> ends;
  split_lines(text, lines, ends);
  if (lines.empty()) throw InputError(path, "line 1", "the journal has no complete header line (the study never started)");
  JournalContents c;
  c.header = parse_header(lines[0], path);
  c.runs.resize(c.header["runs"].size());
  c.valid_bytes = ends[0];
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const bool last = i + 1 == lines.size();
    if (!add_entry(c, lines[i], static_cast<long>(i) + 1, path)) {
      if (!last) throw InputError(path, "line " + std::to_string(i + 1), "not a JSON object (the journal is damaged)");
      c.torn = true;
      break;
    }
    c.valid_bytes = ends[i];
  }
  if (c.valid_bytes < text.size()) c.torn = true;
  return c;
}

namespace {

std::string show(const json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

}  // namespace

void check_same_study(const json& journaled, const json& now, const std::string& path) {
  const json& a = journaled["inputs"];
  const json& b = now["inputs"];
  for (auto it = a.begin(); it != a.end(); ++it) {
    const json other = b.contains(it.key()) ? b[it.key()] : json(nullptr);
    if (*it != other)
      throw InputError(path, "/inputs/" + it.key(),
                       "the study was started with " + show(*it) + ", this command gives " + show(other) +
                           " (a resumed study keeps its inputs)");
  }
  for (auto it = b.begin(); it != b.end(); ++it)
    if (!a.contains(it.key()))
      throw InputError(path, "/inputs/" + it.key(), "not recorded by the study (it was started by another version)");
  if (journaled["runs"] != now["runs"])
    throw InputError(path, "/runs", "the study's runs " + show(journaled["runs"]) + " differ from " + show(now["runs"]));
}

std::string journal_line(const ScoredEval& e, const SearchRun& run) {
  const Score& s = e.eval.score;
  json j = {{"run", e.run},
            {"optimizer", run.optimizer},
            {"seed", run.seed},
            {"eval", e.index},
            {"key", e.key},
            {"genes", e.genes},
            {"feasible", s.feasible},
            {"objective", hex_double(s.objective)},
            {"violation", hex_double(s.violation)},
            {"failed", s.failed},
            {"reason", s.reason},
            {"sampled", e.eval.faults.sampled},
            {"sample_failures", e.eval.faults.failed},
            {"sample_error", e.eval.faults.error}};
  return json_text(j);
}

JournalWriter::JournalWriter(const std::string& path, const json& header) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError(path, "", "cannot create the journal: " + errno_text());
  append(json_text(header) + "\n");
  // The new file's directory entry must survive a crash too.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) ::fsync(dfd), ::close(dfd);
}

JournalWriter::JournalWriter(const std::string& path, std::uint64_t valid_bytes) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw InputError(path, "", "cannot open the journal for appending: " + errno_text());
  if (::ftruncate(fd_, static_cast<off_t>(valid_bytes)) != 0)
    throw InputError(path, "", "cannot cut off the torn last line: " + errno_text());
}

JournalWriter::~JournalWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void JournalWriter::write(const std::vector<ScoredEval>& batch, const std::vector<SearchRun>& runs) {
  std::string text;
  for (const auto& e : batch) text += journal_line(e, runs.at(e.run)) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  append(text);
}

void JournalWriter::append(const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(path_, "", "cannot write the journal: " + errno_text());
    done += static_cast<std::size_t>(n);
  }
  if (::fdatasync(fd_) != 0 && errno != EINVAL) throw InputError(path_, "", "cannot sync the journal: " + errno_text());
}

}  // namespace shardsim
