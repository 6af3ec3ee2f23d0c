// Resize.hpp against Pillow 9 (Image.resize), which it transcribes: every
// filter, shrinking and enlarging, one axis and both, byte for byte (the
// same integer arithmetic; the weights are doubles rounded to 2^-22, the
// same in both).
#include <gtest/gtest.h>

#include "data/image/Resize.hpp"
#include "host/data/image/ImageTestUtil.hpp"

namespace rh::data::image {
namespace {

using test::diff;
using test::python;
using test::raw_image;

TEST(ResizeTest, EveryFilterGivesPillowsPixels) {
  rh::test::TempDir dir;
  // 61 x 97: noise over gradients, so every weight matters.
  python(dir, R"(
rng = np.random.default_rng(3)
y, x = np.mgrid[0:61, 0:97]
img = np.stack([x * 2.5, y * 4, (x + y) * 1.5], -1) + rng.integers(-40, 40, (61, 97, 3))
img = np.clip(img, 0, 255).astype(np.uint8)
open('in.raw', 'wb').write(img.tobytes())
pil = Image.fromarray(img)
filters = {'nearest': Image.NEAREST, 'bilinear': Image.BILINEAR, 'bicubic': Image.BICUBIC,
           'area': Image.BOX, 'lanczos': Image.LANCZOS}
for name, f in filters.items():
    for w, h in [(40, 30), (200, 150), (41, 61), (97, 23), (13, 7)]:
        open(f'{name}_{w}x{h}.raw', 'wb').write(np.asarray(pil.resize((w, h), f)).tobytes())
)");
  const Image in = raw_image(dir, "in.raw", 61, 97);
  for (const char* name : {"nearest", "bilinear", "bicubic", "area", "lanczos"}) {
    for (auto [w, h] : {std::pair{40, 30}, {200, 150}, {41, 61}, {97, 23}, {13, 7}}) {
      const std::string file =
          std::string(name) + "_" + std::to_string(w) + "x" + std::to_string(h) + ".raw";
      const Image expected = raw_image(dir, file, h, w);
      const Image got = resize(in, w, h, interpolation_from_name(name));
      ASSERT_EQ(got.width, w);
      ASSERT_EQ(got.height, h);
      const auto d = diff(got, expected);
      EXPECT_EQ(d.count, 0u) << file << ": largest difference " << d.largest;
    }
  }
}

TEST(ResizeTest, CropAndFlipMoveThePixelsTheySay) {
  Image img(3, 4, 3);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<uint8_t>(i);
  const Image c = crop(img, 1, 2, 2, 2);
  EXPECT_EQ(c.at(0, 0)[0], img.at(1, 2)[0]);
  EXPECT_EQ(c.at(1, 1)[2], img.at(2, 3)[2]);
  Image h = img;
  flip(h, true, false);
  EXPECT_EQ(h.at(0, 0)[1], img.at(0, 3)[1]);
  Image v = img;
  flip(v, false, true);
  EXPECT_EQ(v.at(0, 1)[0], img.at(2, 1)[0]);
  Image both = img;
  flip(both, true, true);
  EXPECT_EQ(both.at(0, 0)[0], img.at(2, 3)[0]);
  EXPECT_THROW(crop(img, 2, 0, 2, 1), std::invalid_argument);
  EXPECT_THROW(interpolation_from_name("cubic"), std::invalid_argument);
}

}  // namespace
}  // namespace rh::data::image
