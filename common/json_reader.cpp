// common/json_reader.cpp — strict JSON reading with file + pointer in every error.
#include "common/json_reader.hpp"

#include "common/display_text.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>
#include <vector>

#include "common/input_error.hpp"

namespace shardsim {

std::string format_number(double v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

namespace {

// Where the parser is, as a JSON pointer, and the keys seen in each open object (so that a
// duplicate key is refused instead of the last one silently winning).
class ParseTrail {
 public:
  explicit ParseTrail(const std::string& source) : source_(source) {}

  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= kMaxJsonDepth)
      throw InputError(source_, pointer(true), "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    switch (event) {
      case json::parse_event_t::object_start:
        enter_value();
        frames_.push_back({true, -1, "", {}});
        break;
      case json::parse_event_t::array_start:
        enter_value();
        frames_.push_back({false, -1, "", {}});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        break;
      case json::parse_event_t::key: {
        Frame& f = frames_.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) throw InputError(source_, pointer(), "duplicate key");
        break;
      }
      case json::parse_event_t::value:
        enter_value();
        break;
    }
    return true;
  }

  // The pointer of the value last read ("/degrees/tp", "/layers/3"), or with `pending` of the one
  // the parser is reading now (the next element when inside an array).
  std::string pointer(bool pending = false) const {
    std::string p;
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      int index = f.index + (pending && i + 1 == frames_.size() ? 1 : 0);
      p += "/" + (f.object ? f.key : std::to_string(std::max(0, index)));
    }
    return p.empty() ? "/" : p;
  }

 private:
  struct Frame {
    bool object;
    int index;  // arrays: the element being read
    std::string key;
    std::set<std::string> keys;
  };
  void enter_value() {
    if (!frames_.empty() && !frames_.back().object) frames_.back().index++;
  }
  const std::string& source_;
  std::vector<Frame> frames_;
};

}  // namespace

json parse_json(std::string_view text, const std::string& source) {
  ParseTrail trail(source);
  try {
    return json::parse(text.begin(), text.end(), std::ref(trail));
  } catch (const json::out_of_range& e) {
    // A number beyond a double (nlohmann's 406: "number overflow parsing '1e400'").
    std::string what = e.what();
    auto q = what.find("parsing '");
    std::string number = q == std::string::npos ? std::string() : what.substr(q + 9, what.find('\'', q + 9) - q - 9);
    if (number.size() > 40) number = number.substr(0, 40) + "…";
    throw InputError(source, trail.pointer(true), "number " + number + " is out of the range of a double");
  } catch (const json::parse_error& e) {
    // Locate the byte offset as line/column.
    std::size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    if (byte > text.size()) byte = text.size();
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < byte; ++i) {
      if (text[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    std::string what = e.what();
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
    auto p = what.find("syntax error");
    if (p == std::string::npos) p = what.find(": ");
    std::string reason = p == std::string::npos ? what : what.substr(p);
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) reason = "empty file, expected JSON";
    throw InputError(source, "line " + std::to_string(line) + ", column " + std::to_string(col),
                     "malformed JSON: " + reason);
  }
}

static const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "an unknown value";
  }
}

JsonObject::JsonObject(const json& value, std::string source, std::string pointer)
    : value_(&value), source_(std::move(source)), pointer_(std::move(pointer)) {
  if (!value.is_object())
    throw InputError(source_, pointer_.empty() ? "/" : pointer_,
                     std::string("expected an object, got ") + type_name(value));
}

std::string JsonObject::pointer(std::string_view key) const {
  std::string k(key);
  // JSON pointer escaping: ~ → ~0, / → ~1
  std::string esc;
  for (char c : k) {
    if (c == '~') esc += "~0";
    else if (c == '/') esc += "~1";
    else esc += c;
  }
  return pointer_ + "/" + esc;
}

bool JsonObject::has(std::string_view key) const { return value_->contains(key); }

void JsonObject::fail(std::string_view key, const std::string& reason) const {
  throw InputError(source_, pointer(key), reason);
}

const json& JsonObject::get(std::string_view key, json::value_t kind, const char* expected) {
  auto it = value_->find(key);
  if (it == value_->end()) fail(key, std::string("missing, expected ") + expected);
  read_.insert(std::string(key));
  const json& v = *it;
  bool ok = v.type() == kind;
  if (kind == json::value_t::number_float) ok = v.is_number();
  if (kind == json::value_t::number_integer) ok = v.is_number_integer();
  if (!ok) fail(key, std::string("expected ") + expected + ", got " + type_name(v));
  return v;
}

