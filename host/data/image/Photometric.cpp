#include "data/image/Photometric.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace rh::data::image {
namespace {

using Lut = std::array<uint8_t, 256>;
using Histogram = std::array<int64_t, 256>;

// One lookup table for every channel.
void apply_lut(Image& img, const Lut& lut) {
  for (uint8_t& v : img.pixels) v = lut[v];
}

// luts[c] for channel c.
void apply_luts(Image& img, const std::vector<Lut>& luts) {
  const size_t channels = static_cast<size_t>(img.channels);
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    img.pixels[i] = luts[i % channels][img.pixels[i]];
  }
}

Histogram channel_histogram(const Image& img, int channel) {
  Histogram hist{};
  for (size_t i = static_cast<size_t>(channel); i < img.pixels.size(); i += img.channels) {
    ++hist[img.pixels[i]];
  }
  return hist;
}

Lut identity_lut() {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<uint8_t>(i);
  return lut;
}

// numpy's float-to-uint8 after np.clip(x, 0, 255): truncation toward zero.
uint8_t clip_truncate(float x) {
  if (!(x > 0.0f)) return 0;  // also NaN
  if (x >= 255.0f) return 255;
  return static_cast<uint8_t>(x);
}

// cv2's saturate_cast<uchar>(float): round half to even, then clamp.
uint8_t round_saturate(float x) {
  const float r = std::nearbyint(x);
  if (!(r > 0.0f)) return 0;
  if (r >= 255.0f) return 255;
  return static_cast<uint8_t>(r);
}

// mmcv's float blends: cv2.addWeighted(img.astype(float32), factor,
// degenerate.astype(float32), 1 - factor, 0). For float32 images cv2 takes
// the weights as doubles and sums in double; the sum is stored as float32,
// then mmcv clips to 0..255 and astype(uint8) truncates.
uint8_t blend_truncate(uint8_t x, double factor, double degenerate_term) {
  return clip_truncate(static_cast<float>(x * factor + degenerate_term));
}

void require_bgr(const Image& img, const char* op) {
  if (img.channels != 3) {
    throw std::invalid_argument(std::string(op) + ": needs a 3-channel BGR image, got " +
                                std::to_string(img.channels) + " channels");
  }
}

// cv2's BORDER_REFLECT_101 for an index at most one step outside [0, len).
int reflect101(int p, int len) {
  if (len == 1) return 0;
  if (p < 0) return -p;
  if (p >= len) return 2 * len - 2 - p;
  return p;
}

}  // namespace

uint8_t bgr_to_gray(uint8_t b, uint8_t g, uint8_t r) {
  // OpenCV's RGB2Gray<uchar>: B2Y = 1868, G2Y = 9617, R2Y = 4899 (sum 1 << 14).
  return static_cast<uint8_t>((b * 1868 + g * 9617 + r * 4899 + (1 << 13)) >> 14);
}

void invert(Image& img) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<uint8_t>(255 - i);
  apply_lut(img, lut);
}

void solarize(Image& img, double threshold) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<uint8_t>(i < threshold ? i : 255 - i);
  apply_lut(img, lut);
}

void solarize_add(Image& img, double amount, double threshold) {
  Lut lut;
  for (int i = 0; i < 256; ++i) {
    // numpy: img + amount is float64, np.minimum(., 255), astype(uint8) truncates.
    lut[i] = i < threshold ? static_cast<uint8_t>(std::clamp(i + amount, 0.0, 255.0))
                           : static_cast<uint8_t>(i);
  }
  apply_lut(img, lut);
}

void posterize(Image& img, int bits) {
  if (bits >= 8) return;
  const int shift = 8 - std::max(bits, 0);
  Lut lut;
  for (int i = 0; i < 256; ++i) {
    lut[i] = shift >= 8 ? 0 : static_cast<uint8_t>((i >> shift) << shift);
  }
  apply_lut(img, lut);
}

void auto_contrast(Image& img) {
  std::vector<Lut> luts;
  for (int c = 0; c < img.channels; ++c) {
    const Histogram hist = channel_histogram(img, c);
    int low = 0, high = 255;
    while (low < 256 && hist[low] == 0) ++low;
    while (high >= 0 && hist[high] == 0) --high;
    if (low >= high) {
      luts.push_back(identity_lut());
      continue;
    }
    // numpy: lut = arange(256) * scale + offset in double, clipped, then the
    // float image is truncated by astype(uint8). Computed in the same order
    // here, because the order shows: for 4852 of the (low, high) pairs, e.g.
    // (0, 25), the top value comes to 254.99999999999997 and truncates to 254
    // (in Pillow's autocontrast too).
    const double scale = 255.0 / (high - low);
    const double offset = -static_cast<double>(low) * scale;
    Lut lut;
    for (int i = 0; i < 256; ++i) {
      const double product = i * scale;
      const double v = std::clamp(product + offset, 0.0, 255.0);
      lut[i] = static_cast<uint8_t>(v);
    }
    luts.push_back(lut);
  }
  apply_luts(img, luts);
}

