#include "model/ConfigFields.hpp"

namespace rh::model {

const config::Node& ConfigFields::required(const std::string& key) const {
  const config::Node* value = map_.lookup(key);
  if (value == nullptr) {
    throw config::ConfigError(map_.location(), map_.path().empty() ? "model" : map_.path(),
                              "missing required key '" + key + "'");
  }
  return *value;
}

int64_t ConfigFields::integer(const std::string& key) const { return required(key).as_int(); }

const std::string& ConfigFields::string(const std::string& key) const {
  return required(key).as_string();
}

int64_t ConfigFields::integer(const std::string& key, int64_t fallback) const {
  const config::Node* value = map_.lookup(key);
  return value == nullptr ? fallback : value->as_int();
}

double ConfigFields::number(const std::string& key, double fallback) const {
  const config::Node* value = map_.lookup(key);
  return value == nullptr ? fallback : value->as_double();
}

bool ConfigFields::boolean(const std::string& key, bool fallback) const {
  const config::Node* value = map_.lookup(key);
  return value == nullptr ? fallback : value->as_bool();
}

std::string ConfigFields::string(const std::string& key, const std::string& fallback) const {
  const config::Node* value = map_.lookup(key);
  return value == nullptr ? fallback : value->as_string();
}

std::vector<int64_t> ConfigFields::integers(const std::string& key,
                                            std::vector<int64_t> fallback) const {
  const config::Node* value = map_.lookup(key);
  if (value == nullptr) return fallback;
  if (!value->is_sequence()) {
    throw config::ConfigError(value->location(), key_path(key),
                              "expected a list of integers, got " + value->describe_value());
  }
  std::vector<int64_t> items;
  for (const config::NodePtr& item : value->seq_items()) items.push_back(item->as_int());
  return items;
}

void ConfigFields::fail(const std::string& key, const std::string& message) const {
  const config::Node* value = map_.find(key);
  throw config::ConfigError(value != nullptr ? value->location() : map_.location(), key_path(key),
                            message);
}

std::string ConfigFields::key_path(const std::string& key) const {
  const config::Node* value = map_.find(key);
  if (value != nullptr && !value->path().empty()) return value->path();
  return (map_.path().empty() ? std::string("model") : map_.path()) + "." + key;
}

}  // namespace rh::model
