#include "data/image/Resize.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace rh::data::image {
namespace {

// Pillow's fixed point: 32 bits less 8 for the pixel and 2 for the sums'
// headroom.
constexpr int kPrecisionBits = 32 - 8 - 2;

struct Filter {
  double (*weight)(double);
  double support;
};

double box_filter(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }

double bilinear_filter(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic_filter(double x) {
  constexpr double a = -0.5;  // Pillow's (OpenCV's cubic is -0.75)
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}

double lanczos_filter(double x) {
  return x > -3.0 && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0;  // lanczos3
}

Filter filter_of(Interpolation how) {
  switch (how) {
    case Interpolation::Area:
      return {box_filter, 0.5};
    case Interpolation::Bilinear:
      return {bilinear_filter, 1.0};
    case Interpolation::Bicubic:
      return {bicubic_filter, 2.0};
    case Interpolation::Lanczos:
      return {lanczos_filter, 3.0};
    case Interpolation::Nearest:
      break;
  }
  throw std::logic_error("filter_of: nearest has no filter");
}

// One pass's weights (Resample.c precompute_coeffs + normalize_coeffs_8bpc):
// output pixel i sums inputs first[i] .. first[i] + count[i] - 1 with the
// weights at k[i * ksize ...], in 2^-22 units.
struct Coefficients {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> k;
};

Coefficients coefficients(int in_size, int out_size, const Filter& f) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = f.support * filterscale;
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<size_t>(out_size));
  c.count.resize(static_cast<size_t>(out_size));
  c.k.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> w(static_cast<size_t>(c.ksize));
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int hi = std::min(static_cast<int>(center + support + 0.5), in_size);
    const int n = hi - lo;
    double sum = 0;
    for (int x = 0; x < n; ++x) {
      w[static_cast<size_t>(x)] = f.weight((x + lo - center + 0.5) * ss);
      sum += w[static_cast<size_t>(x)];
    }
    for (int x = 0; x < n; ++x) {
      const double v = sum != 0.0 ? w[static_cast<size_t>(x)] / sum : w[static_cast<size_t>(x)];
      c.k[static_cast<size_t>(i) * c.ksize + x] = static_cast<int32_t>(
          v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    c.first[static_cast<size_t>(i)] = lo;
    c.count[static_cast<size_t>(i)] = n;
  }
  return c;
}

uint8_t clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

// Rows [row0, row0 + out.height) of `in`, resized along x into `out`.
// Integer sums, so the order of the terms is free: the three channels of a
// pixel are summed together, one pass over the taps.
void horizontal(const Image& in, int row0, const Coefficients& c, Image& out) {
  const int ch = in.channels;
  constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);
  for (int y = 0; y < out.height; ++y) {
    const uint8_t* src = in.row(row0 + y);
    uint8_t* dst = out.row(y);
    for (int x = 0; x < out.width; ++x) {
      const int32_t* k = &c.k[static_cast<size_t>(x) * c.ksize];
      const uint8_t* s = src + static_cast<size_t>(c.first[static_cast<size_t>(x)]) * ch;
      const int n = c.count[static_cast<size_t>(x)];
      uint8_t* d = dst + static_cast<size_t>(x) * ch;
      if (ch == 3) {
        int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
        for (int i = 0; i < n; ++i, s += 3) {
          s0 += s[0] * k[i];
          s1 += s[1] * k[i];
          s2 += s[2] * k[i];
        }
        d[0] = clip8(s0);
        d[1] = clip8(s1);
        d[2] = clip8(s2);
        continue;
      }
      for (int k_ch = 0; k_ch < ch; ++k_ch) {
        int32_t sum = kHalf;
        for (int i = 0; i < n; ++i) sum += s[static_cast<size_t>(i) * ch + k_ch] * k[i];
        d[k_ch] = clip8(sum);
      }
    }
  }
}

// `in` resized along y into `out`; the rows' bounds are relative to in's
// first. Tap by tap over whole rows (contiguous, so the compiler
// vectorises the inner loop), summed in a row of int32.
// Built for AVX2 too (chosen at load time where the CPU has it): its
// 8-lane 32-bit multiply vectorises the inner loop; x86-64's baseline
// SSE2 has none.
__attribute__((target_clones("avx2", "default"))) void vertical(const Image& in,
                                                                const Coefficients& c, int row0,
                                                                Image& out) {
  const size_t row_bytes = out.row_bytes();
  std::vector<int32_t> acc(row_bytes);
  for (int y = 0; y < out.height; ++y) {
    const int32_t* k = &c.k[static_cast<size_t>(y) * c.ksize];
    const int first = c.first[static_cast<size_t>(y)] - row0;
    const int n = c.count[static_cast<size_t>(y)];
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    for (int i = 0; i < n; ++i) {
      const uint8_t* r = in.row(first + i);
      const int32_t w = k[i];
      int32_t* a = acc.data();
      for (size_t b = 0; b < row_bytes; ++b) a[b] += r[b] * w;
    }
    uint8_t* dst = out.row(y);
    for (size_t b = 0; b < row_bytes; ++b) dst[b] = clip8(acc[b]);
  }
}

