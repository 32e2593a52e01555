// studies/run_program.cpp — posix_spawnp with a working directory, output discarded.
#include "studies/run_program.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

namespace shardsim {

bool run_quietly_in(const std::string& dir, const std::vector<std::string>& argv) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return false;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

namespace {

// True when `path` starts with the PNG signature and ends with an IEND chunk (length 0, type,
// CRC AE 42 60 82): what a PNG that was written to its end holds.
bool whole_png(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  char head[8] = {}, tail[12] = {};
  if (!f.read(head, 8) || std::memcmp(head, "\x89PNG\r\n\x1a\n", 8) != 0) return false;
  f.seekg(-12, std::ios::end);
  if (!f.read(tail, 12)) return false;
  return std::memcmp(tail, "\0\0\0\0IEND\xae\x42\x60\x82", 12) == 0;
}

}  // namespace

bool plot_png(const std::string& dir, const std::string& script, const std::string& png) {
  const std::string path = dir + "/" + png;
  if (run_quietly_in(dir, {"gnuplot", script}) && whole_png(path)) return true;
  std::remove(path.c_str());
  return false;
}

}  // namespace shardsim
