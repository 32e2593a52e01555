// common/embedded.cpp — lookups over the generated table of embedded files; reading files.
#include "common/embedded.hpp"

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

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(path, "", "is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", std::string("cannot open: ") + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw InputError(path, "", "read failed");
  return ss.str();
}

}  // namespace shardsim
