#include "data/image/ImageDecode.hpp"

#include <jpeglib.h>
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>  // before jpeglib.h, which uses FILE
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "data/image/Resize.hpp"

namespace rh::data::image {
namespace {

[[noreturn]] void fail(const std::string& name, const std::string& why) {
  throw ImageError(name + ": " + why);
}

// ---- JPEG ----------------------------------------------------------------

struct TjHandle {
  tjhandle h = tjInitDecompress();
  ~TjHandle() {
    if (h != nullptr) tjDestroy(h);
  }
};

// Pillow's CMYK -> RGB (Convert.c cmyk2rgb): each colour is
// (255 - ink) * (255 - K) / 255, rounded. TurboJPEG hands CMYK over as
// stored, which for Adobe's files (every CMYK JPEG Photoshop or Pillow
// writes, with the APP14 marker) is inverted: 255 = no ink.
void cmyk_to_bgr(const std::vector<uint8_t>& cmyk, Image& out, bool inverted) {
  const size_t n = static_cast<size_t>(out.height) * out.width;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = &cmyk[i * 4];
    int ink[4];
    for (int c = 0; c < 4; ++c) ink[c] = inverted ? 255 - p[c] : p[c];
    const int nk = 255 - ink[3];
    for (int c = 0; c < 3; ++c) {
      // MULDIV255(a, b) as Pillow writes it: (a*b + 128 + ((a*b + 128) >> 8)) >> 8.
      const int t = (255 - ink[c]) * nk + 128;
      out.pixels[i * 3 + 2 - c] = static_cast<uint8_t>((t + (t >> 8)) >> 8);  // R, G, B -> BGR
    }
  }
}

// An Adobe APP14 marker ("Adobe" at the start of an FFEE segment) before the
// first scan: its CMYK is stored inverted.
bool has_adobe_marker(const uint8_t* data, size_t size) {
  size_t i = 2;
  while (i + 4 <= size && data[i] == 0xFF) {
    const uint8_t marker = data[i + 1];
    const size_t len = (static_cast<size_t>(data[i + 2]) << 8) | data[i + 3];
    if (marker == 0xDA) break;  // start of scan
    if (marker == 0xEE && len >= 7 && i + 4 + 5 <= size &&
        std::memcmp(data + i + 4, "Adobe", 5) == 0)
      return true;
    i += 2 + len;
  }
  return false;
}

Image decode_jpeg(const uint8_t* data, size_t size, const std::string& name) {
  TjHandle tj;
  if (tj.h == nullptr) fail(name, "cannot start the JPEG decoder");
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  unsigned char* src = const_cast<unsigned char*>(data);  // TurboJPEG 2.x's signature; not written
  const unsigned long len = static_cast<unsigned long>(size);
  if (tjDecompressHeader3(tj.h, src, len, &width, &height, &subsamp, &colorspace) != 0)
    fail(name, std::string("not a readable JPEG (") + tjGetErrorStr2(tj.h) + ")");
  if (width <= 0 || height <= 0) fail(name, "a JPEG without pixels");
  Image img(height, width, 3);
  // TJFLAG_STOPONWARNING: a truncated or corrupt stream is an error, not a
  // partly grey image.
  const int flags = TJFLAG_STOPONWARNING;
  int rc;
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    std::vector<uint8_t> cmyk(static_cast<size_t>(width) * height * 4);
    rc = tjDecompress2(tj.h, src, len, cmyk.data(), width, 0, height, TJPF_CMYK, flags);
    if (rc == 0) cmyk_to_bgr(cmyk, img, has_adobe_marker(data, size));
  } else {
    rc = tjDecompress2(tj.h, src, len, img.pixels.data(), width, 0, height, TJPF_BGR, flags);
  }
  if (rc != 0)
    fail(name, std::string("a corrupt or truncated JPEG (") + tjGetErrorStr2(tj.h) + ")");
  return img;
}

// ---- PNG -----------------------------------------------------------------

struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
};

void png_read_from(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, src->data + src->pos, n);
  src->pos += n;
}

void png_on_error(png_structp png, png_const_charp message) {
  auto* why = static_cast<std::string*>(png_get_error_ptr(png));
  *why = message;
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}  // benign (e.g. a bad iCCP chunk)

// Decodes into `img` (sized here); returns false with `why` set on an error.
// No object with a destructor lives in this frame across setjmp: libpng
// leaves it by longjmp.
bool decode_png_into(const uint8_t* data, size_t size, Image& img, std::string& why,
                     std::vector<png_bytep>& rows) {
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &why, png_on_error, png_on_warning);
  if (png == nullptr) {
    why = "cannot start the PNG decoder";
    return false;
  }
  png_infop info = png_create_info_struct(png);
  PngSource src{data, size, 0};
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
    if (why.empty()) why = "cannot read the PNG";
    return false;
  }
  png_set_read_fn(png, &src, png_read_from);
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info);
  const png_uint_32 height = png_get_image_height(png, info);
  const int color = png_get_color_type(png, info);
  // To 8-bit BGR, as OpenCV's IMREAD_COLOR: expand palettes and low bit
  // depths, keep 16-bit samples' high byte, drop alpha, repeat gray.
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  png_set_bgr(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<size_t>(width) * 3) {
    why = "an unexpected PNG layout after conversion";
    png_longjmp(png, 1);
  }
  img = Image(static_cast<int>(height), static_cast<int>(width), 3);
  rows.resize(height);
  for (png_uint_32 y = 0; y < height; ++y) rows[y] = img.row(static_cast<int>(y));
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

