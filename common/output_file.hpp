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

}  // namespace shardsim
