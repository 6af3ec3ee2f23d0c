// Photometric.hpp and Geometric.hpp: mmcv's image ops, compared with Pillow
// (Debian's python3-pil, the library mmcv's ops are written to match and timm
// calls) where the two compute the same thing, with a tolerance derived from
// where mmcv's arithmetic parts from Pillow's, and with values worked out by
// hand where they part (cv2's borders, rounding, fixed-point warps).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/TestUtil.hpp"
#include "data/image/Geometric.hpp"
#include "data/image/Photometric.hpp"
#include "host/data/image/ImageTestUtil.hpp"

namespace rh::data::image {
namespace {

using test::diff;
using test::python;
using test::raw_image;

// Whether a test that needs Pillow fails or skips when /usr/bin/python3
// cannot import it: tools/install-deps.sh --missing-is-failure decides (a
// failure under CI or when dpkg says python3-pil is installed).
struct MissingPillow {
  std::string reason;
  bool fails = false;
};

std::optional<MissingPillow> missing_pillow() {
  if (rh::test::run_command("/usr/bin/python3 -c 'import PIL, numpy'").exit_code == 0) {
    return std::nullopt;
  }
  const std::filesystem::path install_deps =
      std::filesystem::path(__FILE__).parent_path() / "../../../../tools/install-deps.sh";
  const auto verdict = rh::test::run_command(rh::test::quote(install_deps.string()) +
                                             " --missing-is-failure python3-pil");
  return MissingPillow{"/usr/bin/python3 cannot import Pillow and numpy: " + verdict.output,
                       verdict.exit_code == 0};
}

#define RH_REQUIRE_PILLOW()                                  \
  do {                                                       \
    if (const auto rh_missing_ = missing_pillow()) {         \
      if (rh_missing_->fails) FAIL() << rh_missing_->reason; \
      GTEST_SKIP() << rh_missing_->reason;                   \
    }                                                        \
  } while (0)

constexpr int kH = 50, kW = 70;

// Writes in.raw (kH x kW, BGR: gradients plus noise, every channel's range
// short of 0..255 so auto_contrast has work) and defines, for `script`,
// `pil` (the image as Pillow's RGB) and save(img, name) (name.raw, BGR).
void python_on_test_image(const rh::test::TempDir& dir, const std::string& script) {
  python(dir, "H, W = " + std::to_string(kH) + ", " + std::to_string(kW) + R"(
rng = np.random.default_rng(5)
y, x = np.mgrid[0:H, 0:W]
bgr = np.stack([40 + x * 1.5, 30 + y * 2.5, 60 + (x + y)], -1) + rng.integers(-20, 20, (H, W, 3))
bgr = np.clip(bgr, 0, 255).astype(np.uint8)
open('in.raw', 'wb').write(bgr.tobytes())
pil = Image.fromarray(np.ascontiguousarray(bgr[..., ::-1]))
def save(img, name):
    open(name + '.raw', 'wb').write(np.ascontiguousarray(np.asarray(img)[..., ::-1]).tobytes())
)" + script);
}

Image expected(const rh::test::TempDir& dir, const std::string& name, int h = kH, int w = kW) {
  return raw_image(dir, name + ".raw", h, w);
}

Image filled(int h, int w, uint8_t b, uint8_t g, uint8_t r) {
  Image img(h, w, 3);
  for (size_t i = 0; i < img.pixels.size(); i += 3) {
    img.pixels[i] = b;
    img.pixels[i + 1] = g;
    img.pixels[i + 2] = r;
  }
  return img;
}

// Distinct values everywhere: b = 3 (x + 7 y) + 1, g = b + 1, r = b + 2, mod 256.
Image numbered(int h, int w) {
  Image img(h, w, 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c) img.at(y, x)[c] = static_cast<uint8_t>(3 * (x + 7 * y) + c + 1);
    }
  }
  return img;
}

// ---- photometric ----------------------------------------------------------

