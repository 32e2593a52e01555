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

}  // namespace

void check_output_path(const std::string& path) {
  fs::path p = resolve_target(path);
  std::error_code ec;
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(dir, ec)) throw InputError(path, "", "cannot write: directory " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0) cannot(path, errno);
}

void write_file_atomically(const std::string& path, std::string_view content) {
  const fs::path target = resolve_target(path);
  const std::string tmp = target.string() + ".tmp." + std::to_string(::getpid());
  struct stat old {};
  const bool existed = ::stat(target.c_str(), &old) == 0;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) cannot(path, errno);
  auto fail = [&](int err) {
    ::close(fd);
    std::remove(tmp.c_str());
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
    std::remove(tmp.c_str());
    cannot(path, err);
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    cannot(path, err);
  }
}

}  // namespace shardsim