void equalize(Image& img) {
  std::vector<Lut> luts;
  for (int c = 0; c < img.channels; ++c) {
    const Histogram hist = channel_histogram(img, c);
    int64_t total = 0, last = 0;
    for (int64_t count : hist) {
      total += count;
      if (count > 0) last = count;
    }
    // The step leaves out the count of the highest value present: the
    // values below it spread over 0..255 and it maps to 255, whatever its
    // count.
    const int64_t step = (total - last) / 255;
    if (step == 0) {
      luts.push_back(identity_lut());
      continue;
    }
    Lut lut;
    lut[0] = 0;
    int64_t cumulative = 0;
    for (int i = 1; i < 256; ++i) {
      cumulative += hist[i - 1];
      lut[i] = static_cast<uint8_t>(std::min<int64_t>((cumulative + step / 2) / step, 255));
    }
    luts.push_back(lut);
  }
  apply_luts(img, luts);
}

void adjust_color(Image& img, double factor) {
  require_bgr(img, "adjust_color");
  // cv2.addWeighted(img, alpha, gray, beta, 0) on uint8 images: the weights
  // become floats, cv2's SIMD loop sums fma(x, alpha, fma(gray, beta, 0)) in
  // float and rounds half to even. gray * beta is exact in double and x *
  // alpha too, so rounding each sum once to float gives the fused result.
  const float alpha = static_cast<float>(factor);
  const float beta = static_cast<float>(1.0 - factor);
  for (size_t i = 0; i < img.pixels.size(); i += 3) {
    uint8_t* p = &img.pixels[i];
    const uint8_t gray = bgr_to_gray(p[0], p[1], p[2]);
    const float gray_term = static_cast<float>(static_cast<double>(gray) * beta);
    for (int c = 0; c < 3; ++c) {
      const float sum = static_cast<float>(static_cast<double>(p[c]) * alpha + gray_term);
      p[c] = round_saturate(sum);
    }
  }
}

void adjust_contrast(Image& img, double factor) {
  require_bgr(img, "adjust_contrast");
  if (img.pixels.empty()) return;
  int64_t sum = 0;
  for (size_t i = 0; i < img.pixels.size(); i += 3) {
    sum += bgr_to_gray(img.pixels[i], img.pixels[i + 1], img.pixels[i + 2]);
  }
  const int64_t count = static_cast<int64_t>(img.pixels.size() / 3);
  // Python's round(): half to even (Pillow adds 0.5 and truncates instead).
  const double mean = std::nearbyint(static_cast<double>(sum) / static_cast<double>(count));
  const double degenerate_term = mean * (1.0 - factor);
  Lut lut;
  for (int i = 0; i < 256; ++i) {
    lut[i] = blend_truncate(static_cast<uint8_t>(i), factor, degenerate_term);
  }
  apply_lut(img, lut);
}

void adjust_brightness(Image& img, double factor) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[i] = blend_truncate(static_cast<uint8_t>(i), factor, 0.0);
  apply_lut(img, lut);
}

void adjust_sharpness(Image& img, double factor) {
  const int h = img.height, w = img.width, channels = img.channels;
  if (img.pixels.empty()) return;
  // cv2.filter2D(img, -1, kernel): the float64 kernel becomes float32, the
  // taps are summed in float in row-major order and rounded half to even.
  const float edge = static_cast<float>(1.0 / 13.0);
  const float centre = static_cast<float>(5.0 / 13.0);
  // One smoothed value from byte offsets into the three rows: the taps in
  // row-major order, as filter2D adds them.
  const auto smoothed = [&](const uint8_t* const rows[3], int left, int mid, int right) {
    float sum = 0.0f;
    for (int ky = 0; ky < 3; ++ky) {
      sum += edge * static_cast<float>(rows[ky][left]);
      sum += (ky == 1 ? centre : edge) * static_cast<float>(rows[ky][mid]);
      sum += edge * static_cast<float>(rows[ky][right]);
    }
    return round_saturate(sum);
  };
  std::vector<uint8_t> smooth(img.pixels.size());
  const int row_bytes = w * channels;
  for (int y = 0; y < h; ++y) {
    const uint8_t* const rows[3] = {img.row(reflect101(y - 1, h)), img.row(y),
                                    img.row(reflect101(y + 1, h))};
    uint8_t* out = smooth.data() + static_cast<size_t>(y) * row_bytes;
    for (int x : {0, w - 1}) {  // the columns whose neighbours are mirrored
      const int left = reflect101(x - 1, w) * channels, right = reflect101(x + 1, w) * channels;
      for (int c = 0; c < channels; ++c) {
        out[x * channels + c] = smoothed(rows, left + c, x * channels + c, right + c);
      }
    }
    for (int i = channels; i < row_bytes - channels; ++i) {
      out[i] = smoothed(rows, i - channels, i, i + channels);
    }
  }
  const double keep = 1.0 - factor;
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    img.pixels[i] = blend_truncate(img.pixels[i], factor, smooth[i] * keep);
  }
}

}  // namespace rh::data::image
