#include "Json.hpp"

#include <charconv>
#include <cmath>
#include <unordered_set>

namespace rh::json {

JsonError::JsonError(size_t offset, const std::string& message)
    : std::runtime_error("at byte " + std::to_string(offset) + ": " + message), offset_(offset) {}

const Value* Value::find(std::string_view key) const {
  for (const Member& m : members_)
    if (m.first == key) return &m.second;
  return nullptr;
}

const char* Value::kind_name(Kind kind) {
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

// Length of the UTF-8 sequence starting at s[i] when it is well formed, else 0.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07u;
  } else {
    return 0;  // a continuation byte, an overlong lead (C0, C1) or F5..FF
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3Fu);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  return n;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Value parse_document() {
    skip_whitespace();
    Value v = parse_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("unexpected " + describe_here() + " after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw JsonError(pos_, message); }

  std::string describe_here() const {
    if (pos_ >= text_.size()) return "end of text";
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    static const char* kHex = "0123456789abcdef";
    return std::string("byte 0x") + kHex[c >> 4] + kHex[c & 15];
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r'))
      ++pos_;
  }

  void expect_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word)
      fail("expected a JSON value, got " + describe_here());
    pos_ += word.size();
  }

  Value parse_value(int depth) {
    if (at_end()) fail("expected a JSON value, got end of text");
    Value v;
    switch (peek()) {
      case '{':
        return parse_object(depth + 1);
      case '[':
        return parse_array(depth + 1);
      case '"':
        v.kind_ = Value::Kind::String;
        v.string_ = parse_string();
        return v;
      case 't':
        expect_literal("true");
        v.kind_ = Value::Kind::Bool;
        v.bool_ = true;
        return v;
      case 'f':
        expect_literal("false");
        v.kind_ = Value::Kind::Bool;
        return v;
      case 'n':
        expect_literal("null");
        return v;
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail("expected a JSON value, got " + describe_here());
    }
  }

  void check_depth(int depth) const {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
  }

  Value parse_object(int depth) {
    check_depth(depth);
    Value v;
    v.kind_ = Value::Kind::Object;
    ++pos_;  // '{'
    skip_whitespace();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return v;
    }
    std::unordered_set<std::string> keys;
    for (;;) {
      skip_whitespace();
      if (at_end() || peek() != '"') fail("expected a string key, got " + describe_here());
      const size_t key_pos = pos_;
      std::string key = parse_string();
      skip_whitespace();
      if (at_end() || peek() != ':') fail("expected ':' after a key, got " + describe_here());
      ++pos_;
      skip_whitespace();
      Value item = parse_value(depth);
      if (!keys.insert(key).second) throw JsonError(key_pos, "duplicate key \"" + key + "\"");
      v.members_.emplace_back(std::move(key), std::move(item));
      skip_whitespace();
      if (at_end()) fail("expected ',' or '}', got end of text");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return v;
      }
      fail("expected ',' or '}', got " + describe_here());
    }
  }

  Value parse_array(int depth) {
    check_depth(depth);
    Value v;
    v.kind_ = Value::Kind::Array;
    ++pos_;  // '['
    skip_whitespace();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return v;
    }
    for (;;) {
      skip_whitespace();
      v.items_.push_back(parse_value(depth));
      skip_whitespace();
      if (at_end()) fail("expected ',' or ']', got end of text");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return v;
      }
      fail("expected ',' or ']', got " + describe_here());
    }
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  uint32_t parse_hex4() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      if (at_end() || hex_digit(peek()) < 0) fail("expected 4 hex digits after \\u");
      v = (v << 4) | static_cast<uint32_t>(hex_digit(peek()));
      ++pos_;
    }
    return v;
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

  std::string parse_string() {
    ++pos_;  // '"'
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("control character " + describe_here() + " in a string (escape it)");
      if (c == '\\') {
        ++pos_;
        if (at_end()) fail("unterminated escape sequence");
        const char e = peek();
        ++pos_;
        switch (e) {
          case '"':
          case '\\':
          case '/':
            out += e;
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'u': {
            uint32_t cp = parse_hex4();
            if (cp >= 0xDC00 && cp <= 0xDFFF) fail("unpaired low surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (text_.substr(pos_, 2) != "\\u") fail("unpaired high surrogate in \\u escape");
              pos_ += 2;
              uint32_t low = parse_hex4();
              if (low < 0xDC00 || low > 0xDFFF) fail("unpaired high surrogate in \\u escape");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            append_utf8(out, cp);
            break;
          }
          default:
            --pos_;
            fail("invalid escape sequence '\\" + std::string(1, e) + "'");
        }
        continue;
      }
      const size_t n = utf8_sequence(text_, pos_);
      if (n == 0) fail("invalid UTF-8 " + describe_here() + " in a string");
      out.append(text_.substr(pos_, n));
      pos_ += n;
    }
  }

  Value parse_number() {
    const size_t start = pos_;
    const auto digit = [&] { return !at_end() && peek() >= '0' && peek() <= '9'; };
    bool integer = true;
    if (peek() == '-') {
      ++pos_;
      integer = false;  // is_uint64 is for non-negative integers only
    }
    if (!digit()) fail("expected a digit, got " + describe_here());
    if (peek() == '0') {
      ++pos_;
      if (digit()) fail("leading zeros are not allowed in a number");
    } else {
      while (digit()) ++pos_;
    }
    if (!at_end() && peek() == '.') {
      integer = false;
      ++pos_;
      if (!digit()) fail("expected a digit after '.', got " + describe_here());
      while (digit()) ++pos_;
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      integer = false;
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (!digit()) fail("expected a digit in the exponent, got " + describe_here());
      while (digit()) ++pos_;
    }
    Value v;
    v.kind_ = Value::Kind::Number;
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integer) {
      uint64_t u = 0;
      auto [p, ec] = std::from_chars(first, last, u);
      if (ec == std::errc() && p == last) {
        v.is_uint64_ = true;
        v.uint64_ = u;
      }
    }
    double d = 0;
    auto [p, ec] = std::from_chars(first, last, d);
    if (ec == std::errc::result_out_of_range || !std::isfinite(d)) {
      throw JsonError(start, "number out of range");
    }
    if (ec != std::errc() || p != last) throw JsonError(start, "invalid number");
    v.number_ = d;
    return v;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

Value parse(std::string_view text) { return Parser(text).parse_document(); }

void append_string(std::string& out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

}  // namespace rh::json
