#include "JsonReader.hpp"

#include <cstdint>

namespace rh::zero {

const JsonValue* JsonValue::find(const std::string& key) const {
  for (const JsonMember& m : members)
    if (m.key == key) return &m.value;
  return nullptr;
}

std::string JsonValue::kind_name() const {
  switch (kind) {
    case Kind::Null:
      return "null";
    case Kind::Bool:
      return "a boolean";
    case Kind::Number:
      return "a number";
    case Kind::String:
      return "a string";
    case Kind::Array:
      return "an array";
    case Kind::Object:
      return "an object";
  }
  return "a value";
}

namespace {

constexpr int kMaxDepth = 200;

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  JsonValue document() {
    skip_space();
    if (at_end()) fail("empty document: expected a JSON value");
    JsonValue v = value(0);
    skip_space();
    if (!at_end()) fail("unexpected '" + std::string(1, peek()) + "' after the JSON value");
    return v;
  }

 private:
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return s_[i_]; }

  // Advances one byte, keeping line and column (columns count code points:
  // UTF-8 continuation bytes do not move the column).
  void advance() {
    const unsigned char c = static_cast<unsigned char>(s_[i_++]);
    if (c == '\n') {
      ++line_;
      column_ = 1;
    } else if ((c & 0xC0) != 0x80) {
      ++column_;
    }
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw JsonError(line_, column_, message);
  }
  [[noreturn]] void fail_at(int line, int column, const std::string& message) const {
    throw JsonError(line, column, message);
  }

  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && i_ + 1 < s_.size() && (s_[i_ + 1] == '/' || s_[i_ + 1] == '*')) {
        fail(
            "comments are not JSON (DeepSpeed also reads Hjson; runner-host reads strict JSON: "
            "remove the comment)");
      } else if (c == '#') {
        fail("comments are not JSON (runner-host reads strict JSON: remove the comment)");
      } else {
        return;
      }
    }
  }

  void expect_literal(const char* word) {
    const int line = line_, column = column_;
    for (const char* p = word; *p; ++p) {
      if (at_end() || peek() != *p) fail_at(line, column, std::string("expected '") + word + "'");
      advance();
    }
  }

  JsonValue value(int depth) {
    if (depth > kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    JsonValue v;
    v.line = line_;
    v.column = column_;
    if (at_end()) fail("unexpected end of file: expected a JSON value");
    const char c = peek();
    if (c == '{') {
      object(v, depth);
    } else if (c == '[') {
      array(v, depth);
    } else if (c == '"') {
      v.kind = JsonValue::Kind::String;
      v.text = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      number(v);
    } else if (c == 't') {
      expect_literal("true");
      v.kind = JsonValue::Kind::Bool;
      v.boolean = true;
    } else if (c == 'f') {
      expect_literal("false");
      v.kind = JsonValue::Kind::Bool;
    } else if (c == 'n') {
      expect_literal("null");
    } else if (c == '\'') {
      fail("single-quoted strings are not JSON: use double quotes");
    } else if (c == 'N' || c == 'I') {
      fail("NaN and Infinity are not JSON numbers");
    } else {
      fail("unexpected '" + std::string(1, c) + "': expected a JSON value");
    }
    return v;
  }

  void object(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::Object;
    advance();  // {
    skip_space();
    if (!at_end() && peek() == '}') {
      advance();
      return;
    }
    while (true) {
      skip_space();
      if (at_end()) fail("unexpected end of file inside an object (missing '}')");
      if (peek() == '}') fail("trailing comma before '}' is not JSON");
      if (peek() != '"') fail("expected a key in double quotes");
      JsonMember m;
      m.line = line_;
      m.column = column_;
      m.key = string();
      for (const JsonMember& other : v.members) {
        if (other.key == m.key) {
          fail_at(
              m.line, m.column,
              "duplicate key '" + m.key + "' (first at line " + std::to_string(other.line) + ")");
        }
      }
      skip_space();
      if (at_end() || peek() != ':') fail("expected ':' after the key '" + m.key + "'");
      advance();
      skip_space();
      m.value = value(depth + 1);
      v.members.push_back(std::move(m));
      skip_space();
      if (at_end()) fail("unexpected end of file inside an object (missing '}')");
      if (peek() == ',') {
        advance();
        continue;
      }
      if (peek() == '}') {
        advance();
        return;
      }
      fail("expected ',' or '}' after an object member");
    }
  }

  void array(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::Array;
    advance();  // [
    skip_space();
    if (!at_end() && peek() == ']') {
      advance();
      return;
    }
    while (true) {
      skip_space();
      if (!at_end() && peek() == ']') fail("trailing comma before ']' is not JSON");
      v.items.push_back(value(depth + 1));
      skip_space();
      if (at_end()) fail("unexpected end of file inside an array (missing ']')");
      if (peek() == ',') {
        advance();
        continue;
      }
      if (peek() == ']') {
        advance();
        return;
      }
      fail("expected ',' or ']' after an array item");
    }
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t hex4() {
    uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      if (at_end()) fail("unexpected end of file in a \\u escape");
      const char h = peek();
      uint32_t d;
      if (h >= '0' && h <= '9') {
        d = static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        d = static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        d = static_cast<uint32_t>(h - 'A' + 10);
      } else {
        fail("expected 4 hex digits after \\u");
      }
      cp = cp * 16 + d;
      advance();
    }
    return cp;
  }

  std::string string() {
    const int line = line_, column = column_;
    advance();  // "
    std::string out;
    while (true) {
      if (at_end() || peek() == '\n') fail_at(line, column, "unterminated string (missing '\"')");
      const char c = peek();
      if (c == '"') {
        advance();
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string: escape it");
      if (c != '\\') {
        out += c;
        advance();
        continue;
      }
      advance();  // backslash
      if (at_end()) fail("unexpected end of file in an escape");
      const char e = peek();
      const char* simple = nullptr;
      switch (e) {
        case '"':
          simple = "\"";
          break;
        case '\\':
          simple = "\\";
          break;
        case '/':
          simple = "/";
          break;
        case 'b':
          simple = "\b";
          break;
        case 'f':
          simple = "\f";
          break;
        case 'n':
          simple = "\n";
          break;
        case 'r':
          simple = "\r";
          break;
        case 't':
          simple = "\t";
          break;
        default:
          break;
      }
      if (simple != nullptr) {
        out += simple;
        advance();
        continue;
      }
      if (e != 'u') fail("invalid escape '\\" + std::string(1, e) + "'");
      advance();
      uint32_t cp = hex4();
      if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low half follows
        if (i_ + 1 >= s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u')
          fail("a \\u high surrogate must be followed by a \\u low surrogate");
        advance();
        advance();
        const uint32_t low = hex4();
        if (low < 0xDC00 || low > 0xDFFF) fail("invalid \\u low surrogate");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        fail("a \\u low surrogate without its high surrogate");
      }
      append_utf8(out, cp);
    }
  }

  void number(JsonValue& v) {
    v.kind = JsonValue::Kind::Number;
    const size_t begin = i_;
    auto digits = [&] {
      size_t n = 0;
      while (!at_end() && peek() >= '0' && peek() <= '9') {
        advance();
        ++n;
      }
      return n;
    };
    if (peek() == '-') advance();
    if (at_end() || !(peek() >= '0' && peek() <= '9')) fail("expected a digit");
    if (peek() == '0') {
      advance();
      if (!at_end() && peek() >= '0' && peek() <= '9') fail("leading zeros are not JSON");
    } else {
      digits();
    }
    v.integral = true;
    if (!at_end() && peek() == '.') {
      advance();
      v.integral = false;
      if (digits() == 0) fail("expected a digit after '.'");
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      advance();
      v.integral = false;
      if (!at_end() && (peek() == '+' || peek() == '-')) advance();
      if (digits() == 0) fail("expected a digit in the exponent");
    }
    v.text = s_.substr(begin, i_ - begin);
  }

  const std::string& s_;
  size_t i_ = 0;
  int line_ = 1;
  int column_ = 1;
};

}  // namespace

JsonValue parse_json(const std::string& text) { return Parser(text).document(); }

}  // namespace rh::zero
