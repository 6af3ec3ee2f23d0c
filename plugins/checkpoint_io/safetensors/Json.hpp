// A small strict JSON (RFC 8259) parser and string writer: just what the
// safetensors header needs, without a dependency.
//
// Strict means: one value, surrounded by optional whitespace; no comments,
// trailing commas, single quotes, NaN/Infinity, leading zeros, control
// characters in strings or invalid UTF-8; duplicate object keys are an error;
// nesting is limited to kMaxDepth. Every error is a JsonError whose message
// says at which byte and what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rh::json {

class JsonError : public std::runtime_error {
 public:
  JsonError(size_t offset, const std::string& message);
  size_t offset() const noexcept { return offset_; }

 private:
  size_t offset_;
};

class Value {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };
  using Member = std::pair<std::string, Value>;

  Kind kind() const { return kind_; }
  bool is_object() const { return kind_ == Kind::Object; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_string() const { return kind_ == Kind::String; }

  bool as_bool() const { return bool_; }
  double as_double() const { return number_; }
  // True for a number written as a non-negative integer (no sign, fraction
  // or exponent) that fits in 64 bits; its exact value is as_uint64().
  bool is_uint64() const { return kind_ == Kind::Number && is_uint64_; }
  uint64_t as_uint64() const { return uint64_; }
  const std::string& as_string() const { return string_; }
  const std::vector<Value>& items() const { return items_; }
  // Object members in the order written.
  const std::vector<Member>& members() const { return members_; }
  // Member `key` of an object, or nullptr.
  const Value* find(std::string_view key) const;

  // "null", "a boolean", "a number", "a string", "an array", "an object".
  static const char* kind_name(Kind kind);

 private:
  friend class Parser;
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  double number_ = 0;
  bool is_uint64_ = false;
  uint64_t uint64_ = 0;
  std::string string_;
  std::vector<Value> items_;
  std::vector<Member> members_;
};

constexpr int kMaxDepth = 64;

// Parses `text` as one JSON value. Throws JsonError.
Value parse(std::string_view text);

// Appends `s` as a JSON string literal (quotes included) to `out`: `"` and
// `\` escaped, control characters as \n, \t... or \u00XX; other bytes as
// they are (the caller checks UTF-8 with is_valid_utf8 first).
void append_string(std::string& out, std::string_view s);

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or
// code points above U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace rh::json
