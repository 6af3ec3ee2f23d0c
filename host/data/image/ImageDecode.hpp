// Decoding an image file into the pipeline's 8-bit BGR image.
//
// JPEG through libjpeg-turbo (TurboJPEG, the library OpenCV and Pillow use,
// with their default accurate DCT and smooth upsampling, so the pixels are
// theirs), PNG through libpng. Whatever the file holds becomes three 8-bit
// channels, as OpenCV's IMREAD_COLOR makes it: grayscale is repeated,
// palettes expanded, alpha dropped (not composited), 16-bit samples keep
// their high byte, CMYK (Adobe's inverted JPEGs) is converted as Pillow's
// convert("RGB") does. Anything else (another format, a corrupt or truncated
// file) is an ImageError naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/image/Image.hpp"

namespace rh::data::image {

class ImageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads and decodes `path`; the message of an ImageError starts with it.
Image decode_image_file(const std::string& path);
// Decodes a file's bytes; `name` names it in errors.
Image decode_image(const uint8_t* data, size_t size, const std::string& name);

// The whole file's bytes; an ImageError naming it when it cannot be read.
std::vector<uint8_t> read_image_file(const std::string& path);

// A JPEG's height and width from its header, when the file is a JPEG whose
// region decode_jpeg_region() can decode (not CMYK); false otherwise.
bool jpeg_region_size(const uint8_t* data, size_t size, int& height, int& width);

// Rows [top, top + height) x columns [left, left + width) of a JPEG,
// decoding only what they need: the rows above are skipped (entropy-decoded
// only), those below never read, the columns outside left out of the
// inverse DCT (libjpeg's jpeg_skip_scanlines and jpeg_crop_scanline). The
// pixels are the full decode's, byte for byte: the region asked of libjpeg
// has a margin, so its edges (where smooth chroma upsampling lacks a
// neighbour) are never the pixels returned.
Image decode_jpeg_region(const uint8_t* data, size_t size, const std::string& name, int top,
                         int left, int height, int width);

}  // namespace rh::data::image