// The integer ops compute what Pillow computes (the same lookup tables:
// ImageOps.autocontrast's and equalize's formulas are mmcv's), so byte for byte.
TEST(ImageOpsTest, LookupTableOpsGivePillowsPixels) {
  RH_REQUIRE_PILLOW();
  rh::test::TempDir dir;
  python_on_test_image(dir, R"(
save(ImageOps.autocontrast(pil), 'autocontrast')
save(ImageOps.equalize(pil), 'equalize')
save(ImageOps.invert(pil), 'invert')
for bits in range(1, 9):
    save(ImageOps.posterize(pil, bits), f'posterize{bits}')
for thr in (0, 64, 128, 200, 256):
    save(ImageOps.solarize(pil, thr), f'solarize{thr}')
)");
  const Image in = raw_image(dir, "in.raw", kH, kW);
  const auto check = [&](const std::string& name, void (*op)(Image&)) {
    Image img = in;
    op(img);
    const auto d = diff(img, expected(dir, name));
    EXPECT_EQ(d.count, 0u) << name << ": largest difference " << d.largest;
  };
  check("autocontrast", auto_contrast);
  check("equalize", equalize);
  check("invert", invert);
  for (int bits = 1; bits <= 8; ++bits) {
    Image img = in;
    posterize(img, bits);
    EXPECT_EQ(diff(img, expected(dir, "posterize" + std::to_string(bits))).count, 0u) << bits;
  }
  for (int thr : {0, 64, 128, 200, 256}) {
    Image img = in;
    solarize(img, thr);
    EXPECT_EQ(diff(img, expected(dir, "solarize" + std::to_string(thr))).count, 0u) << thr;
  }
}

// The blends, factor by factor, against ImageEnhance. Where mmcv and Pillow
// part (the tolerances):
//   Brightness: x * f truncated in both, but in float32 (Pillow) against a
//     double sum stored as float32 (cv2): a product that is an integer
//     exactly can fall just under it in one only: 1 level.
//   Color: cv2 rounds the blend where Pillow truncates (+1), and grays with
//     14-bit weights against Pillow's 16-bit ones (gray off by 1, weighted by
//     |1 - f| <= 0.9): 2 levels.
//   Contrast: the mean gray is rounded half to even (mmcv) or up (Pillow) and
//     comes from either gray (1 level, weighted by |1 - f|), plus the float
//     orders of the truncated blend (1): 2 levels.
//   Sharpness: the 3x3 smoothing is the same (a sum of k / 13 is never near
//     .5, so both roundings agree); the blend's float orders differ (1 level).
//     Pillow leaves the outermost pixels unsmoothed while cv2 mirrors the
//     image there, so only the inside is compared (the border: below).
TEST(ImageOpsTest, BlendsStayWithinTheirToleranceOfImageEnhance) {
  RH_REQUIRE_PILLOW();
  rh::test::TempDir dir;
  python_on_test_image(dir, R"(
for i, f in enumerate((0.0, 0.1, 0.55, 1.0, 1.37, 1.9)):
    save(ImageEnhance.Brightness(pil).enhance(f), f'brightness{i}')
    save(ImageEnhance.Color(pil).enhance(f), f'color{i}')
    save(ImageEnhance.Contrast(pil).enhance(f), f'contrast{i}')
    save(ImageEnhance.Sharpness(pil).enhance(f), f'sharpness{i}')
)");
  const Image in = raw_image(dir, "in.raw", kH, kW);
  const double factors[] = {0.0, 0.1, 0.55, 1.0, 1.37, 1.9};
  for (int i = 0; i < 6; ++i) {
    const double f = factors[i];
    const std::string n = std::to_string(i);
    Image b = in, c = in, k = in, s = in;
    adjust_brightness(b, f);
    adjust_color(c, f);
    adjust_contrast(k, f);
    adjust_sharpness(s, f);
    EXPECT_LE(diff(b, expected(dir, "brightness" + n)).largest, 1) << "brightness " << f;
    EXPECT_LE(diff(c, expected(dir, "color" + n)).largest, 2) << "color " << f;
    EXPECT_LE(diff(k, expected(dir, "contrast" + n)).largest, 2) << "contrast " << f;
    const Image pil_sharp = expected(dir, "sharpness" + n);
    int largest = 0;
    for (int y = 1; y < kH - 1; ++y) {
      for (int x = 1; x < kW - 1; ++x) {
        for (int ch = 0; ch < 3; ++ch) {
          largest = std::max(largest, std::abs(s.at(y, x)[ch] - pil_sharp.at(y, x)[ch]));
        }
      }
    }
    EXPECT_LE(largest, 1) << "sharpness " << f;
  }
  // Factor 1 is the image itself in every blend.
  Image same = in;
  adjust_color(same, 1.0);
  adjust_contrast(same, 1.0);
  adjust_brightness(same, 1.0);
  adjust_sharpness(same, 1.0);
  EXPECT_EQ(diff(same, in).count, 0u);
}

