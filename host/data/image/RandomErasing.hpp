// MMPretrain's RandomErasing (mmpretrain/datasets/transforms/processing.py),
// configured by the keys MMPretrain's configs write:
//
//   dict(type='RandomErasing', erase_prob=0.25, mode='rand',
//        min_area_ratio=0.02, max_area_ratio=1/3,
//        fill_color=[103.53, 116.28, 123.675], fill_std=[57.375, 57.12, 58.395])
//
// With probability erase_prob, one rectangle is erased (one draw, no retries):
//   aspect = exp(U(log lo, log hi)) over aspect_range (lo, hi),
//   area   = H W U(min_area_ratio, max_area_ratio),
//   h = min(round(sqrt(area aspect)), H), w = min(round(sqrt(area / aspect)), W),
//   top from 0 .. H - h - 1 when h < H (numpy's randint excludes its end, so
//   the rectangle never reaches the last row then; likewise left and the last
//   column), else 0.
// The rectangle is filled with
//   mode const: fill_color, truncated to uint8;
//   mode rand without fill_std: U(0, 256) per pixel and channel, floored;
//   mode rand with fill_std: N(fill_color, fill_std) per pixel and channel,
//     truncated toward zero, clipped to 0..255.
// Colours are BGR, as the image is.
#pragma once

#include <array>
#include <memory>
#include <optional>

#include "config/ConfigNode.hpp"
#include "config/Schema.hpp"
#include "data/image/Transform.hpp"

namespace rh::data::image {

struct RandomErasingOptions {
  double erase_prob = 0.5;
  double min_area_ratio = 0.02;
  double max_area_ratio = 0.4;
  double aspect_min = 3.0 / 10;  // aspect_range = (aspect_min, aspect_max), h / w
  double aspect_max = 10.0 / 3;
  enum class Mode { Const, Rand };
  Mode mode = Mode::Const;
  std::array<double, 3> fill_color{128, 128, 128};  // BGR
  std::optional<std::array<double, 3>> fill_std;    // BGR; rand mode only
};

class RandomErasing : public Transform {
 public:
  explicit RandomErasing(RandomErasingOptions options);
  void apply(Sample& sample, SampleRng& rng) const override;

  const RandomErasingOptions& options() const { return options_; }

 private:
  RandomErasingOptions options_;
};

// Validates `cfg` (ConfigError at the offending key) and builds the transform.
std::unique_ptr<Transform> make_random_erasing(const config::Node& cfg);

}  // namespace rh::data::image
