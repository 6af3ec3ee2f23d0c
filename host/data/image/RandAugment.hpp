// MMPretrain's RandAugment (mmpretrain/datasets/transforms/auto_augment.py)
// with its preset policy set `timm_increasing`, configured by the keys
// MMPretrain's configs write:
//
//   dict(type='RandAugment', policies='timm_increasing', num_policies=2,
//        total_level=10, magnitude_level=9, magnitude_std=0.5,
//        hparams=dict(pad_val=[104, 116, 124], interpolation='bicubic'))
//
// For each image: num_policies policies are drawn from the 15, with
// replacement; each then runs with probability 0.5 (BaseAugTransform's
// `prob`). A policy with a magnitude maps the level onto its range,
//   magnitude = level / total_level * (end - start) + start,
// the level being magnitude_level, or a draw of N(magnitude_level,
// magnitude_std) clipped to [0, total_level] when magnitude_std > 0, or of
// U(0, magnitude_level) when magnitude_std is 'inf'. Rotate, Shear, Translate
// and the four enhancements then flip the magnitude's sign with probability
// 0.5 (random_negative_prob); Posterize, Solarize and SolarizeAdd never do.
// hparams reach the ops that take them: pad_val Rotate, Shear and Translate,
// interpolation the same three (their own defaults otherwise: Shear bicubic,
// Rotate and Translate nearest).
//
// The pixel work is Photometric.hpp's and Geometric.hpp's. Custom policy lists
// and other presets are refused, not approximated.
//
// One deliberate difference: a single-number pad_val fills all three channels
// in Rotate too. mmcv.imrotate hands the bare int to cv2.warpAffine, whose
// Python binding reads a number as the colour (v, 0, 0, 0), so MMPretrain's
// Rotate with pad_val 128 fills (128, 0, 0) while its Shear and Translate
// fill (128, 128, 128). MMPretrain documents pad_val as one value for every
// channel; that is what is done here. (A 3-list, as MMPretrain's ImageNet
// configs write, behaves the same in both.)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/ConfigNode.hpp"
#include "config/Schema.hpp"
#include "data/image/Geometric.hpp"
#include "data/image/Transform.hpp"

namespace rh::data::image {

// MMPretrain's augmentation classes; Shear and Translate once per direction.
enum class AugOp {
  AutoContrast,
  Equalize,
  Invert,
  Rotate,
  Posterize,
  Solarize,
  SolarizeAdd,
  ColorTransform,
  Contrast,
  Brightness,
  Sharpness,
  ShearX,
  ShearY,
  TranslateX,
  TranslateY,
};

struct AugPolicy {
  AugOp op;
  std::string name;  // MMPretrain's type, with the direction for Shear/Translate
  // magnitude_range: (start, end) for level 0 and total_level. Unset for
  // AutoContrast, Equalize and Invert, which have no magnitude.
  std::optional<std::pair<double, double>> magnitude_range;
  bool random_negative = false;  // random_negative_prob 0.5 rather than 0
};

// RANDAUG_POLICIES['timm_increasing'], in MMPretrain's order.
const std::vector<AugPolicy>& timm_increasing_policies();

struct RandAugmentOptions {
  int num_policies = 2;
  double magnitude_level = 9;
  double total_level = 10;
  enum class Noise { None, Normal, Uniform };
  Noise noise = Noise::None;  // Normal: magnitude_std > 0; Uniform: 'inf'
  double magnitude_std = 0;
  PadValue pad_val{128, 128, 128};             // hparams.pad_val, BGR
  std::optional<Interpolation> interpolation;  // hparams.interpolation
};

// One policy that runs on this image, with its final magnitude (mapped,
// noised and signed; 0 for ops without one).
struct AugStep {
  const AugPolicy* policy = nullptr;
  double magnitude = 0;
};

class RandAugment : public Transform {
 public:
  explicit RandAugment(RandAugmentOptions options);

  // Every random choice for one image, in MMPretrain's order: the policy
  // indices, then per chosen policy its enable draw, its level noise and its
  // sign. None depends on the pixels, so apply() is draw() then run().
  std::vector<AugStep> draw(SampleRng& rng) const;
  // Applies one step; no randomness.
  void run(const AugStep& step, Image& img) const;
  void apply(Sample& sample, SampleRng& rng) const override;

  const RandAugmentOptions& options() const { return options_; }

 private:
  RandAugmentOptions options_;
};

// Validates `cfg` (ConfigError at the offending key) and builds the transform.
std::unique_ptr<Transform> make_rand_augment(const config::Node& cfg);

}  // namespace rh::data::image