Image decode_png(const uint8_t* data, size_t size, const std::string& name) {
  Image img;
  std::string why;
  std::vector<png_bytep> rows;
  if (!decode_png_into(data, size, img, why, rows))
    fail(name, "a corrupt or truncated PNG (" + why + ")");
  if (img.empty()) fail(name, "a PNG without pixels");
  return img;
}

// ---- A JPEG region (libjpeg's API: TurboJPEG 2.1 has no partial decode) ----

struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_on_error(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// A warning (corrupt data libjpeg can step over) is an error here, as
// TJFLAG_STOPONWARNING makes it for the full decode.
void jpeg_on_warning(j_common_ptr cinfo, int level) {
  if (level < 0) jpeg_on_error(cinfo);
}

// Decodes rows [top, top + rows) x columns [x0, x0 + cols) into `out`
// (rows x out_cols x 3, from column `skip` of what libjpeg returns). No
// object with a destructor lives in this frame across setjmp.
bool decode_region_into(const uint8_t* data, size_t size, int top, int rows, int x0, int cols,
                        int left, Image& out, std::vector<uint8_t>& line, char* why) {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = jpeg_on_error;
  errors.mgr.emit_message = jpeg_on_warning;
  if (setjmp(errors.jump)) {
    std::strncpy(why, errors.message, JMSG_LENGTH_MAX);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_EXT_BGR;
  jpeg_start_decompress(&cinfo);
  JDIMENSION xoffset = static_cast<JDIMENSION>(x0), width = static_cast<JDIMENSION>(cols);
  jpeg_crop_scanline(&cinfo, &xoffset, &width);
  line.resize(static_cast<size_t>(cinfo.output_width) * 3);
  if (top > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(top));
  const size_t from = static_cast<size_t>(left - static_cast<int>(xoffset)) * 3;
  JSAMPROW row = line.data();
  for (int y = 0; y < rows; ++y) {
    jpeg_read_scanlines(&cinfo, &row, 1);
    if (y >= rows - out.height)
      std::memcpy(out.row(y - (rows - out.height)), line.data() + from, out.row_bytes());
  }
  jpeg_abort_decompress(&cinfo);  // the rows below are never read
  jpeg_destroy_decompress(&cinfo);
  return true;
}

}  // namespace

std::vector<uint8_t> read_image_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  const std::streamoff size = in.tellg();
  if (size < 0) fail(path, "cannot read (not a regular file?)");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) fail(path, "cannot read");
  return bytes;
}

bool jpeg_region_size(const uint8_t* data, size_t size, int& height, int& width) {
  if (size < 3 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF) return false;
  TjHandle tj;
  int subsamp = 0, colorspace = 0;
  if (tj.h == nullptr ||
      tjDecompressHeader3(tj.h, const_cast<unsigned char*>(data), static_cast<unsigned long>(size),
                          &width, &height, &subsamp, &colorspace) != 0)
    return false;
  return colorspace != TJCS_CMYK && colorspace != TJCS_YCCK && width > 0 && height > 0;
}

Image decode_jpeg_region(const uint8_t* data, size_t size, const std::string& name, int top,
                         int left, int height, int width) {
  int full_h = 0, full_w = 0;
  if (!jpeg_region_size(data, size, full_h, full_w) || top < 0 || left < 0 || height < 1 ||
      width < 1 || top + height > full_h || left + width > full_w)
    return crop(decode_image(data, size, name), top, left, height, width);
  // A margin of 16 pixels (the largest iMCU) on every side that has one.
  constexpr int kMargin = 16;
  const int y0 = std::max(0, top - kMargin);
  const int x0 = std::max(0, left - kMargin);
  const int x1 = std::min(full_w, left + width + kMargin);
  Image out(height, width, 3);
  std::vector<uint8_t> line;
  char why[JMSG_LENGTH_MAX] = {0};
  if (!decode_region_into(data, size, y0, top + height - y0, x0, x1 - x0, left, out, line, why))
    fail(name, std::string("a corrupt or truncated JPEG (") + why + ")");
  return out;
}

Image decode_image(const uint8_t* data, size_t size, const std::string& name) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
    return decode_jpeg(data, size, name);
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return decode_png(data, size, name);
  if (size == 0) fail(name, "an empty file");
  fail(name, "not a JPEG or PNG file (runner-host decodes those two)");
}

Image decode_image_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_image_file(path);
  return decode_image(bytes.data(), bytes.size(), path);
}

}  // namespace rh::data::image
