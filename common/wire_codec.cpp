// common/wire_codec.cpp — see wire_codec.hpp.
#include "common/wire_codec.hpp"

#include <limits>

namespace shardsim {

// --- WireWriter -------------------------------------------------------------------------

void WireWriter::raw(const void* p, std::size_t n) { out_.append(static_cast<const char*>(p), n); }

void WireWriter::count(std::size_t n) {
  if (n > std::numeric_limits<std::uint32_t>::max())
    throw WireError("wire: a vector or string of " + std::to_string(n) + " elements is too long to encode");
  u32(static_cast<std::uint32_t>(n));
}

void WireWriter::string(std::string_view s) {
  count(s.size());
  raw(s.data(), s.size());
}

void WireWriter::doubles(const std::vector<double>& v) {
  count(v.size());
  raw(v.data(), v.size() * sizeof(double));
}

void WireWriter::ints(const std::vector<int>& v) {
  count(v.size());
  for (int x : v) i32(x);
}

void WireWriter::header(std::string_view tag4, std::uint32_t version) {
  raw(tag4.data(), 4);
  u32(version);
}

// --- WireReader -------------------------------------------------------------------------

void WireReader::truncated(std::size_t need) const {
  throw WireError("wire: truncated input: need " + std::to_string(need) + " bytes at offset " + std::to_string(pos_) +
                  ", " + std::to_string(remaining()) + " left");
}

void WireReader::raw(void* p, std::size_t n) {
  if (remaining() < n) truncated(n);
  if (n > 0) std::memcpy(p, in_.data() + pos_, n);
  pos_ += n;
}

std::uint32_t WireReader::count(std::size_t elem_bytes) {
  const std::uint32_t n = u32();
  if (elem_bytes > 0 && n > remaining() / elem_bytes)
    throw WireError("wire: truncated input: count " + std::to_string(n) + " at offset " + std::to_string(pos_ - 4) +
                    " needs more than the " + std::to_string(remaining()) + " bytes left");
  return n;
}

std::string WireReader::string() {
  std::string s(count(1), '\0');
  raw(s.data(), s.size());
  return s;
}

std::vector<double> WireReader::doubles() {
  std::vector<double> v(count(sizeof(double)));
  raw(v.data(), v.size() * sizeof(double));
  return v;
}

std::vector<int> WireReader::ints() {
  std::vector<int> v(count(sizeof(std::int32_t)));
  for (int& x : v) x = i32();
  return v;
}

void WireReader::header(std::string_view tag4, std::uint32_t version) {
  char tag[4];
  raw(tag, 4);
  if (std::string_view(tag, 4) != tag4)
    throw WireError("wire: expected a '" + std::string(tag4) + "' message, got tag '" + std::string(tag, 4) + "'");
  const std::uint32_t v = u32();
  if (v != version)
    throw WireError("wire: '" + std::string(tag4) + "' version " + std::to_string(v) + ", expected " +
                    std::to_string(version));
}

void WireReader::finish() const {
  if (remaining() != 0)
    throw WireError("wire: " + std::to_string(remaining()) + " unexpected bytes after the message at offset " +
                    std::to_string(pos_));
}

}  // namespace shardsim
