// tests/fuzz/fuzz_common.hpp — what every fuzz target shares (docs/fuzzing.md).
//
// The contract the targets check: a loader either returns a value or refuses its input with
// shardsim::InputError (README: "every loader refuses bad input with one line naming the file,
// the field and the reason"). Everything else is a finding and aborts the run so libFuzzer saves
// the input: a crash or sanitizer report (ASan/UBSan, built in), a hang (-timeout), an exception
// that is not InputError (the command line would report it as an internal error, exit 1), or a
// failed check of the target's own invariants (FUZZ_CHECK: e.g. a written file that does not
// load back).
// Set SHARDSIM_FUZZ_ALLOW_STD=1 to accept any std::exception too (to fuzz past such a finding);
// SHARDSIM_FUZZ_STRICT=1 also runs valid inputs skipped for being slow (see strict()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <typeinfo>

#include "common/input_error.hpp"

namespace fuzz {

inline std::string as_string(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Prints the finding and aborts: libFuzzer writes the input to crash-<sha1>.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "\n==FUZZ FINDING== %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_CHECK(cond, detail)                                                                        \
  do {                                                                                                  \
    if (!(cond)) ::fuzz::finding(std::string("check failed at ") + __FILE__ + ":" + std::to_string(__LINE__) + \
                                 ": " #cond ": " + (detail));                                           \
  } while (0)

inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string_view(v) != "0";
}
inline bool allow_std_exceptions() {
  static const bool allow = env_flag("SHARDSIM_FUZZ_ALLOW_STD");
  return allow;
}
// SHARDSIM_FUZZ_STRICT=1 also runs the valid but slow inputs a target skips by default (large
// synthetic routing tables), which would otherwise starve the fuzzer under ASan.
inline bool strict() {
  static const bool on = env_flag("SHARDSIM_FUZZ_STRICT");
  return on;
}

// Runs a loader. True when it returned, false when it refused the input with InputError.
template <class Fn>
bool load(const char* what, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const shardsim::InputError& e) {
    FUZZ_CHECK(std::string_view(e.what()).find('\n') == std::string_view::npos, "InputError message spans lines");
    return false;
  } catch (const std::exception& e) {
    if (allow_std_exceptions()) return false;
    finding(std::string(what) + " threw " + typeid(e).name() + " (not shardsim::InputError): " + e.what());
  }
}

// Runs code that must not throw at all (writers, our own output read back, queries on a loaded value).
template <class Fn>
void must(const char* what, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    finding(std::string(what) + " threw " + typeid(e).name() + ": " + e.what());
  }
}

// A directory of this process's own (fuzz targets run in parallel, -fork/-jobs start several),
// removed at exit. For loaders that only take a path.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "shardsim-fuzz-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) finding("cannot create a temporary directory");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  // Writes `bytes` to `name` inside the directory; returns the path.
  std::string write(const std::string& name, std::string_view bytes) const {
    std::string p = (path_ / name).string();
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) finding("cannot write " + p);
    return p;
  }

 private:
  std::filesystem::path path_;
};

inline const TempDir& temp_dir() {
  static const TempDir dir;
  return dir;
}

}  // namespace fuzz