TEST(ImageOpsTest, GrayIsOpenCvsFixedPointLuma) {
  // (x * 4899 (R) + 9617 (G) + 1868 (B) + 8192) >> 14.
  EXPECT_EQ(bgr_to_gray(0, 0, 255), 76);   // 1257437 >> 14
  EXPECT_EQ(bgr_to_gray(0, 255, 0), 150);  // 2460527 >> 14
  EXPECT_EQ(bgr_to_gray(255, 0, 0), 29);   // 484532 >> 14
  EXPECT_EQ(bgr_to_gray(255, 255, 255), 255);
  EXPECT_EQ(bgr_to_gray(10, 20, 30), 22);  // 375294 >> 14 = 22.9
  // Factor 0 leaves the gray in every channel.
  Image img = filled(2, 2, 10, 20, 30);
  adjust_color(img, 0.0);
  EXPECT_EQ(diff(img, filled(2, 2, 22, 22, 22)).count, 0u);
}

TEST(ImageOpsTest, EqualizeAndAutoContrastByHand) {
  // 600 pixels: 200 of 10, 200 of 20, 200 of 30 in channel B (G, R constant).
  // step = (600 - 200) // 255 = 1; lut[v] = pixels below v: 10 -> 0,
  // 20 -> 200, 30 -> 400, clipped to 255. A constant channel stays.
  Image img(1, 600, 3);
  for (int x = 0; x < 600; ++x) {
    img.at(0, x)[0] = static_cast<uint8_t>(10 + 10 * (x / 200));
    img.at(0, x)[1] = 77;
    img.at(0, x)[2] = static_cast<uint8_t>(x < 300 ? 5 : 6);  // step (600 - 300) // 255 = 1
  }
  Image eq = img;
  equalize(eq);
  EXPECT_EQ(eq.at(0, 0)[0], 0);
  EXPECT_EQ(eq.at(0, 200)[0], 200);
  EXPECT_EQ(eq.at(0, 400)[0], 255);
  EXPECT_EQ(eq.at(0, 0)[1], 77);
  EXPECT_EQ(eq.at(0, 0)[2], 0);
  EXPECT_EQ(eq.at(0, 599)[2], 255);  // lut[6] = 300 -> 255
  // Fewer than 255 pixels below the top value: step 0, unchanged.
  Image small = numbered(3, 4);
  Image small_eq = small;
  equalize(small_eq);
  EXPECT_EQ(diff(small_eq, small).count, 0u);

  // auto_contrast: B spans 0..51 (scale 5), G is constant (kept), R spans 100..100+51.
  Image ac(1, 3, 3);
  const uint8_t values[3][3] = {{0, 9, 100}, {10, 9, 110}, {51, 9, 151}};
  for (int x = 0; x < 3; ++x) {
    for (int c = 0; c < 3; ++c) ac.at(0, x)[c] = values[x][c];
  }
  auto_contrast(ac);
  EXPECT_EQ(ac.at(0, 0)[0], 0);
  EXPECT_EQ(ac.at(0, 1)[0], 50);
  EXPECT_EQ(ac.at(0, 2)[0], 255);
  EXPECT_EQ(ac.at(0, 1)[1], 9);
  EXPECT_EQ(ac.at(0, 0)[2], 0);
  EXPECT_EQ(ac.at(0, 1)[2], 50);
  EXPECT_EQ(ac.at(0, 2)[2], 255);
  // 0..25: scale 255 / 25 = 10.2 in double, and 25 * 10.2 = 254.99999999999997
  // truncates to 254, in mmcv (numpy) and Pillow alike.
  Image top(1, 2, 1);
  top.pixels = {0, 25};
  auto_contrast(top);
  EXPECT_EQ(top.pixels, (std::vector<uint8_t>{0, 254}));
}

