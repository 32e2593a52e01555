// tests/fuzz/fuzz_journal.cpp — a search study's journal.jsonl (optimizers/search/journal): read_journal
// on a file, as `search --resume`, `search merge` and `search compare` read one. A journal that
// loads keeps its invariants: one run per header run, each run's evaluations numbered 1…n, the
// valid prefix inside the file; checking it against itself (what --resume does) passes; the
// header's messages (check_same_study against an empty header) refuse with one line.
#include "checks.hpp"
#include "optimizers/search/journal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::as_string(data, size);
  const std::string path = fuzz::temp_dir().write("journal.jsonl", text);
  shardsim::JournalContents c;
  if (!fuzz::load("read_journal", [&] { c = shardsim::read_journal(path); })) return 0;
  FUZZ_CHECK(c.header.is_object() && c.header["runs"].is_array(), "a loaded header without runs");
  FUZZ_CHECK(c.runs.size() == c.header["runs"].size(), "runs and header disagree");
  FUZZ_CHECK(c.valid_bytes <= text.size(), "valid bytes past the end");
  long n = 0;
  for (const auto& run : c.runs) n += static_cast<long>(run.size());
  FUZZ_CHECK(n == c.evaluations, "evaluations miscounted");
  fuzz::must("check_same_study(itself)", [&] { shardsim::check_same_study(c.header, c.header, path); });
  (void)fuzz::load("check_same_study(other)", [&] {
    shardsim::check_same_study(c.header, shardsim::json{{"inputs", shardsim::json::object()}}, path);
  });
  return 0;
}
