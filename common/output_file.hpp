// common/output_file.hpp — writing result files all-or-nothing.
//
// Owns: write_file_atomically and OutputSet (several files, all or none) — writes to "<file>.tmp.<pid>" (created exclusively, never through
// a link planted at that name), fsyncs it and renames it over <file>, so a failed or interrupted
// run never leaves a half-written result. <file> is what <path> names after following symlinks
// (the link itself is kept); an existing file keeps its mode; a path naming a device, pipe or
// socket is refused rather than replaced. /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N
// are this process's streams (the shell's redirections): written to as streams, never replaced.
// Throws InputError(path, "", …) when the directory is missing or not writable.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shardsim {

void write_file_atomically(const std::string& path, std::string_view content);

// Several result files written all-or-nothing (simulate's --json, --timeline, --requests-csv,
// --links): add() writes each to its temp file and fsyncs it, so a full disk or a bad path fails
// there with none of the set in place; commit() then renames them all. An OutputSet destroyed
// uncommitted (an exception on the way) removes its temp files.
class OutputSet {
 public:
  OutputSet() = default;
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;
  ~OutputSet();
  void add(const std::string& path, std::string_view content);
  void commit();

  struct Staged {
    std::string path, tmp, target;  // tmp empty: a stream (/dev/stdout, …), written at commit
    std::string stream_content;
  };

 private:
  std::vector<Staged> staged_;
};
// Refuses, before any work is done, a path that write_file_atomically could not write: a
// directory, a device/pipe/socket, or a file in a missing or unwritable directory. Throws InputError(path, "", reason).
void check_output_path(const std::string& path);

}  // namespace shardsim
