// common/output_file.cpp — temp file + rename.
#include "common/output_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/input_error.hpp"

namespace shardsim {

void check_output_path(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p(path);
  if (std::filesystem::is_directory(p, ec)) throw InputError(path, "", "is a directory, expected a file name");
  std::filesystem::path dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  if (!std::filesystem::is_directory(dir, ec)) throw InputError(path, "", "cannot write: directory " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0) throw InputError(path, "", std::string("cannot write: ") + std::strerror(errno));
}

void write_file_atomically(const std::string& path, std::string_view content) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, "", std::string("cannot write: ") + std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError(path, "", "write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw InputError(path, "", std::string("cannot write: ") + std::strerror(err));
  }
}

}  // namespace shardsim
