// Helpers of the image tests: a Python script run by Debian's python3 with
// Pillow and numpy (the references), and raw pixel files it writes.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/TestUtil.hpp"
#include "data/image/Image.hpp"

namespace rh::data::image::test {

// Runs `script` (after `import numpy as np` and Pillow's Image) in `dir`.
inline void python(const rh::test::TempDir& dir, const std::string& script) {
  const auto path = dir.write("make.py",
                              "import numpy as np, struct, zlib\n"
                              "from PIL import Image, ImageOps, ImageEnhance\n" +
                                  script);
  const auto r = rh::test::run_command("cd " + rh::test::quote(dir.path().string()) +
                                       " && /usr/bin/python3 " + rh::test::quote(path.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

// A raw file of height x width x 3 bytes as an Image.
inline Image raw_image(const rh::test::TempDir& dir, const std::string& name, int height,
                       int width) {
  const std::string bytes = rh::test::read_file(dir.path() / name);
  Image img(height, width, 3);
  EXPECT_EQ(bytes.size(), img.pixels.size()) << name;
  std::copy(bytes.begin(), bytes.begin() + std::min(bytes.size(), img.pixels.size()),
            img.pixels.begin());
  return img;
}

// The image with its channels reversed (Pillow's RGB <-> the pipeline's BGR).
inline Image swap_rb(Image img) {
  for (size_t i = 0; i + 2 < img.pixels.size(); i += 3) std::swap(img.pixels[i], img.pixels[i + 2]);
  return img;
}

// The number of bytes that differ, and the largest difference.
struct Diff {
  size_t count = 0;
  int largest = 0;
};
inline Diff diff(const Image& a, const Image& b) {
  Diff d;
  if (a.pixels.size() != b.pixels.size()) return {SIZE_MAX, 255};
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    const int v = std::abs(static_cast<int>(a.pixels[i]) - static_cast<int>(b.pixels[i]));
    d.count += v != 0;
    d.largest = std::max(d.largest, v);
  }
  return d;
}

}  // namespace rh::data::image::test
