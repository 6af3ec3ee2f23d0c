// One step of an image pipeline (MMPretrain's `pipeline: [...]` entries).
//
// A transform changes one sample in place, drawing every random choice from
// the sample's own generator (SampleRng.hpp). Transforms are built once from
// their validated config map and then shared by the loader's worker threads:
// apply() is const and must not touch shared state.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "config/ConfigNode.hpp"
#include "data/image/Image.hpp"
#include "data/image/SampleRng.hpp"

namespace rh::data::image {

struct Sample {
  std::string path;  // the image file (for errors)
  int64_t label = -1;
  Image img;  // empty until LoadImageFromFile
};

class Transform {
 public:
  virtual ~Transform() = default;
  virtual void apply(Sample& sample, SampleRng& rng) const = 0;
};

// A colour key as MMPretrain writes it (pad_val, fill_color, fill_std): a
// number for all three channels or a list of three (B, G, R). Throws
// config::ConfigError at the key for a list of another length.
std::array<double, 3> bgr_value(const config::Node& node);

}  // namespace rh::data::image
