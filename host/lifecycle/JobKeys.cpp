#include "lifecycle/JobKeys.hpp"

#include <sstream>

namespace rh::lifecycle {

const config::Node* find_key(const config::Node& root, const std::string& path) {
  const config::Node* n = &root;
  std::stringstream parts(path);
  std::string key;
  while (n != nullptr && std::getline(parts, key, '.')) n = n->find(key);
  return n;
}

}  // namespace rh::lifecycle
