// JsonReader — a strict JSON (RFC 8259) reader that keeps the line and column
// of every value and key, for `deepspeed_config: ds.json` errors that point
// into the file ("ds.json:3:14: zero_optimization.stage: ...").
//
// Why not yaml-cpp (which the host uses): YAML accepts much that is not JSON
// (comments, trailing commas, unquoted and single-quoted strings) and loses
// the distinction between 1, 1.0 and "1", which the typed reads need. Why
// not Hjson as DeepSpeed reads it: a config that only Hjson accepts is not
// portable; the error says so.
//
// Duplicate keys are an error (DeepSpeed's loader raises on them too), and so
// is nesting deeper than 200 levels. Lines and columns are 1-based; columns
// count characters (UTF-8 code points), as editors do.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rh::zero {

struct JsonMember;

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Kind kind = Kind::Null;
  int line = 0;
  int column = 0;
  bool boolean = false;             // Bool
  std::string text;                 // String: the decoded string; Number: the literal as written
  bool integral = false;            // Number: written without fraction or exponent
  std::vector<JsonValue> items;     // Array
  std::vector<JsonMember> members;  // Object, in file order

  // The member `key` of an object, or nullptr.
  const JsonValue* find(const std::string& key) const;
  // "a string", "a number", "an object", ... for error messages.
  std::string kind_name() const;
};

struct JsonMember {
  std::string key;
  int line = 0;  // of the key
  int column = 0;
  JsonValue value;
};

class JsonError : public std::runtime_error {
 public:
  JsonError(int line, int column, const std::string& message)
      : std::runtime_error(std::to_string(line) + ":" + std::to_string(column) + ": " + message),
        line_(line),
        column_(column),
        message_(message) {}
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  int line_;
  int column_;
  std::string message_;
};

// Parses one JSON document (a value, surrounded by whitespace only).
JsonValue parse_json(const std::string& text);

}  // namespace rh::zero
