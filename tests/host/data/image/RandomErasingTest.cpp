// RandomErasing.hpp: MMPretrain's RandomErasing. The rectangle is found from
// the pixels that changed (the fills below never equal the input's values)
// and checked against the draw's bounds; the fills against their modes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "config/YamlReader.hpp"
#include "data/image/PipelineSchema.hpp"
#include "data/image/RandomErasing.hpp"

namespace rh::data::image {
namespace {

using ::testing::HasSubstr;

config::NodePtr yaml(const std::string& transform) {
  return config::parse_yaml("transform: " + transform, "job.yaml");
}

std::unique_ptr<Transform> build(const std::string& transform) {
  const auto root = yaml(transform);
  return make_random_erasing(*root->find("transform"));
}

std::string config_error(const std::string& transform) {
  const auto root = yaml(transform);
  try {
    make_random_erasing(*root->find("transform"));
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for " << transform;
  return "";
}

constexpr int kH = 48, kW = 64;
constexpr uint8_t kBackground = 200;

Image background() {
  Image img(kH, kW, 3);
  std::fill(img.pixels.begin(), img.pixels.end(), kBackground);
  return img;
}

struct Rect {
  int top = 0, left = 0, height = 0, width = 0;
};

// The bounding box of the pixels that differ from the background.
Rect changed(const Image& img) {
  int top = kH, left = kW, bottom = -1, right = -1;
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      const uint8_t* p = img.at(y, x);
      if (p[0] == kBackground && p[1] == kBackground && p[2] == kBackground) continue;
      top = std::min(top, y);
      left = std::min(left, x);
      bottom = std::max(bottom, y);
      right = std::max(right, x);
    }
  }
  if (bottom < 0) return {};
  return {top, left, bottom - top + 1, right - left + 1};
}

Image erased(const Transform& t, uint64_t index, Image img = background()) {
  Sample s{"x.jpg", 0, std::move(img)};
  SampleRng rng(9, 0, index);
  t.apply(s, rng);
  return s.img;
}

TEST(RandomErasingTest, EraseProbZeroLeavesTheImage) {
  const auto t = build("{type: RandomErasing, erase_prob: 0.0, mode: rand}");
  for (uint64_t i = 0; i < 200; ++i) EXPECT_EQ(erased(*t, i).pixels, background().pixels);
}

// Every draw erases one rectangle, all of it fill_color truncated to uint8
// and nothing outside it. Its size follows from area = H W U(min, max) and
// aspect h / w in [lo, hi], each side rounded: h = round(sqrt(area r)) is
// within 0.5 of the exact side, so h w is within 0.5 (h + w) + 0.25 of the
// area, and h / w within [(h - .5) / (w + .5), (h + .5) / (w - .5)] of r.
// np.random.randint(0, H - h) never reaches H - h: the last row (column) is
// erased only by a rectangle as high (wide) as the image.
TEST(RandomErasingTest, EraseProbOneFillsARectangleWithinTheBounds) {
  const auto t = build(
      "{type: RandomErasing, erase_prob: 1.0, min_area_ratio: 0.1, max_area_ratio: 0.3, "
      "aspect_range: [0.5, 2.0], mode: const, fill_color: [10.9, 20.2, 30.7]}");
  const double area = static_cast<double>(kH) * kW;
  bool some_tall = false, some_wide = false;
  for (uint64_t i = 0; i < 300; ++i) {
    const Image img = erased(*t, i);
    const Rect r = changed(img);
    ASSERT_GT(r.height, 0) << i;
    for (int y = 0; y < kH; ++y) {
      for (int x = 0; x < kW; ++x) {
        const bool inside =
            y >= r.top && y < r.top + r.height && x >= r.left && x < r.left + r.width;
        const uint8_t* p = img.at(y, x);
        if (inside) {
          ASSERT_EQ(p[0], 10);
          ASSERT_EQ(p[1], 20);
          ASSERT_EQ(p[2], 30);
        }
      }
    }
    const double hw = static_cast<double>(r.height) * r.width;
    const double slack = 0.5 * (r.height + r.width) + 0.25;
    EXPECT_LE(hw, 0.3 * area + slack) << i;
    EXPECT_GE(hw, 0.1 * area - slack) << i;
    EXPECT_GE((r.height + 0.5) / (r.width - 0.5), 0.5) << i;
    EXPECT_LE((r.height - 0.5) / (r.width + 0.5), 2.0) << i;
    EXPECT_LT(r.top + r.height, kH) << i;
    EXPECT_LT(r.left + r.width, kW) << i;
    some_tall |= r.height > r.width;
    some_wide |= r.width > r.height;
  }
  EXPECT_TRUE(some_tall);
  EXPECT_TRUE(some_wide);
}

// The whole image as the rectangle: top and left are 0, every pixel filled.
TEST(RandomErasingTest, ARectangleAsLargeAsTheImageStartsAtTheCorner) {
  const auto t = build(
      "{type: RandomErasing, erase_prob: 1.0, min_area_ratio: 1.0, max_area_ratio: 1.0, "
      "aspect_range: [0.75, 0.75], fill_color: 0}");
  const Image img = erased(*t, 0);
  for (uint8_t v : img.pixels) ASSERT_EQ(v, 0);
}

// mode rand: U(0, 256) floored per value (mean 127.5, std 73.9), or with
// fill_std N(fill_color, fill_std) truncated toward zero (mean about
// fill_color - 0.5) and clipped. Means within 6 standard errors (+ 0.5 for
// the truncation), per channel.
TEST(RandomErasingTest, RandomFillsHaveTheirDistributions) {
  const auto uniform = build(
      "{type: RandomErasing, erase_prob: 1.0, min_area_ratio: 0.5, max_area_ratio: 0.5, "
      "mode: rand}");
  const auto normal = build(
      "{type: RandomErasing, erase_prob: 1.0, min_area_ratio: 0.5, max_area_ratio: 0.5, "
      "mode: rand, fill_color: [60, 120, 240], fill_std: [5, 20, 30]}");
  double sum[3] = {0, 0, 0}, normal_sum[3] = {0, 0, 0}, normal_sq[3] = {0, 0, 0};
  int count = 0, normal_count = 0, at_255 = 0;
  for (uint64_t i = 0; i < 20; ++i) {
    const Image u = erased(*uniform, i);
    const Image n = erased(*normal, i);
    for (int y = 0; y < kH; ++y) {
      for (int x = 0; x < kW; ++x) {
        const uint8_t* pu = u.at(y, x);
        const uint8_t* pn = n.at(y, x);
        // A value equal to the background counts as outside (it rarely is,
        // and leaving it out moves the means by far less than the bounds).
        if (pu[0] != kBackground || pu[1] != kBackground || pu[2] != kBackground) {
          ++count;
          for (int c = 0; c < 3; ++c) sum[c] += pu[c];
        }
        if (pn[0] != kBackground || pn[1] != kBackground || pn[2] != kBackground) {
          ++normal_count;
          for (int c = 0; c < 3; ++c) {
            normal_sum[c] += pn[c];
            normal_sq[c] += static_cast<double>(pn[c]) * pn[c];
          }
          at_255 += pn[2] == 255;
        }
      }
    }
  }
  ASSERT_GT(count, 10000);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(sum[c] / count, 127.5, 6 * 73.9 / std::sqrt(count)) << c;
  }
  const double mean[3] = {60, 120, 240}, sd[3] = {5, 20, 30};
  for (int c = 0; c < 2; ++c) {
    const double m = normal_sum[c] / normal_count;
    EXPECT_NEAR(m, mean[c] - 0.5, 6 * sd[c] / std::sqrt(normal_count) + 0.5) << c;
    const double var = normal_sq[c] / normal_count - m * m;
    EXPECT_NEAR(std::sqrt(var), sd[c], 0.05 * sd[c]) << c;
  }
  // R: N(240, 30) is clipped at 255 about 31% of the time.
  EXPECT_GT(at_255, normal_count / 4);
  EXPECT_LT(at_255, normal_count * 4 / 10);
}

