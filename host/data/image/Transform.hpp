// One step of an image pipeline (MMPretrain's `pipeline: [...]` entries).
//
// A transform changes one sample in place, drawing every random choice from
// the sample's own generator (SampleRng.hpp). Transforms are built once from
// their validated config map and then shared by the loader's worker threads:
// apply() is const and must not touch shared state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

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

}  // namespace rh::data::image
