// How a plain (unquoted) YAML scalar resolves under the YAML 1.2 core schema.
//
// The config tree keeps every scalar as its raw text; these helpers decide
// what that text *is* when a typed read, the validator or the YAML writer asks.
// Quoted scalars are always strings and never go through here.
#pragma once

#include <string>

namespace rh::config {

enum class ScalarType { Null, Integer, Float, Boolean, String };

// `~`, `null`, `Null`, `NULL` and the empty text resolve to Null.
ScalarType resolve_plain_scalar(const std::string& text);

bool is_null_text(const std::string& text);
bool is_bool_text(const std::string& text);  // true/false in the three core spellings
bool is_int_text(const std::string& text);   // decimal, optional sign
bool is_float_text(
    const std::string& text);  // 1.5, .5, 1e-3, 3e-4, .inf, -.inf, .nan (ints excluded)

}  // namespace rh::config