TEST(ImageOpsTest, PosterizeSolarizeAddContrastAndBrightnessByHand) {
  // SolarizeAdd: below 128, x + amount truncated and capped at 255.
  Image img(1, 5, 1);
  img.pixels = {0, 100, 127, 128, 250};
  Image sa = img;
  solarize_add(sa, 54.7);
  EXPECT_EQ(sa.pixels, (std::vector<uint8_t>{54, 154, 181, 128, 250}));
  sa = img;
  solarize_add(sa, 200);
  EXPECT_EQ(sa.pixels, (std::vector<uint8_t>{200, 255, 255, 128, 250}));
  // Posterize 0 bits is black (numpy: x >> 8 == 0), 8 and more the image.
  Image p = img;
  posterize(p, 0);
  EXPECT_EQ(p.pixels, (std::vector<uint8_t>{0, 0, 0, 0, 0}));
  p = img;
  posterize(p, 8);
  EXPECT_EQ(p.pixels, img.pixels);
  p = img;
  posterize(p, 1);
  EXPECT_EQ(p.pixels, (std::vector<uint8_t>{0, 0, 0, 128, 128}));
  // Solarize: a float threshold, x < thr kept.
  Image so = img;
  solarize(so, 127.5);
  EXPECT_EQ(so.pixels, (std::vector<uint8_t>{0, 100, 127, 127, 5}));

  // Contrast: grays 10 and 11, mean 10.5 rounds half to even: 10 (Pillow: 11).
  Image k(1, 2, 3);
  k.pixels = {10, 10, 10, 11, 11, 11};
  adjust_contrast(k, 0.0);
  EXPECT_EQ(k.pixels, (std::vector<uint8_t>{10, 10, 10, 10, 10, 10}));
  // Brightness truncates: 101 * 1.5 = 151.5 -> 151; 200 * 1.5 saturates.
  Image br(1, 2, 1);
  br.pixels = {101, 200};
  adjust_brightness(br, 1.5);
  EXPECT_EQ(br.pixels, (std::vector<uint8_t>{151, 255}));
}

// cv2.filter2D's border mirrors without repeating the edge (REFLECT_101): in
// a 3x3 image of zeros around a centre of 130, a corner's window holds the
// centre 4 times (130 * 4 / 13 = 40), an edge's twice (20), the centre once
// with weight 5 (50). Factor 0 is the smoothed image itself; factor 2 is
// 2 x - smooth, clipped.
TEST(ImageOpsTest, SharpnessSmoothsTheBorderAsCv2Does) {
  Image img(3, 3, 1);
  img.pixels = {0, 0, 0, 0, 130, 0, 0, 0, 0};
  Image smooth = img;
  adjust_sharpness(smooth, 0.0);
  EXPECT_EQ(smooth.pixels, (std::vector<uint8_t>{40, 20, 40, 20, 50, 20, 40, 20, 40}));
  Image sharp = img;
  adjust_sharpness(sharp, 2.0);
  EXPECT_EQ(sharp.pixels, (std::vector<uint8_t>{0, 0, 0, 0, 210, 0, 0, 0, 0}));
}

TEST(ImageOpsTest, ColourOpsNeedThreeChannels) {
  Image gray(2, 2, 1);
  EXPECT_THROW(adjust_color(gray, 0.5), std::invalid_argument);
  EXPECT_THROW(adjust_contrast(gray, 0.5), std::invalid_argument);
}

// ---- geometric ------------------------------------------------------------

const PadValue kPad = {1, 2, 3};
const Interpolation kAllInterpolations[] = {Interpolation::Nearest, Interpolation::Bilinear,
                                            Interpolation::Bicubic};

TEST(ImageOpsTest, ZeroMagnitudesAreTheIdentity) {
  const Image in = numbered(9, 13);
  for (Interpolation how : kAllInterpolations) {
    Image img = in;
    shear(img, 0.0, Direction::Horizontal, how, kPad);
    shear(img, 0.0, Direction::Vertical, how, kPad);
    translate(img, 0.0, Direction::Horizontal, how, kPad);
    translate(img, 0.0, Direction::Vertical, how, kPad);
    rotate(img, 0.0, how, kPad);
    rotate(img, -0.0, how, kPad);
    EXPECT_EQ(diff(img, in).count, 0u) << static_cast<int>(how);
  }
}

