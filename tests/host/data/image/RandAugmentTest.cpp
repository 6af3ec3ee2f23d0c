// RandAugment.hpp: MMPretrain's RandAugment with the timm_increasing
// policies. The draws (which policies, which run, their magnitudes and signs)
// are checked against MMPretrain's rules; the ops themselves against mmcv in
// ImageOpsTest.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/YamlReader.hpp"
#include "data/image/Photometric.hpp"
#include "data/image/PipelineSchema.hpp"
#include "data/image/RandAugment.hpp"

namespace rh::data::image {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

config::NodePtr yaml(const std::string& transform) {
  return config::parse_yaml("transform: " + transform, "job.yaml");
}

std::unique_ptr<RandAugment> build(const std::string& transform) {
  const auto root = yaml(transform);
  std::unique_ptr<Transform> t = make_rand_augment(*root->find("transform"));
  return std::unique_ptr<RandAugment>(dynamic_cast<RandAugment*>(t.release()));
}

// what() of the ConfigError make_rand_augment throws for `transform`.
std::string config_error(const std::string& transform) {
  const auto root = yaml(transform);
  try {
    make_rand_augment(*root->find("transform"));
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for " << transform;
  return "";
}

// Gradients and noise-like values, all channels different.
Image test_image(int h, int w) {
  Image img(h, w, 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      img.at(y, x)[0] = static_cast<uint8_t>(40 + 3 * x + (x * y) % 17);
      img.at(y, x)[1] = static_cast<uint8_t>(20 + 4 * y + (x * 7 + y * 3) % 23);
      img.at(y, x)[2] = static_cast<uint8_t>(90 + x + y + (x ^ y) % 11);
    }
  }
  return img;
}

const AugPolicy& policy(AugOp op) {
  for (const AugPolicy& p : timm_increasing_policies()) {
    if (p.op == op) return p;
  }
  throw std::logic_error("no such policy");
}

bool is_geometric(AugOp op) {
  return op == AugOp::Rotate || op == AugOp::ShearX || op == AugOp::ShearY ||
         op == AugOp::TranslateX || op == AugOp::TranslateY;
}

const char* kTypical =
    "{type: RandAugment, policies: timm_increasing, num_policies: 2, total_level: 10, "
    "magnitude_level: 9, magnitude_std: 0.5, hparams: {pad_val: [104, 116, 124], "
    "interpolation: bicubic}}";

TEST(RandAugmentTest, TimmIncreasingIsMMPretrainsPreset) {
  const auto& p = timm_increasing_policies();
  ASSERT_EQ(p.size(), 15u);
  // (op, start, end) in RANDAUG_POLICIES['timm_increasing'] order.
  EXPECT_EQ(p[0].op, AugOp::AutoContrast);
  EXPECT_FALSE(p[0].magnitude_range);
  EXPECT_EQ(p[2].op, AugOp::Invert);
  EXPECT_EQ(p[3].op, AugOp::Rotate);
  EXPECT_EQ(*p[3].magnitude_range, std::make_pair(0.0, 30.0));
  EXPECT_EQ(*p[4].magnitude_range, std::make_pair(4.0, 0.0));    // Posterize
  EXPECT_EQ(*p[5].magnitude_range, std::make_pair(256.0, 0.0));  // Solarize
  EXPECT_EQ(*p[6].magnitude_range, std::make_pair(0.0, 110.0));  // SolarizeAdd
  EXPECT_EQ(*p[10].magnitude_range, std::make_pair(0.0, 0.9));   // Sharpness
  EXPECT_EQ(p[12].op, AugOp::ShearY);
  EXPECT_EQ(*p[12].magnitude_range, std::make_pair(0.0, 0.3));
  EXPECT_EQ(p[14].op, AugOp::TranslateY);
  EXPECT_EQ(*p[14].magnitude_range, std::make_pair(0.0, 0.45));
  // Posterize, Solarize and SolarizeAdd set random_negative_prob = 0.
  for (const AugPolicy& q : p) {
    const bool never_negative = q.op == AugOp::Posterize || q.op == AugOp::Solarize ||
                                q.op == AugOp::SolarizeAdd || !q.magnitude_range;
    EXPECT_EQ(q.random_negative, !never_negative) << q.name;
  }
}

// Level 9 of 10 without noise: every magnitude is 0.9 of its range, signed
// at random where MMPretrain signs it. Over 6000 images, the frequencies
// are within 6 standard deviations of MMPretrain's probabilities: a policy is
// picked with probability 1/15 per draw, runs with 0.5, and is negated with 0.5.
TEST(RandAugmentTest, DrawsFollowMMPretrainsRules) {
  const auto ra =
      build("{type: RandAugment, policies: timm_increasing, num_policies: 2, magnitude_level: 9}");
  const std::map<AugOp, double> at_level_9 = {
      {AugOp::Rotate, 27},       {AugOp::Posterize, 0.4},       {AugOp::Solarize, 25.6},
      {AugOp::SolarizeAdd, 99},  {AugOp::ColorTransform, 0.81}, {AugOp::Contrast, 0.81},
      {AugOp::Brightness, 0.81}, {AugOp::Sharpness, 0.81},      {AugOp::ShearX, 0.27},
      {AugOp::ShearY, 0.27},     {AugOp::TranslateX, 0.405},    {AugOp::TranslateY, 0.405},
  };
  const int n = 6000;
  std::map<AugOp, int> runs, negative;
  int steps = 0, twice = 0;
  for (int i = 0; i < n; ++i) {
    SampleRng rng(11, 0, static_cast<uint64_t>(i));
    const std::vector<AugStep> drawn = ra->draw(rng);
    ASSERT_LE(drawn.size(), 2u);
    steps += static_cast<int>(drawn.size());
    if (drawn.size() == 2 && drawn[0].policy == drawn[1].policy) ++twice;
    for (const AugStep& s : drawn) {
      ++runs[s.policy->op];
      const auto expected = at_level_9.find(s.policy->op);
      if (expected == at_level_9.end()) {
        EXPECT_EQ(s.magnitude, 0) << s.policy->name;
        continue;
      }
      EXPECT_NEAR(std::abs(s.magnitude), expected->second, 1e-12) << s.policy->name;
      if (s.magnitude < 0) {
        ++negative[s.policy->op];
        EXPECT_TRUE(s.policy->random_negative) << s.policy->name;
      }
    }
  }
  const auto within = [](int count, double trials, double p) {
    return std::abs(count - trials * p) <= 6 * std::sqrt(trials * p * (1 - p));
  };
  EXPECT_TRUE(within(steps, 2.0 * n, 0.5)) << steps;
  for (const AugPolicy& p : timm_increasing_policies()) {
    EXPECT_TRUE(within(runs[p.op], 2.0 * n, 0.5 / 15)) << p.name << " ran " << runs[p.op];
    if (p.random_negative) {
      EXPECT_TRUE(within(negative[p.op], runs[p.op], 0.5)) << p.name << " " << negative[p.op];
    }
  }
  // np.random.choice draws with replacement: the same policy twice in one
  // image (both picked, both run) has probability 1/15 x 1/4.
  EXPECT_TRUE(within(twice, n, 1.0 / 60)) << twice;
}

// magnitude_std > 0: N(level, std) clipped to [0, total_level], so some
// Rotate magnitudes are exactly 30 (level 10) and none above; 'inf': U(0, level).
TEST(RandAugmentTest, LevelNoiseIsClippedNormalOrUniform) {
  const auto normal = build(
      "{type: RandAugment, policies: timm_increasing, num_policies: 4, magnitude_level: 9, "
      "magnitude_std: 3}");
  const auto uniform = build(
      "{type: RandAugment, policies: timm_increasing, num_policies: 4, magnitude_level: 9, "
      "magnitude_std: inf}");
  EXPECT_EQ(normal->options().noise, RandAugmentOptions::Noise::Normal);
  EXPECT_EQ(uniform->options().noise, RandAugmentOptions::Noise::Uniform);
  int at_top = 0, rotations = 0;
  double uniform_sum = 0;
  int uniform_count = 0;
  for (int i = 0; i < 3000; ++i) {
    SampleRng a(3, 1, static_cast<uint64_t>(i)), b(3, 1, static_cast<uint64_t>(i));
    for (const AugStep& s : normal->draw(a)) {
      if (s.policy->op != AugOp::Rotate) continue;
      ++rotations;
      EXPECT_LE(std::abs(s.magnitude), 30.0);
      at_top += std::abs(s.magnitude) == 30.0;
    }
    for (const AugStep& s : uniform->draw(b)) {
      if (s.policy->op != AugOp::Rotate) continue;
      EXPECT_LE(std::abs(s.magnitude), 27.0);
      uniform_sum += std::abs(s.magnitude);
      ++uniform_count;
    }
  }
  // P(N(9, 3) > 10) = 0.37.
  EXPECT_GT(at_top, rotations / 5);
  EXPECT_LT(at_top, rotations / 2);
  // U(0, 9) mapped to 0..27: mean 13.5, std 7.8; 6 standard errors.
  EXPECT_NEAR(uniform_sum / uniform_count, 13.5, 6 * 7.8 / std::sqrt(uniform_count));
}

// Level 0 without noise: Rotate, Shear and Translate draw magnitude 0 (signed
// or not) and leave the image as it is, in every interpolation.
TEST(RandAugmentTest, LevelZeroLeavesTheGeometricOpsAsTheIdentity) {
  const Image in = test_image(24, 31);
  for (const char* interpolation :
       {"", ", interpolation: nearest", ", interpolation: bilinear", ", interpolation: bicubic"}) {
    const auto ra =
        build(std::string("{type: RandAugment, policies: timm_increasing, num_policies: 3, "
                          "magnitude_level: 0, magnitude_std: 0, hparams: {pad_val: 0") +
              interpolation + "}}");
    int geometric = 0;
    for (int i = 0; i < 300; ++i) {
      SampleRng rng(5, 0, static_cast<uint64_t>(i));
      for (const AugStep& s : ra->draw(rng)) {
        if (!is_geometric(s.policy->op)) continue;
        ++geometric;
        EXPECT_EQ(s.magnitude, 0.0);
        Image img = in;
        ra->run(s, img);
        ASSERT_EQ(img.pixels, in.pixels) << s.policy->name << interpolation;
      }
    }
    EXPECT_GT(geometric, 50);
  }
}

TEST(RandAugmentTest, TheSameKeyGivesTheSameImageAndOtherKeysOthers) {
  const auto ra = build(kTypical);
  const Image in = test_image(32, 40);
  const auto augmented = [&](uint64_t index) {
    Sample s{"x.jpg", 0, in};
    SampleRng rng(7, 2, index);
    ra->apply(s, rng);
    return s.img.pixels;
  };
  EXPECT_EQ(augmented(3), augmented(3));
  EXPECT_NE(augmented(0), augmented(1));
  std::set<std::vector<uint8_t>> distinct;
  for (uint64_t i = 0; i < 20; ++i) distinct.insert(augmented(i));
  EXPECT_GE(distinct.size(), 12u);  // P(no policy runs) = 1/4: a few stay the input

  // apply() is draw() then run(), nothing else random.
  Sample s{"x.jpg", 0, in};
  SampleRng a(7, 2, 9), b(7, 2, 9);
  ra->apply(s, a);
  Image by_hand = in;
  for (const AugStep& step : ra->draw(b)) ra->run(step, by_hand);
  EXPECT_EQ(s.img.pixels, by_hand.pixels);

  Sample empty{"missing.jpg", 0, Image()};
  SampleRng rng(1, 0, 0);
  try {
    ra->apply(empty, rng);
    ADD_FAILURE() << "no error for an empty image";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing.jpg"));
  }
}

// hparams.pad_val fills what the geometric ops uncover, per channel (BGR);
// hparams.interpolation replaces each op's default (Shear bicubic, Rotate
// and Translate nearest). The magnitudes reach the ops as MMPretrain passes
// them: Translate's as a fraction of the size, Posterize's rounded up.
TEST(RandAugmentTest, RunPassesHparamsAndMagnitudesToTheOps) {
  const Image in = test_image(20, 30);
  const auto padded = build(
      "{type: RandAugment, policies: timm_increasing, num_policies: 1, magnitude_level: 5, "
      "hparams: {pad_val: [1, 2, 3]}}");
  Image moved = in;
  padded->run({&policy(AugOp::TranslateX), 0.45}, moved);  // 13.5 pixels right
  Image expected_move = in;
  translate(expected_move, 13.5, Direction::Horizontal, Interpolation::Nearest, {1, 2, 3});
  EXPECT_EQ(moved.pixels, expected_move.pixels);
  // Column x reads round(x - 13.5) = x - 13 (cv2 rounds .5 up): 0..12 are pad.
  EXPECT_EQ(moved.at(7, 0)[0], 1);
  EXPECT_EQ(moved.at(7, 12)[1], 2);
  EXPECT_EQ(moved.at(7, 12)[2], 3);
  EXPECT_EQ(moved.at(7, 13)[0], in.at(7, 0)[0]);
  Image down = in;
  padded->run({&policy(AugOp::TranslateY), -0.25}, down);  // 5 pixels up
  EXPECT_EQ(down.at(19, 4)[2], 3);
  EXPECT_EQ(down.at(0, 4)[0], in.at(5, 4)[0]);

  Image sheared = in, by_hand = in;
  padded->run({&policy(AugOp::ShearX), 0.2}, sheared);
  shear(by_hand, 0.2, Direction::Horizontal, Interpolation::Bicubic, {1, 2, 3});
  EXPECT_EQ(sheared.pixels, by_hand.pixels);
  Image rotated = in;
  by_hand = in;
  padded->run({&policy(AugOp::Rotate), -12}, rotated);
  rotate(by_hand, -12, Interpolation::Nearest, {1, 2, 3});
  EXPECT_EQ(rotated.pixels, by_hand.pixels);

  const auto bilinear = build(
      "{type: RandAugment, policies: timm_increasing, num_policies: 1, magnitude_level: 5, "
      "hparams: {pad_val: 103.5, interpolation: bilinear}}");
  EXPECT_EQ(bilinear->options().pad_val, (PadValue{104, 104, 104}));  // cv2 rounds half to even
  sheared = in;
  by_hand = in;
  bilinear->run({&policy(AugOp::ShearY), -0.2}, sheared);
  shear(by_hand, -0.2, Direction::Vertical, Interpolation::Bilinear, {104, 104, 104});
  EXPECT_EQ(sheared.pixels, by_hand.pixels);

  Image poster = in;
  by_hand = in;
  padded->run({&policy(AugOp::Posterize), 0.4}, poster);
  posterize(by_hand, 1);
  EXPECT_EQ(poster.pixels, by_hand.pixels);
  Image bright = in;
  by_hand = in;
  padded->run({&policy(AugOp::Brightness), -0.45}, bright);
  adjust_brightness(by_hand, 0.55);
  EXPECT_EQ(bright.pixels, by_hand.pixels);
}

TEST(RandAugmentTest, TheSchemaRefusesWhatIsNotImplemented) {
  // The job validator's view: validate() against the schema.
  const auto unknown =
      yaml("{type: RandAugment, policies: timm_increasing, num_policies: 2, magnitude_lvl: 9}");
  const auto errors = config::validate(*unknown->find("transform"), rand_augment_schema());
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0].what(), HasSubstr("missing required key 'magnitude_level'"));
  EXPECT_THAT(errors[1].what(), HasSubstr("transform.magnitude_lvl: unknown key (did you mean "
                                          "'magnitude_level'?)"));

  const std::string base = "type: RandAugment, num_policies: 2, magnitude_level: 9";
  EXPECT_THAT(config_error("{" + base + ", policies: imagenet}"),
              AllOf(HasSubstr("transform.policies"), HasSubstr("timm_increasing"),
                    HasSubstr("'imagenet'")));
  EXPECT_THAT(config_error("{" + base + ", policies: [{type: Rotate, magnitude_range: [0, 30]}]}"),
              AllOf(HasSubstr("transform.policies"), HasSubstr("the only policy set implemented")));
  const std::string ok = "{" + base + ", policies: timm_increasing";
  EXPECT_THAT(config_error(ok + ", hparams: {pad_val: 0, prob: 1.0}}"),
              HasSubstr("transform.hparams.prob: unknown key"));
  EXPECT_THAT(config_error(ok + ", hparams: {pad_val: [1, 2]}}"),
              HasSubstr("transform.hparams.pad_val: expected 3 values (B, G, R), got 2"));
  EXPECT_THAT(config_error(ok + ", hparams: {pad_val: 300}}"),
              HasSubstr("transform.hparams.pad_val"));
  EXPECT_THAT(config_error(ok + ", hparams: {interpolation: lanczos}}"),
              HasSubstr("transform.hparams.interpolation: expected one of nearest, bilinear"));
  EXPECT_THAT(config_error(ok + ", magnitude_std: wide}"),
              HasSubstr("transform.magnitude_std: expected one of inf, got 'wide'"));
  EXPECT_THAT(config_error(ok + ", magnitude_std: .inf}"),
              HasSubstr("transform.magnitude_std: must be finite; write 'inf'"));
  EXPECT_THAT(config_error(ok + ", total_level: 0}"),
              HasSubstr("transform.total_level: must be > 0"));
  EXPECT_THAT(config_error("{type: RandAugment, policies: timm_increasing, num_policies: 0, "
                           "magnitude_level: 9}"),
              HasSubstr("transform.num_policies: must be >= 1"));
  EXPECT_THAT(config_error("{type: RandAugment, policies: timm_increasing, num_policies: 2, "
                           "magnitude_level: -1}"),
              HasSubstr("transform.magnitude_level: must be >= 0"));
  EXPECT_THAT(config_error("{type: RandAug, policies: timm_increasing, num_policies: 2, "
                           "magnitude_level: 1}"),
              HasSubstr("transform.type"));
  // Every accepted key at once builds.
  EXPECT_NE(build(kTypical), nullptr);
  EXPECT_NE(build("{" + base +
                  ", policies: 'timm_increasing', magnitude_std: 'inf', "
                  "total_level: 30, hparams: {pad_val: 128, interpolation: area}}"),
            nullptr);
}

}  // namespace
}  // namespace rh::data::image
