// common/embedded.hpp — data files compiled into the binary.
//
// Owns: the table of embedded files (GPU specs, model presets, the default Azure trace), generated
// at configure time by CMakeLists.txt from topologies/data, workloads/models and workloads/traces.
// Names are repository-relative paths, e.g. "workloads/models/deepseek-v3.json".
// Thread-safety: read-only after static initialisation; safe from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardsim {

struct EmbeddedFile {
  std::string_view name;     // repository-relative path
  std::string_view content;  // bytes, not NUL-terminated in the view
};

// All embedded files, sorted by nothing in particular (generated order).
const std::vector<EmbeddedFile>& embedded_files();

// The content of the embedded file called `name`, if any.
std::optional<std::string_view> embedded_file(std::string_view name);

// Embedded files whose name starts with `prefix`, sorted by name.
std::vector<EmbeddedFile> embedded_files_under(std::string_view prefix);

// Reads a whole input file of at most `max_bytes` (else InputError naming the cap). Regular
// files and pipes the user named (`<(…)`, a FIFO) are read; devices and sockets are refused
// (`/dev/zero` was read until 4 GB), and a pipe that sends nothing for 30 s is an error, not
// a hang.
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{256} << 20;  // JSON inputs
std::string read_text_file(const std::string& path, std::size_t max_bytes = kMaxInputFileBytes);

}  // namespace shardsim