// A quarter turn lands every pixel centre on a pixel centre, so every
// interpolation copies: clockwise (mmcv's positive angle), the pixel at
// column x, row y comes from column y, row n - 1 - x (n x n image). In a
// 5 x 3 image the centre is (2, 1): dst(x, y) = src(col y + 1, row 3 - x),
// and columns 0 and 4 come from outside (the pad, channel by channel).
TEST(ImageOpsTest, QuarterTurnsMovePixelsExactly) {
  const Image square = numbered(7, 7);
  const Image wide = numbered(3, 5);
  for (Interpolation how : kAllInterpolations) {
    Image img = square;
    rotate(img, 90, how, kPad);
    for (int y = 0; y < 7; ++y) {
      for (int x = 0; x < 7; ++x) {
        for (int c = 0; c < 3; ++c) {
          ASSERT_EQ(img.at(y, x)[c], square.at(6 - x, y)[c]) << x << "," << y;
        }
      }
    }
    img = wide;
    rotate(img, 90, how, kPad);
    for (int y = 0; y < 3; ++y) {
      for (int x = 0; x < 5; ++x) {
        for (int c = 0; c < 3; ++c) {
          const int expect = (x == 0 || x == 4) ? kPad[c] : wide.at(3 - x, y + 1)[c];
          ASSERT_EQ(img.at(y, x)[c], expect) << x << "," << y << " how " << static_cast<int>(how);
        }
      }
    }
    img = square;
    rotate(img, -90, how, kPad);
    rotate(img, 90, how, kPad);
    EXPECT_EQ(diff(img, square).count, 0u);
  }
}

// Whole-pixel moves copy in every interpolation (cv2's weight tables put all
// of 1 << 15 on the pixel itself at fraction 0); the vacated side is the pad.
TEST(ImageOpsTest, WholePixelTranslationsCopyAndPad) {
  const Image in = numbered(6, 9);
  for (Interpolation how : kAllInterpolations) {
    Image right = in;
    translate(right, 3, Direction::Horizontal, how, kPad);
    Image up = in;
    translate(up, -2, Direction::Vertical, how, kPad);
    for (int y = 0; y < 6; ++y) {
      for (int x = 0; x < 9; ++x) {
        for (int c = 0; c < 3; ++c) {
          ASSERT_EQ(right.at(y, x)[c], x >= 3 ? in.at(y, x - 3)[c] : kPad[c]);
          ASSERT_EQ(up.at(y, x)[c], y < 4 ? in.at(y + 2, x)[c] : kPad[c]);
        }
      }
    }
  }
}

// Half a pixel to the right: each output sits halfway between source columns
// x - 1 and x. Bilinear weighs them 1/2 each: (a + b + 1) >> 1. Bicubic
// (a = -0.75) weighs x - 2 .. x + 1 by -3/32, 19/32, 19/32, -3/32 (in 15
// bits: -3072, 19456, 19456, -3072), rounded and clamped.
TEST(ImageOpsTest, HalfPixelTranslationsUseCv2sWeights) {
  Image in(2, 8, 1);
  const uint8_t row[8] = {0, 255, 10, 200, 200, 30, 90, 255};
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 8; ++x) in.at(y, x)[0] = row[x];
  }
  const int pad = 7;
  const auto src = [&](int x) { return x < 0 || x >= 8 ? pad : row[x]; };
  Image bilinear = in;
  translate(bilinear, 0.5, Direction::Horizontal, Interpolation::Bilinear, {7, 7, 7});
  Image bicubic = in;
  translate(bicubic, 0.5, Direction::Horizontal, Interpolation::Bicubic, {7, 7, 7});
  for (int x = 0; x < 8; ++x) {
    EXPECT_EQ(bilinear.at(1, x)[0], (src(x - 1) + src(x) + 1) >> 1) << x;
    const int sum = -3072 * src(x - 2) + 19456 * src(x - 1) + 19456 * src(x) - 3072 * src(x + 1);
    const int value = std::clamp(static_cast<int>(std::floor((sum + 16384) / 32768.0)), 0, 255);
    EXPECT_EQ(bicubic.at(1, x)[0], value) << x;
  }
}

