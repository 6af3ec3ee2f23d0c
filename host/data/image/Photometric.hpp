// Photometric ops: the pixel-value changes of RandAugment's policies, computed
// as mmcv (mmcv/image/photometric.py) computes them on a BGR uint8 image.
//
// mmcv mixes numpy and cv2 arithmetic, and the results differ by a level from
// Pillow's where they round differently, so each op below follows mmcv's own
// steps rather than the textbook formula: which values are rounded, which are
// truncated, which sums run in float and which in double. The comment of each
// op says what it does and where it parts from Pillow (the reference the tests
// compare against).
//
// All ops change the image in place. Those that look at colour (adjust_color,
// adjust_contrast) need three channels in BGR order; the others work on each
// channel alone.
#pragma once

#include <cstdint>

#include "data/image/Image.hpp"

namespace rh::data::image {

// cv2.cvtColor(BGR2GRAY) for 8 bits: Y = 0.299 R + 0.587 G + 0.114 B in 14-bit
// fixed point, rounded (Pillow's "L" uses 16 bits and can differ by one).
uint8_t bgr_to_gray(uint8_t b, uint8_t g, uint8_t r);

// 255 - x (mmcv.iminvert).
void invert(Image& img);

// x < threshold ? x : 255 - x (mmcv.solarize). A threshold above 255 leaves
// the image as it is, 0 or below inverts it.
void solarize(Image& img, double threshold);

// x < threshold ? min(x + amount, 255) : x, the sum truncated (MMPretrain's
// SolarizeAdd, numpy: float sum, astype(uint8)). `amount` >= 0.
void solarize_add(Image& img, double amount, double threshold = 128);

// Keeps the top `bits` bits of every value (mmcv.posterize). bits <= 0 gives
// black (numpy's uint8 >> 8 and more is 0), bits >= 8 leaves the image.
void posterize(Image& img, int bits);

// Stretches each channel so its lowest value becomes 0 and its highest 255
// (mmcv.auto_contrast with cutoff 0; equal to Pillow's ImageOps.autocontrast).
// A channel with a single value is left as it is.
void auto_contrast(Image& img);

// Histogram equalisation of each channel (mmcv.imequalize; equal to Pillow's
// ImageOps.equalize).
void equalize(Image& img);

// Blends each pixel with its gray: x * factor + gray * (1 - factor), rounded
// (mmcv.adjust_color: cv2.addWeighted on uint8). factor 0 gives the gray
// image, 1 the image. Pillow's ImageEnhance.Color truncates instead of
// rounding and grays with its own weights: it can be up to two levels lower.
void adjust_color(Image& img, double factor);

// Blends with the image's mean gray level, truncated (mmcv.adjust_contrast).
void adjust_contrast(Image& img, double factor);

// x * factor, truncated (mmcv.adjust_brightness).
void adjust_brightness(Image& img, double factor);

// Blends with the image smoothed by Pillow's SMOOTH kernel
// [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13 (mmcv.adjust_sharpness: cv2.filter2D,
// whose border mirrors the image without repeating the edge, BORDER_REFLECT_101;
// Pillow instead leaves the outermost pixels as they are).
void adjust_sharpness(Image& img, double factor);

}  // namespace rh::data::image
