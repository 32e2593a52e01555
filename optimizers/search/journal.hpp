// optimizers/search/journal.hpp — the search journal: every finished evaluation of a study, append-only,
// so a killed or interrupted study can be resumed without re-simulating what it had done.
//
// Owns: the journal format, JournalWriter (appends batches, fsync'd) and read_journal().
// Format (JSON Lines, <study>/journal.jsonl):
//   line 1   {"schema": "shardsim.search-journal/1", "args": {...}, "inputs": {...}, "runs": [...]}
//            — the study's command-line options as given (to rebuild the command on resume), its
//            effective inputs (everything that determines results, with digests of the files) and
//            its runs [{optimizer, seed, budget}]; a resume must match inputs and runs exactly.
//   line 2…  one evaluation each: {"run": i (0-based), "optimizer", "seed", "eval": n (1-based in
//            its run), "key": canonical plan key, "genes": [...], "feasible", "objective",
//            "violation" (hex floats, "%a": exact), "failed", "reason", "sampled", "sample_failures",
//            "sample_error"}. A run's lines appear in evaluation order; runs interleave.
// A last line without its newline (or that does not parse) is a write torn by a kill: it is
// ignored and cut off before appending. Anything else malformed is refused with the line named.
// Thread-safety: JournalWriter::write is safe for concurrent use; the rest are plain functions.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/json_reader.hpp"
#include "optimizers/search/search_driver.hpp"

namespace shardsim {

inline constexpr const char* kJournalSchema = "shardsim.search-journal/1";
inline constexpr const char* kJournalName = "journal.jsonl";

struct JournalContents {
  json header;                                   // line 1
  std::vector<std::vector<ReplayEval>> runs;     // per run (header's runs), evaluations 1…n
  long evaluations = 0;
  std::uint64_t valid_bytes = 0;                 // up to the end of the last whole line
  bool torn = false;                             // a torn last line was ignored
};

// Reads a journal. Throws InputError(path, field, reason): missing, not a journal, a garbled line
// before the last, an evaluation out of order or naming an unknown run.
JournalContents read_journal(const std::string& path);

// Refuses (InputError(path, "/inputs/<field>" or "/runs", …)) a header whose inputs or runs differ
// from the journal's, naming the first differing field and both values.
void check_same_study(const json& journaled, const json& now, const std::string& path);

class JournalWriter {
 public:
  // Starts a new journal at `path` (replacing any) with `header` as line 1, fsync'd.
  JournalWriter(const std::string& path, const json& header);
  // Continues the journal at `path` after its first `valid_bytes` (a torn last line is cut off).
  JournalWriter(const std::string& path, std::uint64_t valid_bytes);
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;
  // Appends one line per evaluation in one write, then fdatasync.
  void write(const std::vector<ScoredEval>& batch, const std::vector<SearchRun>& runs);
  const std::string& path() const { return path_; }

 private:
  void append(const std::string& text);
  std::string path_;
  int fd_ = -1;
  std::mutex mu_;
};

// One evaluation as a journal line (no newline) and back; exposed for tests.
std::string journal_line(const ScoredEval& e, const SearchRun& run);

}  // namespace shardsim
