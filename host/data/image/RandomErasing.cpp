#include "data/image/RandomErasing.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "data/image/PipelineSchema.hpp"

namespace rh::data::image {
namespace {

using config::ConfigError;
using config::Node;

[[noreturn]] void fail(const Node& node, const std::string& message) {
  throw ConfigError(node.location(), node.path(), message);
}

std::string number_text(double v) {
  std::string text = std::to_string(v);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

}  // namespace

RandomErasing::RandomErasing(RandomErasingOptions options) : options_(std::move(options)) {}

void RandomErasing::apply(Sample& sample, SampleRng& rng) const {
  Image& img = sample.img;
  if (img.empty()) {
    throw std::runtime_error("RandomErasing: " + sample.path +
                             ": no image (LoadImageFromFile must come first in the pipeline)");
  }
  if (img.channels != 3) {
    throw std::runtime_error("RandomErasing: " + sample.path + ": needs 3 channels, got " +
                             std::to_string(img.channels));
  }
  // random_disable(): np.random.rand() > erase_prob keeps the image.
  if (rng.uniform() > options_.erase_prob) return;

  // random_patch(). The log of the aspect range is taken in float32, as
  // np.log(np.array(aspect_range, dtype=np.float32)) does.
  const double log_lo = std::log(static_cast<float>(options_.aspect_min));
  const double log_hi = std::log(static_cast<float>(options_.aspect_max));
  const double aspect = std::exp(rng.uniform(log_lo, log_hi));
  const double area = static_cast<double>(img.height) * img.width *
                      rng.uniform(options_.min_area_ratio, options_.max_area_ratio);
  // Python's round(): half to even.
  const int h =
      static_cast<int>(std::min<double>(std::nearbyint(std::sqrt(area * aspect)), img.height));
  const int w =
      static_cast<int>(std::min<double>(std::nearbyint(std::sqrt(area / aspect)), img.width));
  // np.random.randint(0, n) draws from 0 .. n - 1.
  const int top = img.height > h ? static_cast<int>(rng.randint(0, img.height - h - 1)) : 0;
  const int left = img.width > w ? static_cast<int>(rng.randint(0, img.width - w - 1)) : 0;

  // _fill_pixels(): the patch is drawn row by row, B, G, R per pixel.
  const std::array<double, 3>& color = options_.fill_color;
  for (int y = top; y < top + h; ++y) {
    for (int x = left; x < left + w; ++x) {
      uint8_t* p = img.at(y, x);
      for (int c = 0; c < 3; ++c) {
        if (options_.mode == RandomErasingOptions::Mode::Const) {
          p[c] = static_cast<uint8_t>(color[c]);  // np.array(fill_color, dtype=np.uint8)
        } else if (!options_.fill_std) {
          p[c] = static_cast<uint8_t>(std::floor(rng.uniform(0, 256)));
        } else {
          // astype(np.int32) truncates toward zero, then np.clip(0, 255).
          const double v = std::trunc(rng.normal(color[c], (*options_.fill_std)[c]));
          p[c] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
        }
      }
    }
  }
}

std::unique_ptr<Transform> make_random_erasing(const config::Node& cfg) {
  const std::vector<ConfigError> errors = config::validate(cfg, random_erasing_schema());
  if (!errors.empty()) throw errors.front();

  RandomErasingOptions options;
  if (const Node* n = cfg.find("erase_prob")) options.erase_prob = n->as_double();
  const Node* min_ratio = cfg.find("min_area_ratio");
  const Node* max_ratio = cfg.find("max_area_ratio");
  if (min_ratio != nullptr) options.min_area_ratio = min_ratio->as_double();
  if (max_ratio != nullptr) options.max_area_ratio = max_ratio->as_double();
  if (options.min_area_ratio > options.max_area_ratio) {
    if (max_ratio != nullptr) {
      fail(*max_ratio, "must be >= min_area_ratio (" + number_text(options.min_area_ratio) +
                           "), got " + max_ratio->scalar());
    }
    fail(*min_ratio, "must be <= max_area_ratio (default 0.4), got " + min_ratio->scalar());
  }
  if (const Node* n = cfg.find("aspect_range")) {
    if (!n->is_sequence()) {
      // A single number a means (min(a, 1/a), max(a, 1/a)).
      const double a = n->as_double();
      options.aspect_min = std::min(a, 1 / a);
      options.aspect_max = 1 / options.aspect_min;
    } else {
      const auto& items = n->seq_items();
      if (items.size() != 2) {
        fail(*n, "expected 2 values (min, max), got " + std::to_string(items.size()));
      }
      options.aspect_min = items[0]->as_double();
      options.aspect_max = items[1]->as_double();
      if (options.aspect_min > options.aspect_max) {
        fail(*n, "the min (" + items[0]->scalar() + ") must not exceed the max (" +
                     items[1]->scalar() + ")");
      }
    }
  }
  if (const Node* n = cfg.find("mode")) {
    options.mode = n->scalar() == "rand" ? RandomErasingOptions::Mode::Rand
                                         : RandomErasingOptions::Mode::Const;
  }
  if (const Node* n = cfg.find("fill_color")) options.fill_color = bgr_value(*n);
  if (const Node* n = cfg.find("fill_std"); n != nullptr && !n->is_null()) {
    options.fill_std = bgr_value(*n);
  }
  return std::make_unique<RandomErasing>(std::move(options));
}

}  // namespace rh::data::image
