// YAML text -> config tree (yaml-cpp underneath), keeping line and column of
// every key and value.
#pragma once

#include <string>

#include "config/ConfigNode.hpp"

namespace rh::config {

// Parses one YAML document. Errors are ConfigErrors: a syntax error at the
// parser's position ("YAML syntax error: <yaml-cpp's message>"), a duplicate
// key, a key that is not a string, nesting deeper than 200 levels (recursive
// aliases), more than one document. `file` names the source in every Location.
// Paths are assigned. An empty document gives a Null node.
NodePtr parse_yaml(const std::string& text, const std::string& file);

// Reads `path` whole. Returns 0 or the errno of the failure.
int read_text_file(const std::string& path, std::string& text);

// read_text_file + parse_yaml; a file that cannot be read gives
// ConfigError(Location{path}, "", "cannot read file: <strerror>").
NodePtr read_yaml_file(const std::string& path);

}  // namespace rh::config
