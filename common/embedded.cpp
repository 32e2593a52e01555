// common/embedded.cpp — lookups over the generated table of embedded files; reading files.
#include "common/embedded.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/input_error.hpp"

namespace shardsim {

std::optional<std::string_view> embedded_file(std::string_view name) {
  for (const auto& f : embedded_files())
    if (f.name == name) return f.content;
  return std::nullopt;
}

std::vector<EmbeddedFile> embedded_files_under(std::string_view prefix) {
  std::vector<EmbeddedFile> out;
  for (const auto& f : embedded_files())
    if (f.name.substr(0, prefix.size()) == prefix) out.push_back(f);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

namespace {

std::string size_text(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 30)) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (std::size_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace

std::string read_text_file(const std::string& path, std::size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw InputError(path, "", std::string("cannot open: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(path, "", std::string("cannot read: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw InputError(path, "", "is a directory, expected a file");
  const bool pipe = S_ISFIFO(st.st_mode);
  if (!S_ISREG(st.st_mode) && !pipe) throw InputError(path, "", "is not a regular file or a pipe (a device or socket)");
  if (!pipe && static_cast<std::size_t>(st.st_size) > max_bytes)
    throw InputError(path, "", "is " + size_text(static_cast<std::size_t>(st.st_size)) + ", more than the " +
                                   size_text(max_bytes) + " an input file may have");
  std::string text;
  if (!pipe) text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      if (text.size() + static_cast<std::size_t>(n) > max_bytes)
        throw InputError(path, "", "holds more than the " + size_text(max_bytes) + " an input file may have");
      text.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw InputError(path, "", std::string("read failed: ") + std::strerror(errno));
    pollfd p{fd, POLLIN, 0};  // a pipe with nothing yet: wait, but not forever
    int r = ::poll(&p, 1, 30'000);
    if (r == 0) throw InputError(path, "", "the pipe sent nothing for 30 s");
    if (r < 0 && errno != EINTR) throw InputError(path, "", std::string("read failed: ") + std::strerror(errno));
  }
  return text;
}

}  // namespace shardsim
