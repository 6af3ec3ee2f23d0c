#include "data/image/RandAugment.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "data/image/Photometric.hpp"
#include "data/image/PipelineSchema.hpp"

namespace rh::data::image {
namespace {

using config::ConfigError;
using config::Node;

// BaseAugTransform's defaults: neither the preset nor the accepted hparams
// change them.
constexpr double kProb = 0.5;
constexpr double kRandomNegativeProb = 0.5;
// SolarizeAdd's `thr`.
constexpr double kSolarizeAddThreshold = 128;

[[noreturn]] void fail(const Node& node, const std::string& message) {
  throw ConfigError(node.location(), node.path(), message);
}

// cv2 turns a border value into uint8 with saturate_cast: round half to even.
uint8_t pad_channel(double v) { return static_cast<uint8_t>(std::nearbyint(v)); }

PadValue read_pad_val(const Node& node) {
  const std::array<double, 3> v = bgr_value(node);
  return {pad_channel(v[0]), pad_channel(v[1]), pad_channel(v[2])};
}

}  // namespace

const std::vector<AugPolicy>& timm_increasing_policies() {
  // pytorch-image-models' _RAND_INCREASING_TRANSFORMS as MMPretrain writes them.
  static const std::vector<AugPolicy> kPolicies = {
      {AugOp::AutoContrast, "AutoContrast", std::nullopt, false},
      {AugOp::Equalize, "Equalize", std::nullopt, false},
      {AugOp::Invert, "Invert", std::nullopt, false},
      {AugOp::Rotate, "Rotate", std::make_pair(0.0, 30.0), true},
      {AugOp::Posterize, "Posterize", std::make_pair(4.0, 0.0), false},
      {AugOp::Solarize, "Solarize", std::make_pair(256.0, 0.0), false},
      {AugOp::SolarizeAdd, "SolarizeAdd", std::make_pair(0.0, 110.0), false},
      {AugOp::ColorTransform, "ColorTransform", std::make_pair(0.0, 0.9), true},
      {AugOp::Contrast, "Contrast", std::make_pair(0.0, 0.9), true},
      {AugOp::Brightness, "Brightness", std::make_pair(0.0, 0.9), true},
      {AugOp::Sharpness, "Sharpness", std::make_pair(0.0, 0.9), true},
      {AugOp::ShearX, "Shear (horizontal)", std::make_pair(0.0, 0.3), true},
      {AugOp::ShearY, "Shear (vertical)", std::make_pair(0.0, 0.3), true},
      {AugOp::TranslateX, "Translate (horizontal)", std::make_pair(0.0, 0.45), true},
      {AugOp::TranslateY, "Translate (vertical)", std::make_pair(0.0, 0.45), true},
  };
  return kPolicies;
}

RandAugment::RandAugment(RandAugmentOptions options) : options_(std::move(options)) {}

std::vector<AugStep> RandAugment::draw(SampleRng& rng) const {
  const std::vector<AugPolicy>& policies = timm_increasing_policies();
  // np.random.choice(len(policies), size=num_policies): with replacement.
  std::vector<const AugPolicy*> chosen;
  for (int i = 0; i < options_.num_policies; ++i) {
    chosen.push_back(
        &policies[static_cast<size_t>(rng.randint(0, static_cast<int64_t>(policies.size()) - 1))]);
  }
  std::vector<AugStep> steps;
  for (const AugPolicy* policy : chosen) {
    // random_disable(): np.random.rand() > prob skips the policy.
    if (rng.uniform() > kProb) continue;
    AugStep step{policy, 0.0};
    if (policy->magnitude_range) {
      // random_magnitude(): the noise is drawn only for policies with a range.
      double level = options_.magnitude_level;
      if (options_.noise == RandAugmentOptions::Noise::Uniform) {
        level = rng.uniform(0, level);
      } else if (options_.noise == RandAugmentOptions::Noise::Normal) {
        level = std::clamp(rng.normal(level, options_.magnitude_std), 0.0, options_.total_level);
      }
      const auto [start, end] = *policy->magnitude_range;
      step.magnitude = (level / options_.total_level) * (end - start) + start;
      if (policy->random_negative && rng.uniform() < kRandomNegativeProb) {
        step.magnitude = -step.magnitude;
      }
    }
    steps.push_back(step);
  }
  return steps;
}

void RandAugment::run(const AugStep& step, Image& img) const {
  const double m = step.magnitude;
  const PadValue& pad = options_.pad_val;
  const auto interpolation = [&](Interpolation op_default) {
    return options_.interpolation.value_or(op_default);
  };
  switch (step.policy->op) {
    case AugOp::AutoContrast:
      return auto_contrast(img);
    case AugOp::Equalize:
      return equalize(img);
    case AugOp::Invert:
      return invert(img);
    case AugOp::Rotate:
      return rotate(img, m, interpolation(Interpolation::Nearest), pad);
    case AugOp::Posterize:
      // "To align timm version, we need to round up to integer here."
      return posterize(img, static_cast<int>(std::ceil(m)));
    case AugOp::Solarize:
      return solarize(img, m);
    case AugOp::SolarizeAdd:
      return solarize_add(img, m, kSolarizeAddThreshold);
    case AugOp::ColorTransform:
      return adjust_color(img, 1 + m);
    case AugOp::Contrast:
      return adjust_contrast(img, 1 + m);
    case AugOp::Brightness:
      return adjust_brightness(img, 1 + m);
    case AugOp::Sharpness:
      return adjust_sharpness(img, 1 + m);
    case AugOp::ShearX:
      return shear(img, m, Direction::Horizontal, interpolation(Interpolation::Bicubic), pad);
    case AugOp::ShearY:
      return shear(img, m, Direction::Vertical, interpolation(Interpolation::Bicubic), pad);
    case AugOp::TranslateX:
      // The magnitude is a fraction of the size: 1 moves the image out.
      return translate(img, m * img.width, Direction::Horizontal,
                       interpolation(Interpolation::Nearest), pad);
    case AugOp::TranslateY:
      return translate(img, m * img.height, Direction::Vertical,
                       interpolation(Interpolation::Nearest), pad);
  }
}

void RandAugment::apply(Sample& sample, SampleRng& rng) const {
  if (sample.img.empty()) {
    throw std::runtime_error("RandAugment: " + sample.path +
                             ": no image (LoadImageFromFile must come first in the pipeline)");
  }
  for (const AugStep& step : draw(rng)) run(step, sample.img);
}

std::unique_ptr<Transform> make_rand_augment(const config::Node& cfg) {
  const std::vector<ConfigError> errors = config::validate(cfg, rand_augment_schema());
  if (!errors.empty()) throw errors.front();

  RandAugmentOptions options;
  options.num_policies = static_cast<int>(cfg.find("num_policies")->as_int());
  options.magnitude_level = cfg.find("magnitude_level")->as_double();
  if (const Node* total = cfg.find("total_level")) options.total_level = total->as_double();
  if (const Node* std_node = cfg.find("magnitude_std")) {
    if (std_node->scalar() == "inf") {
      options.noise = RandAugmentOptions::Noise::Uniform;
    } else {
      const double std_value = std_node->as_double();
      if (!std::isfinite(std_value)) {
        fail(*std_node,
             "must be finite; write 'inf' (a string) for a level drawn uniformly from 0 to "
             "magnitude_level");
      }
      // As MMPretrain: 0 or below means no noise.
      if (std_value > 0) {
        options.noise = RandAugmentOptions::Noise::Normal;
        options.magnitude_std = std_value;
      }
    }
  }
  if (const Node* hparams = cfg.find("hparams")) {
    if (const Node* pad = hparams->find("pad_val")) options.pad_val = read_pad_val(*pad);
    if (const Node* interp = hparams->find("interpolation")) {
      options.interpolation = interpolation_from_name(interp->as_string());
    }
  }
  return std::make_unique<RandAugment>(std::move(options));
}

}  // namespace rh::data::image
