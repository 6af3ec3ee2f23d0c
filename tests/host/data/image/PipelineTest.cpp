// The pipeline's geometric transforms (Crops.hpp) with MMPretrain's and
// mmcv's arithmetic, and the pipeline's own rules: the order, unknown
// transforms and keys, values MMPretrain has that runner-host does not.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/TestUtil.hpp"
#include "config/Schema.hpp"
#include "config/YamlReader.hpp"
#include "data/image/Crops.hpp"
#include "data/image/ImageDecode.hpp"
#include "data/image/Pipeline.hpp"
#include "data/image/PipelineSchema.hpp"
#include "data/image/Resize.hpp"
#include "host/data/image/ImageTestUtil.hpp"

namespace rh::data::image {
namespace {

using ::testing::HasSubstr;

config::NodePtr yaml(const std::string& text) { return config::parse_yaml(text, "t.yaml"); }

// Pixel (y, x) holds (x, y, 7): where a pixel came from is in its value.
Image coordinates(int height, int width) {
  Image img(height, width, 3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      img.at(y, x)[0] = static_cast<uint8_t>(x);
      img.at(y, x)[1] = static_cast<uint8_t>(y);
      img.at(y, x)[2] = 7;
    }
  return img;
}

Sample sample_of(Image img) {
  Sample s;
  s.img = std::move(img);
  return s;
}

Image run(const std::string& entry, Image img, uint64_t index = 0) {
  const auto cfg = yaml("t: " + entry);
  const config::Node& t = *cfg->find("t");
  const std::string type = t.find("type")->as_string();
  std::unique_ptr<Transform> tr = type == "RandomResizedCrop" ? make_random_resized_crop(t)
                                  : type == "ResizeEdge"      ? make_resize_edge(t)
                                  : type == "CenterCrop"      ? make_center_crop(t)
                                                              : make_random_flip(t);
  Sample s = sample_of(std::move(img));
  SampleRng rng(1, 0, index);
  tr->apply(s, rng);
  return s.img;
}

TEST(PipelineTest, RandomResizedCropCropsInsideTheRangesItIsGiven) {
  const Image img = coordinates(120, 200);
  // Nearest keeps coordinates: the corners give the crop's box (to within
  // one output pixel's span of the input, the scale's rounding).
  for (uint64_t i = 0; i < 50; ++i) {
    const Image out =
        run("{type: RandomResizedCrop, scale: [20, 30], crop_ratio_range: [0.25, 0.5], "
            "interpolation: nearest}",
            img, i);
    ASSERT_EQ(out.height, 20);
    ASSERT_EQ(out.width, 30);
    const int x0 = out.at(0, 0)[0], y0 = out.at(0, 0)[1];
    const int x1 = out.at(19, 29)[0], y1 = out.at(19, 29)[1];
    // The box [x0, x1 + sx) x [y0, y1 + sy), sx = crop width / 30 <= 200 / 30.
    const double w = (x1 - x0) * 30.0 / 29, h = (y1 - y0) * 20.0 / 19;
    EXPECT_GE(w * h / (120 * 200), 0.25 * 0.8) << i;  // area within the range, less rounding
    EXPECT_LE(w * h / (120 * 200), 0.5 * 1.1) << i;
    EXPECT_GE(w / h, 3.0 / 4 * 0.85) << i;  // aspect within [3/4, 4/3]
    EXPECT_LE(w / h, 4.0 / 3 * 1.15) << i;
  }
}

TEST(PipelineTest, RandomResizedCropFallsBackToTheCentreCropMMPretrainTakes) {
  // 100 wide, 20 high (ratio 5 > 4/3) and no attempts: height 20, width
  // round(20 * 4/3) = 27, left (100 - 27) // 2 = 36.
  const Image img = coordinates(20, 100);
  const Image out =
      run("{type: RandomResizedCrop, scale: 16, max_attempts: 0, interpolation: bicubic}", img);
  const Image expected = resize(crop(img, 0, 36, 20, 27), 16, 16, Interpolation::Bicubic);
  EXPECT_EQ(out.pixels, expected.pixels);
  // The whole image when it is within the ratio range and the area is 1.
  const Image square = coordinates(30, 36);
  EXPECT_EQ(run("{type: RandomResizedCrop, scale: 12, crop_ratio_range: [1, 1], "
                "aspect_ratio_range: [1.2, 1.2]}",
                square)
                .pixels,
            resize(square, 12, 12, Interpolation::Bilinear).pixels);
}

TEST(PipelineTest, ResizeEdgeAndCenterCropAsMmcvRoundsThem) {
  // 300 wide, 200 high; short edge to 256: 256 x int(256 * 300 / 200) = 384.
  Image out = run("{type: ResizeEdge, scale: 256, edge: short}", coordinates(200, 300));
  EXPECT_EQ(out.height, 256);
  EXPECT_EQ(out.width, 384);
  out = run("{type: ResizeEdge, scale: 100, edge: long}", coordinates(200, 300));
  EXPECT_EQ(out.width, 100);
  EXPECT_EQ(out.height, 66);  // int(100 * 200 / 300)
  // 7 wide, 6 high, crop 4: left round(1.5) = 2 (half to even), top round(1.0) = 1.
  out = run("{type: CenterCrop, crop_size: 4}", coordinates(6, 7));
  ASSERT_EQ(out.width, 4);
  ASSERT_EQ(out.height, 4);
  EXPECT_EQ(out.at(0, 0)[0], 2);
  EXPECT_EQ(out.at(0, 0)[1], 1);
  // [width, height]; a side shorter than the crop stays whole.
  out = run("{type: CenterCrop, crop_size: [3, 9]}", coordinates(6, 8));
  EXPECT_EQ(out.width, 3);
  EXPECT_EQ(out.height, 6);
  EXPECT_EQ(out.at(0, 0)[0], 2);  // round(2.5) = 2
}

TEST(PipelineTest, RandomFlipFlipsWithItsProbability) {
  const Image img = coordinates(4, 5);
  EXPECT_EQ(run("{type: RandomFlip, prob: 1.0, direction: horizontal}", img).at(0, 0)[0], 4);
  EXPECT_EQ(run("{type: RandomFlip, prob: 0.0}", img).pixels, img.pixels);
  const Image d = run("{type: RandomFlip, prob: 1.0, direction: diagonal}", img);
  EXPECT_EQ(d.at(0, 0)[0], 4);
  EXPECT_EQ(d.at(0, 0)[1], 3);
  int flipped = 0;
  for (uint64_t i = 0; i < 400; ++i)
    flipped += run("{type: RandomFlip, prob: 0.5}", img, i).at(0, 0)[0] == 4;
  EXPECT_NEAR(flipped, 200, 60);  // 6 standard deviations of Binomial(400, 0.5)
  const Image v =
      run("{type: RandomFlip, prob: [0.0, 1.0], direction: [horizontal, vertical]}", img);
  EXPECT_EQ(v.at(0, 0)[1], 3);
  EXPECT_EQ(v.at(0, 0)[0], 0);
}

// LoadImageFromFile + RandomResizedCrop decode only the crop of a JPEG: the
// same draws and pixels as decoding it whole and cropping (PNG: whole).
TEST(PipelineTest, DecodingOnlyTheCropGivesTheWholeDecodesResult) {
  rh::test::TempDir dir;
  test::python(dir, R"(
rng = np.random.default_rng(2)
img = Image.fromarray(rng.integers(0, 255, (97, 131, 3), dtype=np.uint8))
img.save('a.jpg', quality=90)
img.save('a.png')
)");
  const std::string rrc = "{type: RandomResizedCrop, scale: [24, 20], interpolation: bicubic}";
  const auto list = yaml("p: [{type: LoadImageFromFile}, " + rrc + ", {type: PackInputs}]");
  const Pipeline pipeline(*list->find("p"));
  const auto one = yaml("t: " + rrc);
  const auto alone = make_random_resized_crop(*one->find("t"));
  for (const char* file : {"a.jpg", "a.png"}) {
    for (uint64_t i = 0; i < 20; ++i) {
      Sample fused;
      fused.path = (dir.path() / file).string();
      SampleRng r1(4, 1, i), r2(4, 1, i);
      pipeline.run(fused, r1);
      Sample whole;
      whole.img = decode_image_file(fused.path);
      alone->apply(whole, r2);
      ASSERT_EQ(fused.img.pixels, whole.img.pixels) << file << " sample " << i;
      EXPECT_EQ(r1.next(), r2.next());  // the same draws, so the next transform's too
    }
  }
}

std::vector<std::string> errors(const std::string& pipeline) {
  const auto cfg = yaml("pipeline: " + pipeline);
  std::vector<std::string> out;
  for (const auto& e : config::validate(*cfg->find("pipeline"), pipeline_schema()))
    out.push_back(e.what());
  if (out.empty()) {
    try {
      Pipeline p(*cfg->find("pipeline"));
    } catch (const config::ConfigError& e) {
      out.push_back(e.what());
    }
  }
  return out;
}

TEST(PipelineTest, WhatItDoesNotImplementIsRefusedByName) {
  // imagenet_bs64_swin_224.py's train pipeline, as written.
  EXPECT_THAT(
      errors("[{type: LoadImageFromFile}, {type: RandomResizedCrop, scale: 224, backend: pillow, "
             "interpolation: bicubic}, {type: RandomFlip, prob: 0.5, direction: horizontal}, "
             "{type: RandAugment, policies: timm_increasing, num_policies: 2, total_level: 10, "
             "magnitude_level: 9, magnitude_std: 0.5, hparams: {pad_val: [104, 116, 124], "
             "interpolation: bicubic}}, {type: RandomErasing, erase_prob: 0.25, mode: rand, "
             "min_area_ratio: 0.02, max_area_ratio: 0.3333333333333333, fill_color: [103.53, "
             "116.28, 123.675], fill_std: [57.375, 57.12, 58.395]}, {type: PackInputs}]"),
      ::testing::IsEmpty());
  EXPECT_THAT(errors("[{type: LoadImageFromFile}, {type: ColorJitter}, {type: PackInputs}]"),
              ::testing::ElementsAre(HasSubstr("unknown transform type 'ColorJitter'")));
  EXPECT_THAT(errors("[{type: LoadImageFromFile}, {type: CenterCrop, crop_size: 4, auto_pad: "
                     "true}, {type: PackInputs}]"),
              ::testing::ElementsAre(HasSubstr("auto_pad: unknown key")));
  EXPECT_THAT(errors("[{type: LoadImageFromFile, to_float32: true}, {type: PackInputs}]"),
              ::testing::ElementsAre(HasSubstr("to_float32: true is not implemented")));
  EXPECT_THAT(errors("[{type: LoadImageFromFile, color_type: grayscale}, {type: PackInputs}]"),
              ::testing::ElementsAre(HasSubstr("color_type")));
  EXPECT_THAT(errors("[{type: CenterCrop, crop_size: 4}, {type: PackInputs}]"),
              ::testing::ElementsAre(HasSubstr("a pipeline starts with LoadImageFromFile")));
  EXPECT_THAT(errors("[{type: LoadImageFromFile}, {type: CenterCrop, crop_size: 4}]"),
              ::testing::ElementsAre(HasSubstr("ends with PackInputs")));
  EXPECT_THAT(errors("[{type: LoadImageFromFile}, {type: RandomResizedCrop, scale: [1, 2, 3]}, "
                     "{type: PackInputs}]"),
              ::testing::ElementsAre(HasSubstr("a list of 2")));
}

}  // namespace
}  // namespace rh::data::image
