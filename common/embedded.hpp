// common/embedded.hpp — data files compiled into the binary.
//
// Owns: the table of embedded files (GPU specs, model presets, the default Azure trace), generated
// at configure time by CMakeLists.txt from topologies/data, workloads/models and workloads/traces.
// Names are repository-relative paths, e.g. "workloads/models/deepseek-v3.json".
// Thread-safety: read-only after static initialisation; safe from any thread.
#pragma once

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

// Reads a file from disk; throws InputError(path, "", reason) when it cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace shardsim
