// optimizers/search/study_dir.cpp — fresh start, staging folder, exchange and carry-over.
#include "optimizers/search/study_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "common/input_error.hpp"
#include "common/output_file.hpp"
#include "optimizers/search/journal.hpp"

namespace fs = std::filesystem;

namespace shardsim {

namespace {

// The target as an absolute path without a trailing separator.
fs::path normal_target(const std::string& target) {
  fs::path t = fs::absolute(target).lexically_normal();
  if (t.filename().empty()) t = t.parent_path();
  // A link to a folder stays a link: the outputs go into the folder it names. (The staging folder
  // was exchanged with the link itself: the link became a folder and the user's files moved out of
  // its target.)
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(t, ec))) {
    const fs::path real = fs::weakly_canonical(t, ec);
    if (ec) throw InputError(target, "--out", "cannot follow the link: " + ec.message());
    return real;
  }
  return t;
}

// "<parent>/.<name>.<tag>-<pid>": the staging or old folder beside `target`.
fs::path sibling(const fs::path& target, const char* tag, long pid) {
  std::string n = ".";
  n += target.filename().string();
  n += tag;
  n += std::to_string(pid);
  return target.parent_path() / n;
}

bool is_member(const std::string& name, const std::vector<std::string>& members) {
  return std::find(members.begin(), members.end(), name) != members.end();
}

// Puts back what an interrupted run left in `left` (a staging folder, or the swapped-out old study
// holding a user's files that publish() had not yet moved): the target itself when it is gone (two
// renames cut between), else every entry that is not one of `members` (what this program writes)
// into the target where the name is free. Members and empty inside-staging folders are removed;
// anything still there stays, with a line saying where — nothing the program did not write is
// ever deleted.
void recover_leftover(const fs::path& left, const fs::path& target, const std::vector<std::string>& members,
                      bool interrupted = true) {
  std::error_code ec;
  if (!fs::exists(target, ec) && fs::is_directory(left, ec)) {
    if (::rename(left.c_str(), target.c_str()) == 0) {
      std::cerr << "shardsim: " << target.string() << " was missing after an interrupted run; restored it from "
                << left.string() << "\n";
      return;
    }
  }
  long moved = 0, kept = 0;
  for (const auto& e : fs::directory_iterator(left, ec)) {
    const std::string n = e.path().filename().string();
    std::error_code step;
    if (is_member(n, members) && !fs::is_directory(e.symlink_status(step))) {
      fs::remove(e.path(), step);
    } else if (n.rfind(".staging-", 0) == 0 && fs::is_directory(e.symlink_status(step))) {
      recover_leftover(e.path(), target, members, interrupted);  // a staging folder inside: members only, or kept
      if (fs::exists(e.path(), step)) ++kept;
    } else if (!fs::exists(fs::symlink_status(target / n, step))) {
      fs::rename(e.path(), target / n, step);
      if (step) ++kept; else ++moved;
    } else {
      ++kept;
    }
  }
  if (moved > 0 && interrupted)
    std::cerr << "shardsim: moved " << moved << " of your files back into " << target.string()
              << " from an interrupted run's folder " << left.string() << "\n";
  if (kept == 0) {
    fs::remove(left, ec);  // empty now: only a directory, never its contents
  } else {
    std::cerr << "shardsim: kept " << left.string() << " (" << kept << " entries an interrupted run left there that "
              << "could not be put back into " << target.string() << "; nothing was deleted — move them yourself)\n";
  }
}

// Recovers the entries of `dir` named "<stem><pid>" whose process is gone (a killed run's leftovers).
void recover_leftovers(const fs::path& dir, const std::string& stem, const fs::path& target,
                       const std::vector<std::string>& members) {
  std::error_code ec;
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(stem, 0) != 0 || !fs::is_directory(e.symlink_status(ec))) continue;
    const long pid = std::strtol(n.c_str() + stem.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) found.push_back(e.path());
  }
  for (const auto& p : found) recover_leftover(p, target, members);
}

