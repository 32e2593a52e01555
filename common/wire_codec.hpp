// common/wire_codec.hpp — a compact binary encoding for messages between a process and the
// workers of its pool (common/worker_pool.hpp): values written and read back in order.
//
// Owns: WireError, WireWriter / WireReader (u8/u32/i32/u64/f64, strings, vectors of doubles and
// ints, a message's tag and version). What a message holds is its user's: the simulator's step
// programs, timings and timelines are encoded in sim/simgrid/wire.hpp.
// Format: native byte order and widths, no padding — both ends are the same binary on the same
// machine, so this is not a file or network format. Each message starts with a 4-byte tag and a
// u32 version; a count precedes every vector or string. Doubles travel as their 64-bit patterns,
// so every value (including -0, NaN payloads, denormals) round-trips exactly.
// Invariants: a reader consumes exactly what the writer wrote; a truncated or over-long input, or a
// count the remaining input cannot hold, throws WireError — never reads out of bounds and never
// allocates more than the input could hold.
// Thread-safety: a writer or reader belongs to one thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace shardsim {

// A malformed message (what was being read and why it failed).
class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Appends values to a byte string.
class WireWriter {
 public:
  void u8(std::uint8_t v) { put(v); }
  void u32(std::uint32_t v) { put(v); }
  void i32(std::int32_t v) { put(v); }
  void u64(std::uint64_t v) { put(v); }
  void f64(double v) { put(v); }
  // An element count as u32; throws WireError when n does not fit.
  void count(std::size_t n);
  // A count then the elements. REQUIRES: fewer than 2^32 elements (throws WireError otherwise).
  void string(std::string_view s);
  void doubles(const std::vector<double>& v);
  void ints(const std::vector<int>& v);
  // The tag and version that open a message. REQUIRES: tag4.size() == 4.
  void header(std::string_view tag4, std::uint32_t version);

  std::string& bytes() { return out_; }
  std::string take() { return std::move(out_); }

 private:
  template <typename T>
  void put(T v) {  // inline: a program is thousands of small fields
    char bytes[sizeof v];
    std::memcpy(bytes, &v, sizeof v);
    out_.append(bytes, sizeof v);
  }
  void raw(const void* p, std::size_t n);
  std::string out_;
};

// Reads values back in the order they were written; throws WireError on truncated input.
class WireReader {
 public:
  explicit WireReader(std::string_view in) : in_(in) {}
  std::uint8_t u8() { return get<std::uint8_t>(); }
  std::uint32_t u32() { return get<std::uint32_t>(); }
  std::int32_t i32() { return get<std::int32_t>(); }
  std::uint64_t u64() { return get<std::uint64_t>(); }
  double f64() { return get<double>(); }
  std::string string();
  std::vector<double> doubles();
  std::vector<int> ints();
  // Checks the tag and version written by WireWriter::header. REQUIRES: tag4.size() == 4.
  void header(std::string_view tag4, std::uint32_t version);
  // A count of elements of `elem_bytes` each; refuses counts the remaining input cannot hold.
  std::uint32_t count(std::size_t elem_bytes);
  // Throws unless every byte has been read.
  void finish() const;
  std::size_t remaining() const { return in_.size() - pos_; }

 private:
  template <typename T>
  T get() {  // inline: a program is thousands of small fields
    if (remaining() < sizeof(T)) truncated(sizeof(T));
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  [[noreturn]] void truncated(std::size_t need) const;
  void raw(void* p, std::size_t n);
  std::string_view in_;
  std::size_t pos_ = 0;
};

}  // namespace shardsim
