// ImageDecode.hpp: JPEGs against Pillow's decode of the same file (the same
// libjpeg-turbo, the same accurate DCT and smooth upsampling: byte for
// byte), CMYK against Pillow's convert("RGB"), PNGs against numpy's view of
// what was written (16-bit: the high byte, as OpenCV keeps it), and the
// broken files each an ImageError naming the file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>

#include "data/image/ImageDecode.hpp"
#include "data/image/Resize.hpp"
#include "data/image/SampleRng.hpp"
#include "host/data/image/ImageTestUtil.hpp"

namespace rh::data::image {
namespace {

using test::diff;
using test::python;
using test::raw_image;
using test::swap_rb;
using ::testing::HasSubstr;

// A 45 x 67 picture with edges and noise (JPEG's blocks and chroma
// subsampling both matter), and a PNG writer for what Pillow cannot write
// (16-bit colour).
const char* kPicture = R"(
rng = np.random.default_rng(5)
y, x = np.mgrid[0:45, 0:67]
rgb = np.stack([x * 3.5, y * 5, (x ^ y) * 2], -1) + rng.integers(-30, 30, (45, 67, 3))
rgb = np.clip(rgb, 0, 255).astype(np.uint8)
def decoded(path, name):
    open(name, 'wb').write(np.asarray(Image.open(path).convert('RGB')).tobytes())
def png(path, width, height, bit_depth, color_type, rows):
    def chunk(kind, data):
        return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
    raw = b''.join(b'\x00' + r for r in rows)
    head = struct.pack('>IIBBBBB', width, height, bit_depth, color_type, 0, 0, 0)
    open(path, 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', head) +
                           chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
)";

TEST(ImageDecodeTest, JpegsArePillowsPixels) {
  rh::test::TempDir dir;
  python(dir, std::string(kPicture) + R"(
pil = Image.fromarray(rgb)
pil.save('420.jpg', quality=90)
pil.save('444.jpg', quality=95, subsampling=0)
pil.save('progressive.jpg', quality=85, progressive=True)
pil.convert('L').save('gray.jpg', quality=90)
pil.convert('CMYK').save('cmyk.jpg', quality=95)
for name in ['420', '444', 'progressive', 'gray', 'cmyk']:
    decoded(name + '.jpg', name + '.raw')
)");
  for (const char* name : {"420", "444", "progressive", "gray", "cmyk"}) {
    const Image got = decode_image_file((dir.path() / (std::string(name) + ".jpg")).string());
    ASSERT_EQ(got.height, 45) << name;
    ASSERT_EQ(got.width, 67) << name;
    ASSERT_EQ(got.channels, 3) << name;
    const auto d = diff(swap_rb(got), raw_image(dir, std::string(name) + ".raw", 45, 67));
    EXPECT_EQ(d.count, 0u) << name << ": largest difference " << d.largest;
  }
}

// The region decode (libjpeg's skip and crop) against the full decode
// cropped: every chroma layout, progressive, grayscale, restart markers;
// boxes at the corners, the edges and anywhere, 1 pixel to the whole image.
TEST(ImageDecodeTest, ARegionIsTheFullDecodesPixels) {
  rh::test::TempDir dir;
  python(dir, R"(
rng = np.random.default_rng(9)
y, x = np.mgrid[0:173, 0:251]
rgb = np.stack([x * 1.1, y * 1.4, (x ^ y) % 256], -1) + rng.integers(-50, 50, (173, 251, 3))
pil = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))
pil.save('420.jpg', quality=90)
pil.save('422.jpg', quality=90, subsampling=1)
pil.save('444.jpg', quality=90, subsampling=0)
pil.save('progressive.jpg', quality=90, progressive=True)
pil.convert('L').save('gray.jpg', quality=90)
)");
  SampleRng rng(1, 0, 0);
  for (const char* name : {"420", "422", "444", "progressive", "gray"}) {
    const std::string bytes = rh::test::read_file(dir.path() / (std::string(name) + ".jpg"));
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    int h = 0, w = 0;
    ASSERT_TRUE(jpeg_region_size(data, bytes.size(), h, w)) << name;
    ASSERT_EQ(h, 173);
    ASSERT_EQ(w, 251);
    const Image full = decode_image(data, bytes.size(), name);
    std::vector<std::array<int, 4>> boxes = {
        {0, 0, 173, 251}, {0, 0, 1, 1}, {172, 250, 1, 1}, {0, 235, 17, 16}, {150, 0, 23, 40}};
    for (int i = 0; i < 60; ++i) {
      const int bh = static_cast<int>(rng.randint(1, h)), bw = static_cast<int>(rng.randint(1, w));
      boxes.push_back({static_cast<int>(rng.randint(0, h - bh)),
                       static_cast<int>(rng.randint(0, w - bw)), bh, bw});
    }
    for (const auto& [top, left, bh, bw] : boxes) {
      const Image region = decode_jpeg_region(data, bytes.size(), name, top, left, bh, bw);
      const Image expected = crop(full, top, left, bh, bw);
      ASSERT_EQ(region.pixels, expected.pixels)
          << name << ": rows " << top << "+" << bh << ", columns " << left << "+" << bw;
    }
  }
}