void recover_leftovers(const fs::path& target, const std::vector<std::string>& members) {
  for (const char* tag : {".staging-", ".old-"}) {
    std::string stem = sibling(target, tag, 0).filename().string();
    stem.pop_back();  // ".<name>.<tag>" without the pid
    recover_leftovers(target.parent_path(), stem, target, members);
  }
  std::error_code ec;
  if (fs::is_directory(target, ec)) recover_leftovers(target, ".staging-", target, members);
}

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) ::fsync(fd), ::close(fd);
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Exchanges folders `a` and `b` (renameat2 RENAME_EXCHANGE; else `b` → `old`, `a` → `b`).
// Returns where b's former content now is; nothing when neither worked (nothing moved then).
std::optional<fs::path> exchange(const fs::path& a, const fs::path& b, const fs::path& old) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return a;
  if (::rename(b.c_str(), old.c_str()) != 0) return std::nullopt;
  if (::rename(a.c_str(), b.c_str()) == 0) return old;
  ::rename(old.c_str(), b.c_str());  // put the old outputs back
  return std::nullopt;
}

// The study's journal, hard-linked (else copied) into the staging folder so the swap keeps it.
void link_journal(const fs::path& target, const fs::path& staging) {
  const fs::path journal = target / kJournalName;
  std::error_code ec;
  if (!fs::exists(journal, ec)) return;
  fs::create_hard_link(journal, staging / kJournalName, ec);
  if (ec) fs::copy_file(journal, staging / kJournalName, fs::copy_options::overwrite_existing, ec);
  if (ec) throw InputError(journal.string(), "--out", "cannot keep the journal: " + ec.message());
}

// Where the folder cannot be swapped (a mount point, a parent without write access): member by
// member, each file atomically, members the new set lacks removed. The journal stays.
void replace_members(const fs::path& staging, const fs::path& target, const std::vector<std::string>& members) {
  std::error_code ec;
  fs::create_directories(target, ec);
  for (const auto& m : members) {
    if (m == kJournalName) continue;
    if (fs::exists(staging / m, ec)) write_file_atomically((target / m).string(), read_file(staging / m));
    else if (fs::remove(target / m, ec); ec) throw InputError(target.string(), "--out", "cannot remove the old " + m + ": " + ec.message());
  }
}

}  // namespace

const std::vector<std::string>& study_members() {
  static const std::vector<std::string> members = {"results.json", "anytime.csv", "anytime.gp", "anytime.png",
                                                   "summary.md",   "best-plan.json", kJournalName};
  return members;
}

void prepare_study_dir(const std::string& dir, bool fresh) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) throw InputError(dir, "--out", "exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec) throw InputError(dir, "--out", "cannot create the directory: " + ec.message());
  if (!fresh) return;
  for (const auto& m : study_members()) {
    fs::remove(fs::path(dir) / m, ec);
    if (ec) throw InputError(dir, "--out", "cannot remove the old " + m + ": " + ec.message());
  }
}

OutputStaging::OutputStaging(const std::string& target, std::vector<std::string> members) : members_(std::move(members)) {
  const fs::path t = normal_target(target);
  target_ = t.string();
  recover_leftovers(t, members_);
  std::error_code ec;
  staging_ = sibling(t, ".staging-", ::getpid()).string();
  if (fs::create_directories(staging_, ec); !ec) return;
  // No write access beside the folder: stage inside it (published member by member).
  inside_ = true;
  staging_ = (t / (".staging-" + std::to_string(::getpid()))).string();
  ec.clear();
  fs::create_directories(staging_, ec);
  if (ec) throw InputError(staging_, "--out", "cannot create the staging directory: " + ec.message());
}

OutputStaging::~OutputStaging() {
  std::error_code ec;
  if (!published_) fs::remove_all(staging_, ec);
}

void OutputStaging::publish() {
  const fs::path t(target_), s(staging_);
  if (!inside_ && fs::is_directory(t)) {
    link_journal(t, s);
    if (auto old = exchange(s, t, sibling(t, ".old-", ::getpid()))) {
      published_ = true;
      recover_leftover(*old, t, members_, /*interrupted=*/false);  // the user's files, moved over
      fsync_dir(t.parent_path());
      return;
    }
  }
  replace_members(s, t, members_);  // the staging folder goes with the destructor
  fsync_dir(t);
}

}  // namespace shardsim
