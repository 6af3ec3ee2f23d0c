// An 8-bit image as the pipeline's transforms pass it along.
//
// Rows top to bottom, pixels interleaved (HWC). Channels are in the order
// mmcv's LoadImageFromFile leaves them: BGR (a grayscale file is decoded to
// three equal channels). The data_preprocessor's `to_rgb` swaps them for the
// model, and every colour a transform takes (pad_val, fill_color) is BGR, as
// in MMPretrain's configs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rh::data::image {

struct Image {
  int height = 0;
  int width = 0;
  int channels = 3;
  std::vector<uint8_t> pixels;  // height * width * channels bytes

  Image() = default;
  Image(int h, int w, int c = 3)
      : height(h), width(w), channels(c), pixels(static_cast<size_t>(h) * w * c) {}

  bool empty() const { return pixels.empty(); }
  size_t row_bytes() const { return static_cast<size_t>(width) * channels; }
  uint8_t* row(int y) { return pixels.data() + static_cast<size_t>(y) * row_bytes(); }
  const uint8_t* row(int y) const { return pixels.data() + static_cast<size_t>(y) * row_bytes(); }
  uint8_t* at(int y, int x) { return row(y) + static_cast<size_t>(x) * channels; }
  const uint8_t* at(int y, int x) const { return row(y) + static_cast<size_t>(x) * channels; }
};

}  // namespace rh::data::image