TEST(RandomErasingTest, TheSameKeyErasesTheSameWay) {
  const auto t = build(
      "{type: RandomErasing, erase_prob: 0.5, mode: rand, fill_color: [103.53, 116.28, "
      "123.675], fill_std: [57.375, 57.12, 58.395]}");
  EXPECT_EQ(erased(*t, 4).pixels, erased(*t, 4).pixels);
  int changed_count = 0;
  for (uint64_t i = 0; i < 200; ++i) changed_count += erased(*t, i).pixels != background().pixels;
  // erase_prob 0.5 of 200: 6 standard deviations is 42.
  EXPECT_NEAR(changed_count, 100, 42);

  Sample gray{"g.png", 0, Image(4, 4, 1)};
  SampleRng rng(1, 0, 0);
  EXPECT_THROW(t->apply(gray, rng), std::runtime_error);
}

TEST(RandomErasingTest, TheSchemaRefusesUnknownKeysAndBadValues) {
  const auto unknown = yaml("{type: RandomErasing, erase_probability: 0.3, fill_colour: 0}");
  const auto errors = config::validate(*unknown->find("transform"), random_erasing_schema());
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0].what(), HasSubstr("transform.erase_probability: unknown key"));
  EXPECT_THAT(errors[1].what(),
              HasSubstr("transform.fill_colour: unknown key (did you mean 'fill_color'?)"));
  EXPECT_THAT(config_error("{type: RandomErasing, mode: noise}"),
              HasSubstr("transform.mode: expected one of const, rand"));
  EXPECT_THAT(config_error("{type: RandomErasing, erase_prob: 1.5}"),
              HasSubstr("transform.erase_prob: must be <= 1"));
  EXPECT_THAT(config_error("{type: RandomErasing, min_area_ratio: 0.5, max_area_ratio: 0.2}"),
              HasSubstr("transform.max_area_ratio: must be >= min_area_ratio (0.5), got 0.2"));
  EXPECT_THAT(config_error("{type: RandomErasing, min_area_ratio: 0.5}"),
              HasSubstr("transform.min_area_ratio: must be <= max_area_ratio (default 0.4)"));
  EXPECT_THAT(config_error("{type: RandomErasing, fill_color: [1, 2]}"),
              HasSubstr("transform.fill_color: expected 3 values (B, G, R), got 2"));
  EXPECT_THAT(config_error("{type: RandomErasing, fill_std: [1, 2, 3, 4]}"),
              HasSubstr("transform.fill_std: expected 3 values (B, G, R), got 4"));
  EXPECT_THAT(config_error("{type: RandomErasing, aspect_range: [0.3, 1, 3]}"),
              HasSubstr("transform.aspect_range: expected 2 values (min, max), got 3"));
  EXPECT_THAT(config_error("{type: RandomErasing, aspect_range: [3, 0.3]}"),
              HasSubstr("transform.aspect_range: the min (3) must not exceed the max (0.3)"));
  EXPECT_THAT(config_error("{type: RandomErasing, aspect_range: 0}"),
              HasSubstr("transform.aspect_range"));

  // A single aspect a means (min(a, 1/a), max(a, 1/a)); fill_std may be null.
  const auto root = yaml("{type: RandomErasing, aspect_range: 2.5, fill_std: null}");
  const auto t = make_random_erasing(*root->find("transform"));
  const auto& o = dynamic_cast<const RandomErasing&>(*t).options();
  EXPECT_DOUBLE_EQ(o.aspect_min, 0.4);
  EXPECT_DOUBLE_EQ(o.aspect_max, 2.5);
  EXPECT_FALSE(o.fill_std);
  EXPECT_EQ(o.mode, RandomErasingOptions::Mode::Const);
}

}  // namespace
}  // namespace rh::data::image
