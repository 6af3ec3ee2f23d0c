// Geometric ops: the affine warps of RandAugment's Rotate, Shear and
// Translate, computed as mmcv's imrotate / imshear / imtranslate compute them
// with cv2.warpAffine on a BGR uint8 image.
//
// warp_affine() follows OpenCV's classic fixed-point warp (imgwarp.cpp), so a
// pipeline reproduces mmcv's pixels rather than an idealised resampling:
//   - pixel centres sit at integer coordinates; the output pixel (x, y) is
//     read from the source at M^-1 (x, y), M the forward matrix;
//   - source coordinates are kept in 1/1024 of a pixel and the fraction used
//     for interpolation in 1/32, as OpenCV's INTER_BITS tables do;
//   - bilinear and bicubic (Keys' cubic with a = -0.75, cv2's INTER_CUBIC)
//     weights are 15-bit integers, the sum rounded and clamped to 0..255;
//     nearest rounds the coordinate to the closest pixel;
//   - outside the source every tap reads `pad` (BORDER_CONSTANT).
// The output has the source's size (cv2's dsize = (w, h) in mmcv).
#pragma once

#include <array>
#include <cstdint>

#include "data/image/Image.hpp"
#include "data/image/Resize.hpp"  // Interpolation, mmcv's names

namespace rh::data::image {

// The forward map: a source pixel at (x, y) lands at
// (m[0] x + m[1] y + m[2], m[3] x + m[4] y + m[5]).
struct AffineMatrix {
  std::array<double, 6> m{1, 0, 0, 0, 1, 0};
};

// The value of each channel outside the image, BGR (channel k reads pad[k]).
using PadValue = std::array<uint8_t, 3>;

enum class Direction { Horizontal, Vertical };

// cv2.warpAffine(src, forward, (w, h), flags=interpolation,
// borderMode=BORDER_CONSTANT, borderValue=pad). 1 to 3 channels. Area warps
// as bilinear, as cv2.warpAffine does with INTER_AREA; Lanczos is not
// implemented (std::invalid_argument).
Image warp_affine(const Image& src, const AffineMatrix& forward, Interpolation interpolation,
                  const PadValue& pad);

// mmcv.imshear: horizontal moves row y by magnitude * y pixels to the right
// (x' = x + magnitude y), vertical moves column x down by magnitude * x.
// mmcv builds the matrix in float32, so `magnitude` is rounded to float first.
void shear(Image& img, double magnitude, Direction direction, Interpolation interpolation,
           const PadValue& pad);

// mmcv.imtranslate: moves the image by `offset` pixels (right or down when
// positive), the offset rounded to float32 as in mmcv's matrix.
void translate(Image& img, double offset, Direction direction, Interpolation interpolation,
               const PadValue& pad);

// mmcv.imrotate with its defaults (centre ((w - 1) / 2, (h - 1) / 2), scale 1,
// the size kept): positive angles, in degrees, turn the picture clockwise.
void rotate(Image& img, double angle_degrees, Interpolation interpolation, const PadValue& pad);

}  // namespace rh::data::image
