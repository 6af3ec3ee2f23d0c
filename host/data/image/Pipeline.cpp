#include "data/image/Pipeline.hpp"

#include <functional>
#include <map>
#include <utility>

#include "data/image/Crops.hpp"
#include "data/image/ImageDecode.hpp"
#include "data/image/RandAugment.hpp"
#include "data/image/RandomErasing.hpp"

namespace rh::data::image {
namespace {

using config::ConfigError;
using config::Node;

// mmcv's LoadImageFromFile: the file decoded to 8-bit BGR (ImageDecode.hpp).
// The `imdecode_backend`s all decode with libjpeg-turbo / libpng.
class LoadImageFromFile : public Transform {
 public:
  void apply(Sample& s, SampleRng&) const override { s.img = decode_image_file(s.path); }
};

// PackInputs ends the pipeline; the dataset makes the tensor.
class PackInputs : public Transform {
 public:
  void apply(Sample&, SampleRng&) const override {}
};

// mmcv keys whose other values runner-host does not implement: refused, not
// ignored.
void require_value(const Node& cfg, const std::string& key, bool ok, const std::string& why) {
  if (const Node* n = cfg.find(key); n != nullptr && !ok)
    throw ConfigError(n->location(), n->path(), why);
}

std::unique_ptr<Transform> make_load(const Node& cfg) {
  const Node* f = cfg.find("to_float32");
  require_value(cfg, "to_float32", f == nullptr || !f->as_bool(),
                "true is not implemented: images stay 8-bit until the data_preprocessor");
  const Node* e = cfg.find("ignore_empty");
  require_value(cfg, "ignore_empty", e == nullptr || !e->as_bool(),
                "true is not implemented: an unreadable file is an error");
  return std::make_unique<LoadImageFromFile>();
}

using Maker = std::unique_ptr<Transform> (*)(const Node&);

// Every transform PipelineSchema.cpp accepts.
const std::map<std::string, Maker>& makers() {
  static const std::map<std::string, Maker> kTransforms = {
      {"LoadImageFromFile", make_load},
      {"RandomResizedCrop", make_random_resized_crop},
      {"ResizeEdge", make_resize_edge},
      {"CenterCrop", make_center_crop},
      {"RandomFlip", make_random_flip},
      {"RandAugment", make_rand_augment},
      {"RandomErasing", make_random_erasing},
      {"PackInputs",
       [](const Node&) -> std::unique_ptr<Transform> { return std::make_unique<PackInputs>(); }},
  };
  return kTransforms;
}

}  // namespace

Pipeline::Pipeline(const Node& list) {
  const auto& items = list.seq_items();
  if (items.empty())
    throw ConfigError(list.location(), list.path(),
                      "an empty pipeline: it starts with LoadImageFromFile and ends with "
                      "PackInputs");
  for (size_t i = 0; i < items.size(); ++i) {
    const Node& t = *items[i];
    const std::string& type = t.find("type")->as_string();
    const bool first = i == 0, last = i + 1 == items.size();
    if (first != (type == "LoadImageFromFile") || last != (type == "PackInputs"))
      throw ConfigError(t.location(), t.path(),
                        type + " at position " + std::to_string(i + 1) + " of " +
                            std::to_string(items.size()) +
                            ": a pipeline starts with LoadImageFromFile, ends with PackInputs "
                            "and has each of them once");
    auto it = makers().find(type);
    if (it == makers().end())  // the schema knows a transform this table lacks
      throw ConfigError(t.location(), t.path(), "transform " + type + " is not implemented");
    transforms_.push_back(it->second(t));
  }
  if (transforms_.size() > 2)
    crop_after_load_ = dynamic_cast<const RandomResizedCrop*>(transforms_[1].get());
}

Pipeline::~Pipeline() = default;

void Pipeline::run(Sample& sample, SampleRng& rng) const {
  size_t next = 0;
  // LoadImageFromFile then RandomResizedCrop on a JPEG: the crop is drawn
  // from the header's size and only it is decoded (ImageDecode.hpp,
  // decode_jpeg_region): the same draws and the same pixels as decoding the
  // whole image and cropping it, for a fraction of the decode.
  if (crop_after_load_ != nullptr) {
    const std::vector<uint8_t> bytes = read_image_file(sample.path);
    int height = 0, width = 0;
    if (jpeg_region_size(bytes.data(), bytes.size(), height, width)) {
      const RandomResizedCrop::Box b = crop_after_load_->box(height, width, rng);
      sample.img = crop_after_load_->resized(decode_jpeg_region(
          bytes.data(), bytes.size(), sample.path, b.top, b.left, b.height, b.width));
      next = 2;
    } else {
      sample.img = decode_image(bytes.data(), bytes.size(), sample.path);
      next = 1;
    }
  }
  for (; next < transforms_.size(); ++next) transforms_[next]->apply(sample, rng);
}

}  // namespace rh::data::image
