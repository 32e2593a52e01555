// common/output_file.hpp — writing result files all-or-nothing.
//
// Owns: write_file_atomically — writes to "<path>.tmp.<pid>" and renames over <path>, so a
// failed or interrupted run never leaves a half-written result. Throws InputError(path, "", …)
// when the directory is missing or not writable.
#pragma once

#include <string>
#include <string_view>

namespace shardsim {

void write_file_atomically(const std::string& path, std::string_view content);
// Refuses, before any work is done, a path that write_file_atomically could not write: a
// directory, or a file in a missing or unwritable directory. Throws InputError(path, "", reason).
void check_output_path(const std::string& path);

}  // namespace shardsim
