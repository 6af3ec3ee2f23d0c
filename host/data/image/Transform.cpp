#include "data/image/Transform.hpp"

#include <string>

namespace rh::data::image {

std::array<double, 3> bgr_value(const config::Node& node) {
  if (!node.is_sequence()) {
    const double v = node.as_double();
    return {v, v, v};
  }
  const auto& items = node.seq_items();
  if (items.size() != 3)
    throw config::ConfigError(node.location(), node.path(),
                              "expected 3 values (B, G, R), got " + std::to_string(items.size()));
  return {items[0]->as_double(), items[1]->as_double(), items[2]->as_double()};
}

}  // namespace rh::data::image
