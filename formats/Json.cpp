#include "formats/Json.hpp"

#include <charconv>
#include <cmath>
#include <unordered_map>

namespace rh::json {

std::string Position::str() const { return std::to_string(line) + ":" + std::to_string(column); }

ParseError::ParseError(const Position& at, const std::string& message)
    : std::runtime_error(at.str() + ": " + message), at_(at), message_(message) {}

TypeError::TypeError(const Position& at, const std::string& message)
    : std::invalid_argument(at.str() + ": " + message), at_(at) {}

const Value* Value::find(std::string_view key) const {
  for (const Member& m : members)
    if (m.key == key) return &m.value;
  return nullptr;
}

std::optional<uint64_t> Value::as_uint64() const {
  if (kind != Kind::Number || !integral || text.empty() || text[0] == '-') return std::nullopt;
  uint64_t u = 0;
  const char* last = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), last, u);
  if (ec != std::errc() || p != last) return std::nullopt;
  return u;
}

std::optional<int64_t> Value::as_int64() const {
  if (kind != Kind::Number || !integral) return std::nullopt;
  int64_t i = 0;
  const char* last = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), last, i);
  if (ec != std::errc() || p != last) return std::nullopt;
  return i;
}

double Value::as_double() const {
  double d = 0;
  if (kind == Kind::Number) std::from_chars(text.data(), text.data() + text.size(), d);
  return d;
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

void append_utf8(std::string& out, uint32_t cp) {
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

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The escape of a simple escape sequence's letter ('n' -> '\n'), or 0.
char simple_escape(char e) {
  switch (e) {
    case '"':
    case '\\':
    case '/':
      return e;
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    default:
      return 0;
  }
}

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Value document() {
    skip_space();
    if (at_end()) fail("empty document: expected a JSON value");
    Value v = value(0);
    skip_space();
    if (!at_end()) fail("unexpected " + describe_here() + " after the JSON value");
    return v;
  }

 private:
  bool at_end() const { return at_.offset >= s_.size(); }
  char peek() const { return s_[at_.offset]; }
  bool digit() const { return !at_end() && peek() >= '0' && peek() <= '9'; }

  // Advances one byte, keeping line and column (columns count code points:
  // UTF-8 continuation bytes do not move the column).
  void advance() {
    const unsigned char c = static_cast<unsigned char>(s_[at_.offset++]);
    if (c == '\n') {
      ++at_.line;
      at_.column = 1;
    } else if ((c & 0xC0) != 0x80) {
      ++at_.column;
    }
  }

  [[noreturn]] void fail(const std::string& message) const { throw ParseError(at_, message); }

  // "'x'" for a printable character, "byte 0x00" for any other.
  std::string describe_here() const {
    const unsigned char c = static_cast<unsigned char>(peek());
    if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    static const char* kHex = "0123456789abcdef";
    return std::string("byte 0x") + kHex[c >> 4] + kHex[c & 15];
  }

  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '#' || (c == '/' && at_.offset + 1 < s_.size() &&
                              (s_[at_.offset + 1] == '/' || s_[at_.offset + 1] == '*'))) {
        fail("comments are not JSON (runner-host reads strict JSON: remove the comment)");
      } else {
        return;
      }
    }
  }

  void expect_literal(std::string_view word) {
    if (s_.substr(at_.offset, word.size()) != word) fail("expected '" + std::string(word) + "'");
    for (size_t k = 0; k < word.size(); ++k) advance();
  }

  Value value(int depth) {
    Value v;
    v.at = at_;
    if (at_end()) fail("unexpected end of file: expected a JSON value");
    const char c = peek();
    if (c == '{' || c == '[') {
      if (depth + 1 > kMaxDepth)
        fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
      if (c == '{')
        object(v, depth + 1);
      else
        array(v, depth + 1);
    } else if (c == '"') {
      v.kind = Value::Kind::String;
      v.text = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      number(v);
    } else if (c == 't' || c == 'f') {
      expect_literal(c == 't' ? "true" : "false");
      v.kind = Value::Kind::Bool;
      v.boolean = c == 't';
    } else if (c == 'n') {
      expect_literal("null");
    } else if (c == '\'') {
      fail("single-quoted strings are not JSON: use double quotes");
    } else if (c == 'N' || c == 'I') {
      fail("NaN and Infinity are not JSON numbers");
    } else {
      fail("expected a JSON value, got " + describe_here());
    }
    return v;
  }

  void object(Value& v, int depth) {
    v.kind = Value::Kind::Object;
    advance();  // {
    skip_space();
    if (!at_end() && peek() == '}') {
      advance();
      return;
    }
    std::unordered_map<std::string, int> lines;  // key -> its line, for duplicates
    for (;;) {
      skip_space();
      if (at_end()) fail("unexpected end of file inside an object (missing '}')");
      if (peek() == '}') fail("trailing comma before '}' is not JSON");
      if (peek() != '"') fail("expected a key in double quotes");
      Member m;
      m.at = at_;
      m.key = string();
      const auto [first, fresh] = lines.try_emplace(m.key, m.at.line);
      if (!fresh)
        throw ParseError(m.at, "duplicate key '" + m.key + "' (first at line " +
                                   std::to_string(first->second) + ")");
      skip_space();
      if (at_end() || peek() != ':') fail("expected ':' after the key '" + m.key + "'");
      advance();
      skip_space();
      m.value = value(depth);
      v.members.push_back(std::move(m));
      skip_space();
      if (at_end()) fail("unexpected end of file inside an object (missing '}')");
      if (peek() == '}') {
        advance();
        return;
      }
      if (peek() != ',') fail("expected ',' or '}' after an object member");
      advance();
    }
  }

  void array(Value& v, int depth) {
    v.kind = Value::Kind::Array;
    advance();  // [
    skip_space();
    if (!at_end() && peek() == ']') {
      advance();
      return;
    }
    for (;;) {
      skip_space();
      if (!at_end() && peek() == ']') fail("trailing comma before ']' is not JSON");
      v.items.push_back(value(depth));
      skip_space();
      if (at_end()) fail("unexpected end of file inside an array (missing ']')");
      if (peek() == ']') {
        advance();
        return;
      }
      if (peek() != ',') fail("expected ',' or ']' after an array item");
      advance();
    }
  }

  uint32_t hex4() {
    uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      if (at_end()) fail("unexpected end of file in a \\u escape");
      const int d = hex_digit(peek());
      if (d < 0) fail("expected 4 hex digits after \\u");
      cp = cp * 16 + static_cast<uint32_t>(d);
      advance();
    }
    return cp;
  }

  // After "\u": one code point, a surrogate pair taken together.
  uint32_t unicode_escape() {
    uint32_t cp = hex4();
    if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low half follows
      if (s_.substr(at_.offset, 2) != "\\u")
        fail("a \\u high surrogate must be followed by a \\u low surrogate");
      advance();
      advance();
      const uint32_t low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) fail("invalid \\u low surrogate");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      fail("a \\u low surrogate without its high surrogate");
    }
    return cp;
  }

  std::string string() {
    const Position start = at_;
    advance();  // "
    std::string out;
    for (;;) {
      if (at_end() || peek() == '\n') throw ParseError(start, "unterminated string (missing '\"')");
      const char c = peek();
      if (c == '"') {
        advance();
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string: escape it");
      if (c == '\\') {
        advance();
        if (at_end()) fail("unexpected end of file in an escape");
        const char e = peek();
        if (const char simple = simple_escape(e)) {
          out += simple;
          advance();
        } else if (e == 'u') {
          advance();
          append_utf8(out, unicode_escape());
        } else {
          fail("invalid escape '\\" + std::string(1, e) + "'");
        }
        continue;
      }
      const size_t n = utf8_sequence(s_, at_.offset);
      if (n == 0) fail("invalid UTF-8 " + describe_here() + " in a string");
      out.append(s_.substr(at_.offset, n));
      for (size_t k = 0; k < n; ++k) advance();
    }
  }

  void number(Value& v) {
    v.kind = Value::Kind::Number;
    const size_t begin = at_.offset;
    const auto digits = [&] {
      size_t n = 0;
      for (; digit(); ++n) advance();
      return n;
    };
    if (peek() == '-') advance();
    if (!digit()) fail("expected a digit");
    if (peek() == '0') {
      advance();
      if (digit()) fail("leading zeros are not JSON");
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
    v.text = std::string(s_.substr(begin, at_.offset - begin));
    double d = 0;
    const auto [p, ec] = std::from_chars(v.text.data(), v.text.data() + v.text.size(), d);
    if (ec != std::errc() || p != v.text.data() + v.text.size() || !std::isfinite(d))
      throw ParseError(v.at, "number out of range");
  }

  std::string_view s_;
  Position at_;
};

std::string got(const Value& v) {
  std::string out = v.kind_name();
  if (v.is_number()) out += " " + v.text;
  if (v.is_string()) out += " " + quoted(v.text);
  return out;
}

}  // namespace