double JsonObject::number(std::string_view key, double lo, double hi) {
  double v = get(key, json::value_t::number_float, "a number").get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    fail(key, "value " + format_number(v) + " out of range [" + format_number(lo) + ", " + format_number(hi) + "]");
  return v;
}

double JsonObject::number_or(std::string_view key, double fallback, double lo, double hi) {
  return has(key) ? number(key, lo, hi) : fallback;
}

std::int64_t JsonObject::integer(std::string_view key, std::int64_t lo, std::int64_t hi) {
  auto it = value_->find(key);
  // Accept integral floats such as 8.0, refuse 8.5.
  if (it != value_->end() && it->is_number_float()) {
    read_.insert(std::string(key));
    double d = it->get<double>();
    if (d != std::floor(d)) fail(key, "expected an integer, got " + format_number(d));
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
      fail(key, "value " + format_number(d) + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<std::int64_t>(d);
  }
  const json& j = get(key, json::value_t::number_integer, "an integer");
  if (j.is_number_unsigned() && j.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    fail(key, "value " + std::to_string(j.get<std::uint64_t>()) + " out of range [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
  std::int64_t v = j.get<std::int64_t>();
  if (v < lo || v > hi)
    fail(key, "value " + std::to_string(v) + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

std::int64_t JsonObject::integer_or(std::string_view key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  return has(key) ? integer(key, lo, hi) : fallback;
}

bool JsonObject::boolean_or(std::string_view key, bool fallback) {
  return has(key) ? get(key, json::value_t::boolean, "true or false").get<bool>() : fallback;
}

std::string JsonObject::string(std::string_view key) {
  return get(key, json::value_t::string, "a string").get<std::string>();
}

std::string JsonObject::string_or(std::string_view key, std::string fallback) {
  return has(key) ? string(key) : fallback;
}

std::string JsonObject::name(std::string_view key) {
  std::string s = string(key);
  if (const std::string why = name_problem(s); !why.empty()) fail(key, why);
  return s;
}

std::string JsonObject::name_or(std::string_view key, std::string fallback) {
  if (has(key)) return name(key);
  std::string shown = terminal_safe(fallback);
  return name_problem(shown).empty() ? shown : "unnamed";  // empty or too long a file name
}

static std::string join_choices(std::initializer_list<std::string_view> choices) {
  std::string s;
  for (auto c : choices) {
    if (!s.empty()) s += ", ";
    s += c;
  }
  return s;
}

std::string JsonObject::choice(std::string_view key, std::initializer_list<std::string_view> choices) {
  std::string v = string(key);
  for (auto c : choices)
    if (v == c) return v;
  fail(key, "unknown value \"" + v + "\", expected one of: " + join_choices(choices));
}

std::string JsonObject::choice_or(std::string_view key, std::string fallback,
                                  std::initializer_list<std::string_view> choices) {
  return has(key) ? choice(key, choices) : fallback;
}

std::vector<std::int64_t> JsonObject::integer_array(std::string_view key, std::int64_t lo, std::int64_t hi) {
  const json& a = get(key, json::value_t::array, "an array of integers");
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const json& e = a[i];
    std::string where = pointer(key) + "/" + std::to_string(i);
    if (!e.is_number_integer()) throw InputError(source_, where, std::string("expected an integer, got ") + type_name(e));
    std::int64_t v = e.get<std::int64_t>();
    if (v < lo || v > hi)
      throw InputError(source_, where,
                       "value " + std::to_string(v) + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out.push_back(v);
  }
  return out;
}

std::vector<std::int64_t> JsonObject::integer_array_or(std::string_view key, std::vector<std::int64_t> fallback,
                                                       std::int64_t lo, std::int64_t hi) {
  return has(key) ? integer_array(key, lo, hi) : fallback;
}

JsonObject JsonObject::object(std::string_view key) {
  const json& v = get(key, json::value_t::object, "an object");
  return JsonObject(v, source_, pointer(key));
}

const json& JsonObject::raw(std::string_view key) {
  auto it = value_->find(key);
  if (it == value_->end()) fail(key, "missing");
  read_.insert(std::string(key));
  return *it;
}

void JsonObject::finish() const {
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    if (it.key() == "comment") continue;
    if (!read_.count(it.key())) fail(it.key(), "unknown key");
  }
}

}  // namespace shardsim
