#include "config/ScalarSyntax.hpp"

namespace rh::config {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Advances `i` over digits; returns how many it skipped.
size_t skip_digits(const std::string& s, size_t& i) {
  const size_t start = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  return i - start;
}

}  // namespace

bool is_null_text(const std::string& text) {
  return text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL";
}

bool is_bool_text(const std::string& text) {
  return text == "true" || text == "True" || text == "TRUE" || text == "false" || text == "False" ||
         text == "FALSE";
}

bool is_int_text(const std::string& text) {
  size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  return skip_digits(text, i) > 0 && i == text.size();
}

// YAML 1.2 core: [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
//                [-+]? \. (inf|Inf|INF)      \. (nan|NaN|NAN)
bool is_float_text(const std::string& text) {
  if (text == ".nan" || text == ".NaN" || text == ".NAN") return true;
  size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  const std::string rest = text.substr(i);
  if (rest == ".inf" || rest == ".Inf" || rest == ".INF") return true;
  if (is_int_text(text)) return false;  // integers resolve as integers

  size_t mantissa_digits = skip_digits(text, i);
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa_digits += skip_digits(text, i);
  }
  if (mantissa_digits == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (skip_digits(text, i) == 0) return false;
  }
  return i == text.size();
}

ScalarType resolve_plain_scalar(const std::string& text) {
  if (is_null_text(text)) return ScalarType::Null;
  if (is_bool_text(text)) return ScalarType::Boolean;
  if (is_int_text(text)) return ScalarType::Integer;
  if (is_float_text(text)) return ScalarType::Float;
  return ScalarType::String;
}

}  // namespace rh::config
