// The geometric transforms of MMPretrain's ImageNet pipelines: crops,
// resizes and flips, with mmcv's / MMPretrain's arithmetic (their rounding,
// their random draws) and Pillow's resampler (Resize.hpp).
#pragma once

#include <memory>
#include <utility>

#include "config/ConfigNode.hpp"
#include "data/image/Resize.hpp"
#include "data/image/Transform.hpp"

namespace rh::data::image {

// MMPretrain's RandomResizedCrop: a crop of a random area fraction and
// aspect ratio (10 tries, then the centre crop clamped to the ratio range),
// resized to `scale` (height, width). In two halves too, for a pipeline that
// decodes only the crop (Pipeline.cpp): the box draws everything random
// from the image's size alone.
class RandomResizedCrop : public Transform {
 public:
  struct Box {
    int top = 0, left = 0, height = 0, width = 0;
  };

  explicit RandomResizedCrop(const config::Node& cfg);
  Box box(int height, int width, SampleRng& rng) const;
  Image resized(const Image& cropped) const;
  void apply(Sample& s, SampleRng& rng) const override;

 private:
  int height_ = 0, width_ = 0;
  std::pair<double, double> area_{0.08, 1.0};
  std::pair<double, double> ratio_{3.0 / 4.0, 4.0 / 3.0};
  int attempts_ = 10;
  Interpolation how_ = Interpolation::Bilinear;
};

// Each takes the validated map of its pipeline entry (`type` included;
// PipelineSchema.cpp has their keys).
std::unique_ptr<Transform> make_random_resized_crop(const config::Node& cfg);
std::unique_ptr<Transform> make_resize_edge(const config::Node& cfg);
std::unique_ptr<Transform> make_center_crop(const config::Node& cfg);
std::unique_ptr<Transform> make_random_flip(const config::Node& cfg);

}  // namespace rh::data::image