// Horizontal shear moves row y right by magnitude * y (x' = x + m y), rounded
// to the nearest pixel with nearest interpolation.
TEST(ImageOpsTest, ShearMovesRowsByTheirHeight) {
  const Image in = numbered(5, 10);
  Image img = in;
  shear(img, 0.5, Direction::Horizontal, Interpolation::Nearest, kPad);
  // Row 4 moves 2 pixels: dst x reads src x - 2.
  for (int x = 0; x < 10; ++x) {
    EXPECT_EQ(img.at(4, x)[0], x >= 2 ? in.at(4, x - 2)[0] : kPad[0]) << x;
    EXPECT_EQ(img.at(0, x)[0], in.at(0, x)[0]) << x;
  }
  Image v = in;
  shear(v, 1.0, Direction::Vertical, Interpolation::Nearest, kPad);
  // Column 3 moves down 3 pixels.
  for (int y = 0; y < 5; ++y) {
    EXPECT_EQ(v.at(y, 3)[1], y >= 3 ? in.at(y - 3, 3)[1] : kPad[1]) << y;
  }
}

// Nearest warps against Pillow's Image.transform/rotate with NEAREST, whose
// pixel centres sit at +0.5: the same map once the matrix is shifted by half
// a pixel, and the same rounding (to the closer source pixel). cv2 keeps the
// source coordinates in 1/1024 pixel, so a pixel whose exact source
// coordinate lies within 1/1024 of a .5 can round the other way. A rotation
// spreads the coordinates' fractions evenly, so about 2 x 2/1024 of its
// pixels can differ: bounded by 1%. A shear or a translation gives a whole
// column (row) one fraction; magnitude 0.2471 (float32) and offset 2.3 keep
// every one at least 5/1024 from .5, so those match byte for byte.
TEST(ImageOpsTest, NearestWarpsGivePillowsPixels) {
  RH_REQUIRE_PILLOW();
  rh::test::TempDir dir;
  python_on_test_image(dir, R"(
fill = (3, 2, 1)  # Pillow's RGB of the BGR pad (1, 2, 3)
for angle in (30, -17.5, 45):
    save(pil.rotate(-angle, resample=Image.NEAREST, fillcolor=fill), f'rotate{angle}')
m = float(np.float32(0.2471))
save(pil.transform(pil.size, Image.AFFINE, (1, -m, 0.5 * m, 0, 1, 0), Image.NEAREST, fillcolor=fill), 'shearx')
save(pil.transform(pil.size, Image.AFFINE, (1, 0, 0, -m, 1, 0.5 * m), Image.NEAREST, fillcolor=fill), 'sheary')
t = float(np.float32(2.3))
save(pil.transform(pil.size, Image.AFFINE, (1, 0, -t, 0, 1, 0), Image.NEAREST, fillcolor=fill), 'translate')
)");
  const Image in = raw_image(dir, "in.raw", kH, kW);
  const size_t pixels = static_cast<size_t>(kH) * kW;
  for (double angle : {30.0, -17.5, 45.0}) {
    Image img = in;
    rotate(img, angle, Interpolation::Nearest, kPad);
    std::ostringstream name;
    name << "rotate" << angle;
    // diff() counts bytes: 3 per pixel.
    const auto d = diff(img, expected(dir, name.str()));
    EXPECT_LT(d.count / 3, pixels / 100) << name.str();
  }
  Image sx = in;
  shear(sx, 0.2471, Direction::Horizontal, Interpolation::Nearest, kPad);
  EXPECT_EQ(diff(sx, expected(dir, "shearx")).count, 0u);
  Image sy = in;
  shear(sy, 0.2471, Direction::Vertical, Interpolation::Nearest, kPad);
  EXPECT_EQ(diff(sy, expected(dir, "sheary")).count, 0u);
  Image t = in;
  translate(t, 2.3, Direction::Horizontal, Interpolation::Nearest, kPad);
  EXPECT_EQ(diff(t, expected(dir, "translate")).count, 0u);
}

TEST(ImageOpsTest, UnimplementedWarpsAreRefused) {
  Image img = numbered(3, 3);
  EXPECT_THROW(rotate(img, 10, Interpolation::Lanczos, kPad), std::invalid_argument);
  Image four(2, 2, 4);
  EXPECT_THROW(rotate(four, 10, Interpolation::Nearest, kPad), std::invalid_argument);
  // Area warps as bilinear (cv2.warpAffine's INTER_AREA).
  Image a = img, b = img;
  rotate(a, 10, Interpolation::Area, kPad);
  rotate(b, 10, Interpolation::Bilinear, kPad);
  EXPECT_EQ(diff(a, b).count, 0u);
}

}  // namespace
}  // namespace rh::data::image
