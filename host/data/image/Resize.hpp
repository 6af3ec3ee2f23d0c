// Resizing and cropping 8-bit images.
//
// One resampler, Pillow's (Image.resize, libImaging/Resample.c), written out
// to its integer arithmetic so the pixels are Pillow's own: separable passes
// (horizontal, then vertical, rounded to 8 bits between them), each output
// pixel a filter's weighted sum over the input pixels under its support,
// the support widened by the scale when shrinking (antialiasing). mmcv's
// `backend: pillow` is exactly this; `backend: cv2` (OpenCV's resize, which
// does not widen the support when shrinking) is accepted and resized the
// same way: docs/data.md says so.
#pragma once

#include <string>

#include "data/image/Image.hpp"

namespace rh::data::image {

// mmcv's names: nearest, bilinear, bicubic, area (Pillow's BOX), lanczos.
enum class Interpolation { Nearest, Bilinear, Bicubic, Area, Lanczos };

// The value of an `interpolation:` key; throws std::invalid_argument for
// another name (the config layer names the key).
Interpolation interpolation_from_name(const std::string& name);

// `in` resized to width x height (both >= 1).
Image resize(const Image& in, int width, int height, Interpolation how);

// Rows [top, top + height) and columns [left, left + width) of `in`, inside it.
Image crop(const Image& in, int top, int left, int height, int width);

// Mirrored: horizontal (left-right), vertical (top-bottom) or both.
void flip(Image& img, bool horizontal, bool vertical);

}  // namespace rh::data::image
