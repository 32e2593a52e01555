// common/output_file.cpp — temp file + fsync + rename, onto the file a path really names.
#include "common/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/input_error.hpp"

namespace shardsim {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void cannot(const std::string& path, int err) {
  throw InputError(path, "", std::string("cannot write: ") + std::strerror(err));
}

// The file `path` names once symlinks are followed (a link stays a link: its target is
// written); refuses existing targets that are not regular files — renaming over them replaced
// devices such as /dev/full when run as root.
fs::path resolve_target(const std::string& path) {
  fs::path p(path);
  std::error_code ec;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    if (hops > 40) throw InputError(path, "", "cannot write: too many levels of symbolic links");
    fs::path to = fs::read_symlink(p, ec);
    if (ec) cannot(path, ec.value());
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  fs::file_status st = fs::status(p, ec);
  if (fs::is_directory(st)) throw InputError(path, "", "is a directory, expected a file name");
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw InputError(path, "", "is not a regular file (a device, pipe or socket); refusing to replace it");
  return p;
}

// The descriptor a path names when it is one of this process's streams: /dev/stdout, /dev/stderr,
// /dev/fd/N or /proc/self/fd/N (−1 otherwise). Such a path is the shell's redirection: renaming a
// temp file over where it points replaced a log the shell opened for appending, and a pipe failed
// only after the whole run; it is written to as the stream it is.
int stream_fd(const std::string& path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const std::string pre(prefix);
    if (path.size() > pre.size() && path.compare(0, pre.size(), pre) == 0 &&
        path.find_first_not_of("0123456789", pre.size()) == std::string::npos && path.size() - pre.size() <= 9)
      return std::stoi(path.substr(pre.size()));
  }
  return -1;
}

// A temp file beside `target` that did not exist: O_EXCL | O_NOFOLLOW, so a link planted at the
// predictable name is never followed (nor removed); another name is tried when one is taken.
int open_temp(const fs::path& target, std::string& tmp) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp = target.string() + ".tmp." + std::to_string(::getpid()) + (attempt ? "." + std::to_string(attempt) : "");
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

}  // namespace

void check_output_path(const std::string& path) {
  if (const int fd = stream_fd(path); fd >= 0) {
    if (::fcntl(fd, F_GETFL) < 0) throw InputError(path, "", "cannot write: the stream is not open");
    return;
  }
  fs::path p = resolve_target(path);
  std::error_code ec;
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(dir, ec)) throw InputError(path, "", "cannot write: directory " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0) cannot(path, errno);
}

namespace {

// Writes `content` where `path` goes, as far as it can without touching `path`: into a temp file,
// fsync'd (a stream keeps its content for publish()).
OutputSet::Staged stage(const std::string& path, std::string_view content) {
  OutputSet::Staged st;
  st.path = path;
  if (stream_fd(path) >= 0) {  // the shell's redirection: written as a stream, at publish
    st.stream_content = std::string(content);
    return st;
  }
  const fs::path target = resolve_target(path);
  st.target = target.string();
  struct stat old {};
  const bool existed = ::stat(target.c_str(), &old) == 0;
  int fd = open_temp(target, st.tmp);
  if (fd < 0) cannot(path, errno);
  auto fail = [&](int err) {
    ::close(fd);
    std::remove(st.tmp.c_str());
    cannot(path, err);
  };
  for (std::size_t done = 0; done < content.size();) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
  if (existed && ::fchmod(fd, old.st_mode & 07777) != 0) fail(errno);  // keep the file's mode
  if (::fsync(fd) != 0) fail(errno);
  if (::close(fd) != 0) {
    int err = errno;
    std::remove(st.tmp.c_str());
    cannot(path, err);
  }
  return st;
}

// Renames a staged temp file over its target (or writes a stream's content).
void publish(const OutputSet::Staged& st) {
  if (st.tmp.empty()) {
    const int out = stream_fd(st.path);
    const std::string& content = st.stream_content;
    for (std::size_t done = 0; done < content.size();) {
      ssize_t n = ::write(out, content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) cannot(st.path, n < 0 ? errno : EIO);
      done += static_cast<std::size_t>(n);
    }
    return;
  }
  if (std::rename(st.tmp.c_str(), st.target.c_str()) != 0) {
    int err = errno;
    std::remove(st.tmp.c_str());
    cannot(st.path, err);
  }
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view content) { publish(stage(path, content)); }

void OutputSet::add(const std::string& path, std::string_view content) { staged_.push_back(stage(path, content)); }

void OutputSet::commit() {
  std::vector<Staged> all;
  all.swap(staged_);
  std::size_t i = 0;
  try {
    for (; i < all.size(); ++i) publish(all[i]);
  } catch (...) {
    for (std::size_t j = i + 1; j < all.size(); ++j)
      if (!all[j].tmp.empty()) std::remove(all[j].tmp.c_str());
    throw;
  }
}

OutputSet::~OutputSet() {
  for (const auto& st : staged_)
    if (!st.tmp.empty()) std::remove(st.tmp.c_str());
}

}  // namespace shardsim
