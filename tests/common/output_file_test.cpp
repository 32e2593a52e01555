// tests/common/output_file_test.cpp — result files: all-or-nothing, onto what a path really names.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/input_error.hpp"
#include "common/output_file.hpp"

using namespace shardsim;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("shardsim-out-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("output files: a symlink stays a link, its target gets the content and keeps its mode") {
  TempDir d;
  fs::path real = d.path / "real.json", link = d.path / "link.json";
  { std::ofstream(real) << "old"; }
  ::chmod(real.c_str(), 0640);
  fs::create_symlink("real.json", link);
  write_file_atomically(link.string(), "new\n");
  CHECK(fs::is_symlink(fs::symlink_status(link)));
  CHECK(slurp(real) == "new\n");
  struct stat st {};
  REQUIRE(::stat(real.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  // A dangling link: the file it names is created.
  fs::create_symlink("later.json", d.path / "dangling.json");
  write_file_atomically((d.path / "dangling.json").string(), "x");
  CHECK(slurp(d.path / "later.json") == "x");
  // Nothing left behind.
  for (const auto& e : fs::directory_iterator(d.path)) CHECK(e.path().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("output files: devices, pipes and directories are refused, never replaced") {
  TempDir d;
  CHECK_THROWS_AS(write_file_atomically("/dev/null", "x"), InputError);
  CHECK_THROWS_AS(check_output_path("/dev/null"), InputError);
  CHECK(fs::is_character_file("/dev/null"));
  fs::path fifo = d.path / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_AS(write_file_atomically(fifo.string(), "x"), InputError);
  CHECK(fs::is_fifo(fifo));
  CHECK_THROWS_AS(write_file_atomically(d.path.string(), "x"), InputError);
  CHECK_THROWS_AS(check_output_path((d.path / "missing" / "x.json").string()), InputError);
}

TEST_CASE("output files: a link planted at the temp file's name is never followed") {
  TempDir d;
  const fs::path victim = d.path / "victim.txt", target = d.path / "out.json";
  std::ofstream(victim) << "precious\n";
  fs::create_symlink(victim, target.string() + ".tmp." + std::to_string(::getpid()));
  write_file_atomically(target.string(), "result\n");
  CHECK(slurp(target) == "result\n");
  CHECK(slurp(victim) == "precious\n");  // O_TRUNC through the link emptied it before
  CHECK(fs::is_symlink(target.string() + ".tmp." + std::to_string(::getpid())));  // not ours to remove
}

TEST_CASE("output files: /dev/stdout, /dev/fd/N and /proc/self/fd/N are written as the streams they are") {
  TempDir d;
  const fs::path log = d.path / "log.txt";
  std::ofstream(log) << "earlier lines\n";
  // The shell's `>> log.txt`: a descriptor opened for appending.
  const int fd = ::open(log.c_str(), O_WRONLY | O_APPEND);
  REQUIRE(fd >= 0);
  check_output_path("/proc/self/fd/" + std::to_string(fd));
  write_file_atomically("/proc/self/fd/" + std::to_string(fd), "result\n");
  write_file_atomically("/dev/fd/" + std::to_string(fd), "again\n");
  ::close(fd);
  CHECK(slurp(log) == "earlier lines\nresult\nagain\n");  // renamed over before: "result\n" alone
  CHECK_THROWS_AS(check_output_path("/dev/fd/987654"), InputError);
}

TEST_CASE("output files: a set is all or nothing — one that cannot be written leaves none of them") {
  TempDir t;
  const fs::path dir = t.path;
  {
    OutputSet set;
    set.add((dir / "a.json").string(), "{}\n");
    CHECK_THROWS_AS(set.add((dir / "missing" / "b.json").string(), "x"), InputError);
  }  // destroyed uncommitted: a.json's temp file goes, a.json never appears
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 0);
  OutputSet set;
  set.add((dir / "a.json").string(), "{}\n");
  set.add((dir / "b.csv").string(), "x\n");
  CHECK_FALSE(fs::exists(dir / "a.json"));  // nothing in place before commit
  set.commit();
  CHECK(slurp(dir / "a.json") == "{}\n");
  CHECK(slurp(dir / "b.csv") == "x\n");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 2);
}

TEST_CASE("output files: simulate on a full disk writes none of --json, --timeline (the file size limit stands in)") {
  TempDir t;
  const fs::path dir = t.path;
  // RLIMIT_FSIZE with SIGXFSZ ignored: a write past 64 KiB fails with EFBIG, as on a full disk. The
  // result JSON (~10 KiB) fits, the timeline (~1 MiB) does not; --json used to stay written.
  const std::string cmd = "cd '" + dir.string() + "' && bash -c \"trap '' XFSZ; ulimit -f 64; " + SHARDSIM_BINARY +
                          " simulate --model mixtral-8x7b --cluster dgx-h100:1 --requests 20 --json x.json --timeline t.json"
                          " >/dev/null 2>err.txt\"";
  const int status = std::system(cmd.c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(slurp(dir / "err.txt").find("t.json: cannot write") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "x.json"));
  CHECK_FALSE(fs::exists(dir / "t.json"));
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);  // err.txt only: no temp files
}

TEST_CASE("output files: a plot cut short by a full disk is not kept or reported as written") {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;  // no gnuplot: nothing is plotted anyway
  TempDir t;
  // compare's files are ~2 KiB each and its PNG ~35 KiB: with writes failing past 8 KiB, gnuplot cut
  // the image and still exited 0, and compare listed compare.png among what it wrote.
  const std::string cmd = "cd '" + t.path.string() + "' && bash -c \"trap '' XFSZ; ulimit -f 8; " + SHARDSIM_BINARY +
                          " compare --model mixtral-8x7b --cluster dgx-h100:1 --requests 10 --out c >out.txt 2>&1\"";
  const int status = std::system(cmd.c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::string out = slurp(t.path / "out.txt");
  CHECK(out.find("no plot") != std::string::npos);
  CHECK(out.find("compare.png") == std::string::npos);
  CHECK_FALSE(fs::exists(t.path / "c" / "compare.png"));
  CHECK(fs::exists(t.path / "c" / "compare.json"));
}