TEST(ImageDecodeTest, PngsOfEveryKindBecomeEightBitBgr) {
  rh::test::TempDir dir;
  python(dir, std::string(kPicture) + R"(
Image.fromarray(rgb).save('rgb.png')
Image.fromarray(np.dstack([rgb, rng.integers(0, 255, (45, 67, 1), dtype=np.uint8)])).save('rgba.png')
Image.fromarray(rgb).quantize(37).save('palette.png')
decoded('palette.png', 'palette.raw')
Image.fromarray(rgb[:, :, 0]).save('gray.png')
wide = (rgb.astype(np.uint16) * 256 + rng.integers(0, 256, rgb.shape)).astype('>u2')
png('rgb16.png', 67, 45, 16, 2, [r.tobytes() for r in wide])
gray16 = wide[:, :, 1]
png('gray16.png', 67, 45, 16, 0, [r.tobytes() for r in gray16])
open('rgb.raw', 'wb').write(rgb.tobytes())
open('gray.raw', 'wb').write(np.repeat(rgb[:, :, :1], 3, -1).tobytes())
open('gray16.raw', 'wb').write(np.repeat(rgb[:, :, 1:2], 3, -1).tobytes())
)");
  for (auto [file, raw] : {std::pair{"rgb.png", "rgb.raw"},
                           {"rgba.png", "rgb.raw"},  // alpha dropped, not composited
                           {"palette.png", "palette.raw"},
                           {"gray.png", "gray.raw"},
                           {"rgb16.png", "rgb.raw"},  // the high byte of v * 256 + noise < 256
                           {"gray16.png", "gray16.raw"}}) {
    const Image got = decode_image_file((dir.path() / file).string());
    const auto d = diff(swap_rb(got), raw_image(dir, raw, 45, 67));
    EXPECT_EQ(d.count, 0u) << file << ": largest difference " << d.largest;
  }
}

TEST(ImageDecodeTest, ABrokenFileIsAnErrorNamingIt) {
  rh::test::TempDir dir;
  python(dir, std::string(kPicture) + R"(
Image.fromarray(rgb).save('whole.jpg', quality=90)
data = open('whole.jpg', 'rb').read()
open('truncated.jpg', 'wb').write(data[:len(data) * 2 // 3])
bad = bytearray(data); bad[len(bad) // 2 : len(bad) // 2 + 64] = b'\xff' * 64
open('corrupt.jpg', 'wb').write(bytes(bad))
Image.fromarray(rgb).save('whole.png')
data = open('whole.png', 'rb').read()
open('truncated.png', 'wb').write(data[:len(data) // 2])
bad = bytearray(data); bad[60] ^= 0xFF
open('crc.png', 'wb').write(bytes(bad))
Image.fromarray(rgb).save('picture.bmp')
open('text.jpg', 'w').write('not an image')
open('empty.png', 'w').write('')
)");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated.jpg", "corrupt or truncated JPEG"},
      {"corrupt.jpg", "corrupt or truncated JPEG"},
      {"truncated.png", "truncated"},
      {"crc.png", "corrupt or truncated PNG"},
      {"picture.bmp", "not a JPEG or PNG file"},
      {"text.jpg", "not a JPEG or PNG file"},
      {"empty.png", "an empty file"},
      {"missing.jpg", "cannot open"},
  };
  for (const auto& [file, why] : cases) {
    const std::string path = (dir.path() / file).string();
    try {
      decode_image_file(path);
      ADD_FAILURE() << file << " decoded";
    } catch (const ImageError& e) {
      EXPECT_THAT(e.what(), HasSubstr(path + ": ")) << file;
      EXPECT_THAT(e.what(), HasSubstr(why)) << file;
    }
  }
}

}  // namespace
}  // namespace rh::data::image
