// optimizers/search/study_dir.hpp — a search's output folder (a "study"): its members, a fresh start,
// and the whole set of outputs replaced at once.
//
// Owns: study_members(), prepare_study_dir() and OutputStaging.
// A study folder holds one study. A new study removes the old study's members (its journal too)
// before it scores anything; a resumed one keeps them. Outputs are written into a staging folder
// beside the study ("<parent>/.<name>.staging-<pid>") and swapped in as a whole: the current
// journal is hard-linked into the staging folder, the two folders are exchanged (renameat2
// RENAME_EXCHANGE; two renames where the file system lacks it), anything else the old folder held
// (a user's own files) is moved over, and the old folder is removed. So files of two runs are
// never side by side: a run without a feasible plan leaves no best-plan.json of an older run.
// Where the folder cannot be swapped (a mount point; no write access to its parent) the members
// are replaced one by one instead, each atomically, stale ones removed. A killed run's leftover
// staging or old folder is recovered by the next run into the same folder: files the program did
// not write (a user's, not yet carried over when the process died) are moved back, its own
// outputs removed, and whatever cannot be put back is kept and named on stderr — never deleted.
// Thread-safety: none; used from the command's thread.
#pragma once

#include <string>
#include <vector>

namespace shardsim {

// The files a search writes (journal.jsonl included).
const std::vector<std::string>& study_members();

// Creates `dir` if needed (InputError(dir, "--out", …) when it is not a directory or cannot be
// made); a `fresh` study removes the old study's members first.
void prepare_study_dir(const std::string& dir, bool fresh);

class OutputStaging {
 public:
  // Creates an empty staging folder beside `target`, whose output files are `members` (a search's
  // by default; `shardsim sweep` has its own): publish() replaces exactly those.
  explicit OutputStaging(const std::string& target, std::vector<std::string> members = study_members());
  ~OutputStaging();  // removes the staging folder unless published
  OutputStaging(const OutputStaging&) = delete;
  OutputStaging& operator=(const OutputStaging&) = delete;
  const std::string& dir() const { return staging_; }
  // Swaps the staging folder in for `target` (see the header comment).
  void publish();

 private:
  std::string target_, staging_;
  std::vector<std::string> members_;
  bool inside_ = false;              // staged inside the target (no swap possible)
  bool published_ = false;
};

}  // namespace shardsim
