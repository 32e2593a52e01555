// common/json_reader.hpp — strict, self-explaining reading of JSON input files.
//
// Owns: parse_json (malformed text → InputError naming line and column) and JsonObject, a
// read-once view of one JSON object that knows its file and JSON pointer. Every accessor checks
// type and range and throws InputError(source, "/json/pointer", reason) on the first violation;
// finish() refuses keys nobody asked for ("unknown key"), so typos never pass silently.
// The key "comment" is always allowed (data files carry their sources there).
// Thread-safety: a JsonObject is a cursor over one object; use it from one thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardsim {

using json = nlohmann::json;

// Objects and arrays nested deeper than this are refused: printing or destroying a JSON value
// recurses once per level, and 100,000 levels overflowed the stack (no input of ours nests ten).
constexpr int kMaxJsonDepth = 128;

// Parses `text`; a syntax error becomes InputError(source, "line L, column C", "malformed JSON: …"),
// a number beyond a double or nesting deeper than kMaxJsonDepth an InputError naming its pointer.
json parse_json(std::string_view text, const std::string& source);

class JsonObject {
 public:
  // `value` must be a JSON object, else InputError(source, pointer or "/", "expected an object").
  JsonObject(const json& value, std::string source, std::string pointer = "");

  const std::string& source() const { return source_; }
  // The JSON pointer of `key` inside this object, e.g. "/fabric/levels".
  std::string pointer(std::string_view key) const;
  bool has(std::string_view key) const;

  // Numbers. Range bounds are inclusive; a missing required key is an error.
  double number(std::string_view key, double lo, double hi);
  double number_or(std::string_view key, double fallback, double lo, double hi);
  std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi);
  std::int64_t integer_or(std::string_view key, std::int64_t fallback, std::int64_t lo, std::int64_t hi);
  bool boolean_or(std::string_view key, bool fallback);
  std::string string(std::string_view key);
  std::string string_or(std::string_view key, std::string fallback);
  // A display name (common/display_text.hpp, name_problem: non-empty UTF-8 without control
  // characters, at most 4,096 bytes). The fallback (often a file's stem) is made printable instead
  // ("unnamed" when that leaves no valid name).
  std::string name(std::string_view key);
  std::string name_or(std::string_view key, std::string fallback);
  // A string that must be one of `choices`.
  std::string choice(std::string_view key, std::initializer_list<std::string_view> choices);
  std::string choice_or(std::string_view key, std::string fallback, std::initializer_list<std::string_view> choices);
  std::vector<std::int64_t> integer_array(std::string_view key, std::int64_t lo, std::int64_t hi);
  std::vector<std::int64_t> integer_array_or(std::string_view key, std::vector<std::int64_t> fallback,
                                             std::int64_t lo, std::int64_t hi);

  // Sub-objects and raw values (marked as read).
  JsonObject object(std::string_view key);
  const json& raw(std::string_view key);

  // Throws InputError for `key` of this object with `reason`.
  [[noreturn]] void fail(std::string_view key, const std::string& reason) const;
  // Throws for the first key that no accessor read.
  void finish() const;

 private:
  const json& get(std::string_view key, json::value_t kind, const char* expected);
  const json* value_;
  std::string source_;
  std::string pointer_;
  std::set<std::string, std::less<>> read_;
};

// `j` as JSON text for an output file or a reply: bytes that are not UTF-8 (a file name may hold
// them; Linux allows it) become U+FFFD instead of failing the whole write at the end.
inline std::string json_text(const json& j, int indent = -1) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

// "1.5e+12" style formatting of doubles for messages.
std::string format_number(double v);

}  // namespace shardsim
