#include "data/image/Geometric.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace rh::data::image {
namespace {

// OpenCV's fixed-point constants (imgproc's INTER_BITS, AB_BITS,
// INTER_REMAP_COEF_BITS).
constexpr int kInterBits = 5;  // the interpolation fraction: 1/32 of a pixel
constexpr int kTabSize = 1 << kInterBits;
constexpr int kAbBits = 10;  // warpAffine's coordinates: 1/1024 of a pixel
constexpr int kAbScale = 1 << kAbBits;
constexpr int kCoefBits = 15;  // the weights: sum 1 << 15
constexpr int kCoefScale = 1 << kCoefBits;

// Floor division by 2^shift (>> on a negative int is arithmetic in practice,
// but only defined so from C++20).
int64_t floor_shift(int64_t v, int shift) { return v >= 0 ? v >> shift : -((-v - 1) >> shift) - 1; }

// cv::saturate_cast<int>(double): round half to even, clamp.
int64_t round_to_int(double v) {
  v = std::nearbyint(v);
  if (v >= static_cast<double>(INT_MAX)) return INT_MAX;
  if (v <= static_cast<double>(INT_MIN)) return INT_MIN;
  return static_cast<int64_t>(v);
}

int64_t saturate_short(int64_t v) { return std::clamp<int64_t>(v, SHRT_MIN, SHRT_MAX); }

// cv2's interpolateLinear / interpolateCubic: the 1D weights at fraction x,
// in float, in OpenCV's operation order (the tables are rounded from these).
void linear_weights(float x, float* w) {
  w[0] = 1.f - x;
  w[1] = x;
}

void cubic_weights(float x, float* w) {
  const float a = -0.75f;
  w[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  w[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  w[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  w[3] = 1.f - w[0] - w[1] - w[2];
}

// OpenCV's initInterTab2D(method, fixpt = true): for each of the 32 x 32
// fractions, the ksize x ksize weights as 15-bit integers. Where rounding
// makes them sum to other than 1 << 15, OpenCV moves the difference onto the
// largest (or smallest) weight among flattened indices [ksize/2, ksize/2 + 1]
// squared: for bicubic taps (x+1..x+2, y+1..y+2); for bilinear indices past
// the entry's four, into the next entry, still zero while the table is built
// (`weights` keeps one zero entry of slack after the last). Bilinear needs it
// only at fraction (0, 0), where 32768 saturates to 32767 and the missing 1
// lands on the (x+1, y+1) weight; the output is unchanged by it.
struct WeightTable {
  int ksize = 0;
  std::vector<int16_t> weights;  // [(fy * 32 + fx) * ksize^2 + ky * ksize + kx]

  const int16_t* at(int fx, int fy) const {
    return weights.data() + static_cast<size_t>(fy * kTabSize + fx) * ksize * ksize;
  }
};

WeightTable make_table(int ksize) {
  std::vector<float> tab1d(static_cast<size_t>(kTabSize) * ksize);
  const float scale = 1.f / kTabSize;
  for (int i = 0; i < kTabSize; ++i) {
    float* w = &tab1d[static_cast<size_t>(i) * ksize];
    if (ksize == 2) {
      linear_weights(i * scale, w);
    } else {
      cubic_weights(i * scale, w);
    }
  }
  WeightTable table;
  table.ksize = ksize;
  const int k2 = ksize * ksize;
  table.weights.assign(static_cast<size_t>(kTabSize * kTabSize + 1) * k2, 0);
  for (int i = 0; i < kTabSize; ++i) {
    for (int j = 0; j < kTabSize; ++j) {
      int16_t* itab = table.weights.data() + static_cast<size_t>(i * kTabSize + j) * k2;
      int isum = 0;
      for (int k1 = 0; k1 < ksize; ++k1) {
        const float vy = tab1d[static_cast<size_t>(i) * ksize + k1];
        for (int k2i = 0; k2i < ksize; ++k2i) {
          const float v = vy * tab1d[static_cast<size_t>(j) * ksize + k2i];
          const int64_t rounded =
              saturate_short(static_cast<int64_t>(std::nearbyint(v * kCoefScale)));
          itab[k1 * ksize + k2i] = static_cast<int16_t>(rounded);
          isum += static_cast<int>(rounded);
        }
      }
      if (isum != kCoefScale) {
        const int diff = isum - kCoefScale;
        const int half = ksize / 2;
        int max1 = half, max2 = half, min1 = half, min2 = half;
        for (int k1 = half; k1 < half + 2; ++k1) {
          for (int k2i = half; k2i < half + 2; ++k2i) {
            if (itab[k1 * ksize + k2i] < itab[min1 * ksize + min2]) {
              min1 = k1, min2 = k2i;
            } else if (itab[k1 * ksize + k2i] > itab[max1 * ksize + max2]) {
              max1 = k1, max2 = k2i;
            }
          }
        }
        if (diff < 0) {
          itab[max1 * ksize + max2] = static_cast<int16_t>(itab[max1 * ksize + max2] - diff);
        } else {
          itab[min1 * ksize + min2] = static_cast<int16_t>(itab[min1 * ksize + min2] - diff);
        }
      }
    }
  }
  return table;
}

const WeightTable& weight_table(Interpolation interpolation) {
  // Built once, read-only afterwards: safe to share between loader threads.
  static const WeightTable bilinear = make_table(2);
  static const WeightTable bicubic = make_table(4);
  return interpolation == Interpolation::Bicubic ? bicubic : bilinear;
}

// cv2.warpAffine inverts a forward matrix with these exact steps.
std::array<double, 6> invert_affine(const AffineMatrix& forward) {
  std::array<double, 6> m = forward.m;
  double d = m[0] * m[4] - m[1] * m[3];
  d = d != 0 ? 1. / d : 0;
  const double a11 = m[4] * d, a22 = m[0] * d;
  m[0] = a11;
  m[1] *= -d;
  m[3] *= -d;
  m[4] = a22;
  const double b1 = -m[0] * m[2] - m[1] * m[5];
  const double b2 = -m[3] * m[2] - m[4] * m[5];
  m[2] = b1;
  m[5] = b2;
  return m;
}

// The matrices mmcv builds with np.float32([...]).
AffineMatrix float32_matrix(double a, double b, double c, double d, double e, double f) {
  auto f32 = [](double v) { return static_cast<double>(static_cast<float>(v)); };
  return AffineMatrix{{f32(a), f32(b), f32(c), f32(d), f32(e), f32(f)}};
}

}  // namespace

Image warp_affine(const Image& src, const AffineMatrix& forward, Interpolation interpolation,
                  const PadValue& pad) {
  if (src.channels < 1 || src.channels > 3) {
    throw std::invalid_argument("warp_affine: needs 1 to 3 channels, got " +
                                std::to_string(src.channels));
  }
  if (interpolation == Interpolation::Area) interpolation = Interpolation::Bilinear;
  if (interpolation == Interpolation::Lanczos) {
    throw std::invalid_argument(
        "warp_affine: lanczos is not implemented (nearest, bilinear, bicubic, area)");
  }
  const int h = src.height, w = src.width, channels = src.channels;
  Image dst(h, w, channels);
  if (dst.pixels.empty()) return dst;
  const std::array<double, 6> m = invert_affine(forward);

  // Source coordinates in 1/1024 pixel: x's share per column, then y's and
  // the offset per row, each rounded on its own as OpenCV does. round_delta
  // makes the later shifts round to nearest (nearest) or to the 1/32 grid.
  const bool nearest = interpolation == Interpolation::Nearest;
  const int64_t round_delta = nearest ? kAbScale / 2 : kAbScale / kTabSize / 2;
  std::vector<int64_t> adelta(w), bdelta(w);
  for (int x = 0; x < w; ++x) {
    adelta[x] = round_to_int(m[0] * x * kAbScale);
    bdelta[x] = round_to_int(m[3] * x * kAbScale);
  }

  const WeightTable* table = nearest ? nullptr : &weight_table(interpolation);
  const int ksize = nearest ? 1 : table->ksize;
  const int first_tap = nearest ? 0 : -(ksize / 2 - 1);  // bilinear x, x+1; bicubic x-1 .. x+2
  for (int y = 0; y < h; ++y) {
    const int64_t x0 = round_to_int((m[1] * y + m[2]) * kAbScale) + round_delta;
    const int64_t y0 = round_to_int((m[4] * y + m[5]) * kAbScale) + round_delta;
    uint8_t* out = dst.row(y);
    for (int x = 0; x < w; ++x, out += channels) {
      if (nearest) {
        const int64_t sx = saturate_short(floor_shift(x0 + adelta[x], kAbBits));
        const int64_t sy = saturate_short(floor_shift(y0 + bdelta[x], kAbBits));
        const bool inside = sx >= 0 && sx < w && sy >= 0 && sy < h;
        for (int c = 0; c < channels; ++c) {
          out[c] = inside ? src.at(static_cast<int>(sy), static_cast<int>(sx))[c] : pad[c];
        }
        continue;
      }
      const int64_t fine_x = floor_shift(x0 + adelta[x], kAbBits - kInterBits);
      const int64_t fine_y = floor_shift(y0 + bdelta[x], kAbBits - kInterBits);
      const int64_t sx = saturate_short(floor_shift(fine_x, kInterBits)) + first_tap;
      const int64_t sy = saturate_short(floor_shift(fine_y, kInterBits)) + first_tap;
      const int16_t* weights = table->at(static_cast<int>(fine_x & (kTabSize - 1)),
                                         static_cast<int>(fine_y & (kTabSize - 1)));
      int64_t sum[3] = {0, 0, 0};
      if (sx >= 0 && sx + ksize <= w && sy >= 0 && sy + ksize <= h) {
        for (int ky = 0; ky < ksize; ++ky) {
          const uint8_t* p = src.at(static_cast<int>(sy) + ky, static_cast<int>(sx));
          for (int kx = 0; kx < ksize; ++kx, p += channels) {
            const int64_t weight = weights[ky * ksize + kx];
            for (int c = 0; c < channels; ++c) sum[c] += p[c] * weight;
          }
        }
      } else {
        // Taps outside the source read the pad value, which is what OpenCV's
        // border branches amount to for BORDER_CONSTANT.
        for (int ky = 0; ky < ksize; ++ky) {
          const int64_t ty = sy + ky;
          for (int kx = 0; kx < ksize; ++kx) {
            const int64_t tx = sx + kx;
            const int64_t weight = weights[ky * ksize + kx];
            const bool inside = tx >= 0 && tx < w && ty >= 0 && ty < h;
            const uint8_t* p =
                inside ? src.at(static_cast<int>(ty), static_cast<int>(tx)) : pad.data();
            for (int c = 0; c < channels; ++c) sum[c] += p[c] * weight;
          }
        }
      }
      for (int c = 0; c < channels; ++c) {
        const int64_t v = floor_shift(sum[c] + (kCoefScale >> 1), kCoefBits);
        out[c] = static_cast<uint8_t>(std::clamp<int64_t>(v, 0, 255));
      }
    }
  }
  return dst;
}

void shear(Image& img, double magnitude, Direction direction, Interpolation interpolation,
           const PadValue& pad) {
  const AffineMatrix m = direction == Direction::Horizontal
                             ? float32_matrix(1, magnitude, 0, 0, 1, 0)
                             : float32_matrix(1, 0, 0, magnitude, 1, 0);
  img = warp_affine(img, m, interpolation, pad);
}

void translate(Image& img, double offset, Direction direction, Interpolation interpolation,
               const PadValue& pad) {
  const AffineMatrix m = direction == Direction::Horizontal ? float32_matrix(1, 0, offset, 0, 1, 0)
                                                            : float32_matrix(1, 0, 0, 0, 1, offset);
  img = warp_affine(img, m, interpolation, pad);
}

void rotate(Image& img, double angle_degrees, Interpolation interpolation, const PadValue& pad) {
  // mmcv: cv2.getRotationMatrix2D(center, -angle, 1.0), whose positive angle
  // is counter-clockwise on screen (y points down). OpenCV takes the centre
  // as a float Point2f: exact for any width or height below 2^24.
  const double cx = static_cast<float>((img.width - 1) * 0.5);
  const double cy = static_cast<float>((img.height - 1) * 0.5);
  const double radians = -angle_degrees * (M_PI / 180);
  const double alpha = std::cos(radians);
  const double beta = std::sin(radians);
  const AffineMatrix m{
      {alpha, beta, (1 - alpha) * cx - beta * cy, -beta, alpha, beta * cx + (1 - alpha) * cy}};
  img = warp_affine(img, m, interpolation, pad);
}

}  // namespace rh::data::image