Value parse(std::string_view text) { return Parser(text).document(); }

const Value* find_member(const Value& object, std::string_view key, Value::Kind kind) {
  if (!object.is_object()) throw TypeError(object.at, "expected an object, got " + got(object));
  const Value* v = object.find(key);
  if (v != nullptr && v->kind != kind)
    throw TypeError(v->at,
                    quoted(key) + ": expected " + Value::kind_name(kind) + ", got " + got(*v));
  return v;
}

const Value& member(const Value& object, std::string_view key, Value::Kind kind) {
  const Value* v = find_member(object, key, kind);
  if (v == nullptr) throw TypeError(object.at, quoted(key) + " is missing");
  return *v;
}

std::optional<int64_t> find_int64_member(const Value& object, std::string_view key) {
  const Value* v = find_member(object, key, Value::Kind::Number);
  if (v == nullptr) return std::nullopt;
  const std::optional<int64_t> i = v->as_int64();
  if (!i) throw TypeError(v->at, quoted(key) + ": expected an integer, got " + got(*v));
  return i;
}

int64_t int64_member(const Value& object, std::string_view key) {
  member(object, key, Value::Kind::Number);  // missing: named as such
  return *find_int64_member(object, key);
}

const std::string& string_member(const Value& object, std::string_view key) {
  return member(object, key, Value::Kind::String).text;
}

std::vector<std::string> string_items(const Value& array, std::string_view what) {
  if (!array.is_array())
    throw TypeError(array.at, std::string(what) + ": expected an array, got " + got(array));
  std::vector<std::string> out;
  for (const Value& item : array.items) {
    if (!item.is_string())
      throw TypeError(item.at, std::string(what) + ": expected strings, got " + got(item));
    out.push_back(item.text);
  }
  return out;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void append_string(std::string& out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c >= 0x20) {
      out += ch;
    } else if (ch == '\b' || ch == '\f' || ch == '\n' || ch == '\r' || ch == '\t') {
      out += '\\';
      out += "bfnrt"[ch == '\b' ? 0 : ch == '\f' ? 1 : ch == '\n' ? 2 : ch == '\r' ? 3 : 4];
    } else {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  out += '"';
}

std::string quoted(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_string(out, s);
  return out;
}

std::string string_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i != 0) out += ", ";
    append_string(out, items[i]);
  }
  return out + "]";
}

}  // namespace rh::json
