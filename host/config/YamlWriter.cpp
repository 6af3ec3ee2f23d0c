#include "config/YamlWriter.hpp"

#include <cstdio>

#include "config/ScalarSyntax.hpp"

namespace rh::config {
namespace {

// Conservative: anything that could start or contain YAML syntax is quoted.
bool is_safe_plain(const std::string& text) {
  if (text.empty()) return false;
  const char first = text.front();
  const char last = text.back();
  if (first == ' ' || first == '\t' || last == ' ' || last == '\t') return false;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return false;
    if (c == ':' || c == '#' || c == ',' || c == '[' || c == ']' || c == '{' || c == '}')
      return false;
  }
  static const std::string kIndicators = "&*!|>'\"%@`";
  if (kIndicators.find(first) != std::string::npos) return false;
  if ((first == '-' || first == '?') && (text.size() == 1 || text[1] == ' ')) return false;
  if (text.compare(0, 3, "---") == 0 || text.compare(0, 3, "...") == 0) return false;
  return true;
}

std::string double_quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// A string: plain when that re-parses as the same string, quoted otherwise.
std::string string_text(const std::string& text) {
  if (is_safe_plain(text) && resolve_plain_scalar(text) == ScalarType::String) return text;
  return double_quoted(text);
}

std::string scalar_text(const Node& node) {
  switch (node.kind()) {
    case Node::Kind::Null:
      return "null";
    case Node::Kind::Map:
      return "{}";
    case Node::Kind::Sequence:
      return "[]";
    case Node::Kind::Scalar:
      break;
  }
  if (node.quoted()) return string_text(node.scalar());
  // A plain scalar keeps its look (1, 3e-4, true) unless it cannot be written plain.
  return is_safe_plain(node.scalar()) ? node.scalar() : double_quoted(node.scalar());
}

// YAML allows an implicit key ("key: value") of at most 1024 characters, and
// yaml-cpp counts bytes from the key's start to its ':'. A longer key is
// written as an explicit one ("? key" then ": value"), which has no limit.
constexpr size_t kLongestImplicitKey = 1000;

bool is_block(const Node& node) {
  return (node.is_map() && !node.map_items().empty()) ||
         (node.is_sequence() && !node.seq_items().empty());
}

// Writes a non-empty map or list at `indent`. When `inline_first` is set the
// cursor already stands after "- " and the first line gets no indentation.
void write_block(const Node& node, size_t indent, bool inline_first, std::string& out) {
  bool first = true;
  const auto start_line = [&] {
    if (!(first && inline_first)) out.append(indent, ' ');
    first = false;
  };
  if (node.is_map()) {
    for (const auto& [key, value] : node.map_items()) {
      start_line();
      const std::string key_text = string_text(key);
      if (key_text.size() > kLongestImplicitKey) {
        out += "? " + key_text + "\n";
        out.append(indent, ' ');
        out += ":";
      } else {
        out += key_text + ":";
      }
      if (is_block(*value)) {
        out += "\n";
        write_block(*value, indent + 2, false, out);
      } else {
        out += " " + scalar_text(*value) + "\n";
      }
    }
    return;
  }
  for (const auto& item : node.seq_items()) {
    start_line();
    out += "-";
    if (is_block(*item)) {
      out += " ";
      write_block(*item, indent + 2, true, out);
    } else {
      out += " " + scalar_text(*item) + "\n";
    }
  }
}

}  // namespace

std::string to_yaml(const Node& node) {
  if (!is_block(node)) return scalar_text(node) + "\n";
  std::string out;
  write_block(node, 0, false, out);
  return out;
}

}  // namespace rh::config
