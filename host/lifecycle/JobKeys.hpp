// Reading a validated job's keys by dotted path ("train_cfg.max_iters"),
// with the default the schema documents when a key is absent. The schema
// (job/JobSchema.cpp) has already checked types and ranges.
#pragma once

#include <string>
#include <type_traits>

#include "config/ConfigNode.hpp"

namespace rh::lifecycle {

// The node at `path`, or nullptr.
const config::Node* find_key(const config::Node& root, const std::string& path);

template <class T>
T job_value(const config::Node& job, const std::string& path, T fallback) {
  const config::Node* n = find_key(job, path);
  if (n == nullptr || n->is_null()) return fallback;
  if constexpr (std::is_same_v<T, bool>)
    return n->as_bool();
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(n->as_int());
  else if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(n->as_double());
  else
    return n->as_string();
}

}  // namespace rh::lifecycle
