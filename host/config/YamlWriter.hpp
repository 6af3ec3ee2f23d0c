// Config tree -> YAML text (for --print-config).
#pragma once

#include <string>

#include "config/ConfigNode.hpp"

namespace rh::config {

// Block-style YAML, keys in order, two-space indent. A string that would
// re-parse as another type (`'1'`, `'true'`, `'null'`) or that is not a safe
// plain scalar is written double-quoted, so parse_yaml(to_yaml(n)) gives the
// same tree. Empty maps and lists are written `{}` and `[]`, null as `null`.
std::string to_yaml(const Node& node);

}  // namespace rh::config
