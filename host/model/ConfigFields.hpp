// Reads one model's validated config map: typed values, defaults for absent
// keys, and errors located at the key ("model.heads: dim 60 is not a multiple
// of heads 8"). Key paths come from the tree (Node::path()); a tree built
// without paths reports "model.<key>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/ConfigNode.hpp"

namespace rh::model {

class ConfigFields {
 public:
  explicit ConfigFields(const config::Node& map) : map_(map) {}

  // Required keys: a missing one throws ConfigError at the map.
  int64_t integer(const std::string& key) const;
  const std::string& string(const std::string& key) const;

  int64_t integer(const std::string& key, int64_t fallback) const;
  double number(const std::string& key, double fallback) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::string string(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> integers(const std::string& key, std::vector<int64_t> fallback) const;
  bool has(const std::string& key) const { return map_.find(key) != nullptr; }

  // ConfigError at `key` (or at the map when the key is absent).
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  // "model.key" (the tree's path for it).
  std::string key_path(const std::string& key) const;

 private:
  const config::Node& required(const std::string& key) const;

  const config::Node& map_;
};

}  // namespace rh::model