// Pillow's NEAREST (an affine scale, Geometry.c ImagingScaleAffine): the
// input pixel under each output pixel's centre.
Image resize_nearest(const Image& in, int width, int height) {
  Image out(height, width, in.channels);
  const double sx = static_cast<double>(in.width) / width;
  const double sy = static_cast<double>(in.height) / height;
  std::vector<int> xs(static_cast<size_t>(width));
  double xo = sx * 0.5;
  for (int x = 0; x < width; ++x, xo += sx)
    xs[static_cast<size_t>(x)] = std::min(static_cast<int>(xo), in.width - 1);
  double yo = sy * 0.5;
  for (int y = 0; y < height; ++y, yo += sy) {
    const uint8_t* src = in.row(std::min(static_cast<int>(yo), in.height - 1));
    uint8_t* dst = out.row(y);
    for (int x = 0; x < width; ++x)
      std::memcpy(dst + static_cast<size_t>(x) * in.channels,
                  src + static_cast<size_t>(xs[static_cast<size_t>(x)]) * in.channels,
                  static_cast<size_t>(in.channels));
  }
  return out;
}

}  // namespace

Interpolation interpolation_from_name(const std::string& name) {
  if (name == "nearest") return Interpolation::Nearest;
  if (name == "bilinear") return Interpolation::Bilinear;
  if (name == "bicubic") return Interpolation::Bicubic;
  if (name == "area") return Interpolation::Area;
  if (name == "lanczos") return Interpolation::Lanczos;
  throw std::invalid_argument("expected one of nearest, bilinear, bicubic, area, lanczos, got '" +
                              name + "'");
}

Image resize(const Image& in, int width, int height, Interpolation how) {
  if (width < 1 || height < 1 || in.empty())
    throw std::invalid_argument("resize: " + std::to_string(in.width) + "x" +
                                std::to_string(in.height) + " to " + std::to_string(width) + "x" +
                                std::to_string(height));
  if (width == in.width && height == in.height) return in;
  if (how == Interpolation::Nearest) return resize_nearest(in, width, height);
  const Filter f = filter_of(how);
  const bool need_x = width != in.width;
  const bool need_y = height != in.height;
  const Coefficients cy = coefficients(in.height, height, f);
  if (!need_x) {
    Image out(height, width, in.channels);
    vertical(in, cy, 0, out);
    return out;
  }
  const Coefficients cx = coefficients(in.width, width, f);
  // Only the rows the vertical pass reads are resized along x.
  const int row0 = need_y ? cy.first.front() : 0;
  const int row_end = need_y ? cy.first.back() + cy.count.back() : in.height;
  Image temp(row_end - row0, width, in.channels);
  horizontal(in, row0, cx, temp);
  if (!need_y) return temp;
  Image out(height, width, in.channels);
  vertical(temp, cy, row0, out);
  return out;
}

Image crop(const Image& in, int top, int left, int height, int width) {
  if (top < 0 || left < 0 || height < 1 || width < 1 || top + height > in.height ||
      left + width > in.width)
    throw std::invalid_argument("crop: rows " + std::to_string(top) + "+" + std::to_string(height) +
                                ", columns " + std::to_string(left) + "+" + std::to_string(width) +
                                " of a " + std::to_string(in.width) + "x" +
                                std::to_string(in.height) + " image");
  Image out(height, width, in.channels);
  const size_t offset = static_cast<size_t>(left) * in.channels;
  for (int y = 0; y < height; ++y)
    std::memcpy(out.row(y), in.row(top + y) + offset, out.row_bytes());
  return out;
}

void flip(Image& img, bool horizontal, bool vertical) {
  const int ch = img.channels;
  if (horizontal) {
    for (int y = 0; y < img.height; ++y) {
      uint8_t* r = img.row(y);
      for (int a = 0, b = img.width - 1; a < b; ++a, --b)
        for (int c = 0; c < ch; ++c)
          std::swap(r[static_cast<size_t>(a) * ch + c], r[static_cast<size_t>(b) * ch + c]);
    }
  }
  if (vertical) {
    std::vector<uint8_t> tmp(img.row_bytes());
    for (int a = 0, b = img.height - 1; a < b; ++a, --b) {
      std::memcpy(tmp.data(), img.row(a), tmp.size());
      std::memcpy(img.row(a), img.row(b), tmp.size());
      std::memcpy(img.row(b), tmp.data(), tmp.size());
    }
  }
}

}  // namespace rh::data::image
