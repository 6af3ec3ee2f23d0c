// JSON (RFC 8259), read strictly with the position of every value, and
// written with one string escaper: the one JSON of runner-host. It reads
// meta.json and the loop state of checkpoints (host/checkpoint/
// CheckpointMeta), safetensors headers (SafetensorsHeader.hpp) and
// `deepspeed_config` files (the zero strategy), and writes those, the
// metrics hook's lines and the profiler's traces.
//
// Why hand-written rather than a JSON library from Debian (nlohmann-json3-dev,
// simdjson): a DeepSpeed config's errors name the file, line and column of
// the value that is wrong ("ds.json:3:14: zero_optimization.stage: ..."),
// also when the JSON is well formed and its value is not what the key needs.
// nlohmann's DOM keeps no positions of values (only its syntax errors have
// one), and neither library says "trailing comma" or "comments are not JSON"
// where a config has one. What a reader of untrusted files needs besides is
// here too: duplicate keys, invalid UTF-8 and nesting deeper than
// kMaxDepth are errors (each a ParseError at the offending character), and
// integers keep their exact 64-bit value (as_uint64). The fuzz targets
// (tests/fuzz: safetensors_header, checkpoint_meta) run this code.
//
// Strict means: one value, surrounded by optional whitespace; no comments,
// trailing commas, single quotes, NaN/Infinity, leading zeros, control
// characters in strings or invalid UTF-8. Lines and columns are 1-based;
// columns count characters (UTF-8 code points), as editors do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rh::json {

// Where a value, a key or an error is in the text.
struct Position {
  size_t offset = 0;  // bytes from the start
  int line = 1;
  int column = 1;
  // "3:14"
  std::string str() const;
};

// A syntax error. what(): "line:column: message".
class ParseError : public std::runtime_error {
 public:
  ParseError(const Position& at, const std::string& message);
  const Position& at() const noexcept { return at_; }
  size_t offset() const noexcept { return at_.offset; }
  int line() const noexcept { return at_.line; }
  int column() const noexcept { return at_.column; }
  const std::string& message() const noexcept { return message_; }

 private:
  Position at_;
  std::string message_;
};

// A well-formed document whose value is not what its reader needs (the
// typed reads below). what(): "line:column: key: message".
class TypeError : public std::invalid_argument {
 public:
  TypeError(const Position& at, const std::string& message);
  const Position& at() const noexcept { return at_; }

 private:
  Position at_;
};

struct Member;

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Kind kind = Kind::Null;
  Position at;
  bool boolean = false;         // Bool
  std::string text;             // String: the decoded string; Number: the literal as written
  bool integral = false;        // Number: written without fraction or exponent
  std::vector<Value> items;     // Array
  std::vector<Member> members;  // Object, in the order written

  bool is_null() const { return kind == Kind::Null; }
  bool is_object() const { return kind == Kind::Object; }
  bool is_array() const { return kind == Kind::Array; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Number; }

  // Member `key` of an object, or nullptr.
  const Value* find(std::string_view key) const;
  // A number written as an integer (no fraction or exponent) whose exact
  // value fits; nullopt otherwise (another kind too).
  std::optional<uint64_t> as_uint64() const;
  std::optional<int64_t> as_int64() const;
  // A number's value (every number read fits a double: see "out of range").
  double as_double() const;

  // "null", "a boolean", "a number", "a string", "an array", "an object".
  static const char* kind_name(Kind kind);
  const char* kind_name() const { return kind_name(kind); }
};

struct Member {
  std::string key;
  Position at;  // of the key
  Value value;
};

// Deepest nesting of arrays and objects a document may have.
constexpr int kMaxDepth = 64;

// Parses `text` as one JSON document. Throws ParseError.
Value parse(std::string_view text);

// Typed reads for documents of a known shape (meta.json, the loop state):
// member `key` of `object`, which must be of kind `kind`. Throws TypeError
// naming the key (a missing one at the object's position, one of another
// kind at its own). find_member: nullptr when absent.
const Value& member(const Value& object, std::string_view key, Value::Kind kind);
const Value* find_member(const Value& object, std::string_view key, Value::Kind kind);
// The integer member `key` (an integral number in int64's range); TypeError otherwise.
int64_t int64_member(const Value& object, std::string_view key);
std::optional<int64_t> find_int64_member(const Value& object, std::string_view key);
// The string member `key`; TypeError otherwise.
const std::string& string_member(const Value& object, std::string_view key);
// An array of strings (`what` names it in the error).
std::vector<std::string> string_items(const Value& array, std::string_view what);

// The one escaper: appends `s` as a JSON string literal (quotes included) to
// `out`: `"` and `\` escaped, \b \f \n \r \t as such, other control
// characters as \u00XX; every other byte as it is (the caller checks UTF-8
// with is_valid_utf8 where the text may not be).
void append_string(std::string& out, std::string_view s);
// The same, returned.
std::string quoted(std::string_view s);
// ["a", "b"]: strings as a JSON array on one line.
std::string string_array(const std::vector<std::string>& items);

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or
// code points above U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace rh::json
