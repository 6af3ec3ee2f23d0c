// An image pipeline: MMPretrain's `pipeline: [...]` list, built once from the
// validated config and run per sample in the loader's worker threads.
//
// Implemented transforms (each with the keys MMPretrain / mmcv give it):
// LoadImageFromFile, RandomResizedCrop, ResizeEdge, CenterCrop, RandomFlip,
// RandAugment, RandomErasing, PackInputs. Another type is refused by name at
// validation (the schema's typed union), as is a key a transform does not
// implement. The list must start with LoadImageFromFile and end with
// PackInputs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/ConfigNode.hpp"
#include "data/image/Transform.hpp"

namespace rh::data::image {

class RandomResizedCrop;

class Pipeline {
 public:
  // `list`: the validated `pipeline:` sequence. Throws config::ConfigError at
  // the entry for a rule the schema cannot say (the order, a value a key
  // accepts in MMPretrain but runner-host does not implement).
  explicit Pipeline(const config::Node& list);
  ~Pipeline();

  // Loads sample.path and runs every transform; an ImageError or a
  // transform's error propagates (the dataset adds the sample's index).
  void run(Sample& sample, SampleRng& rng) const;

 private:
  std::vector<std::unique_ptr<Transform>> transforms_;
  // The RandomResizedCrop right after LoadImageFromFile, if that is the
  // second transform: run() then decodes only the crop.
  const RandomResizedCrop* crop_after_load_ = nullptr;
};

}  // namespace rh::data::image
