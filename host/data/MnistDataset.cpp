#include "data/MnistDataset.hpp"

#include <ATen/ATen.h>

#include <filesystem>
#include <stdexcept>

namespace rh::data {
namespace {

constexpr uint32_t kImagesMagic = 2051;  // idx3: unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 2049;  // idx1: unsigned bytes, 1 dimension
constexpr size_t kImagesHeader = 16;
constexpr size_t kLabelsHeader = 8;

uint32_t big_endian_u32(const std::vector<uint8_t>& bytes, size_t offset) {
  return (uint32_t{bytes[offset]} << 24) | (uint32_t{bytes[offset + 1]} << 16) |
         (uint32_t{bytes[offset + 2]} << 8) | uint32_t{bytes[offset + 3]};
}

// Checks the header's magic number and that the file holds exactly what the header says.
void check_idx_file(const std::vector<uint8_t>& bytes, const std::string& file, uint32_t magic,
                    size_t header_size, const std::string& kind, const FileKey& key) {
  if (bytes.size() < header_size) {
    throw_data_error(key, in_quotes(file) + " is truncated: expected a " +
                              std::to_string(header_size) + "-byte idx header, found " +
                              std::to_string(bytes.size()) + " bytes");
  }
  const uint32_t found = big_endian_u32(bytes, 0);
  if (found != magic) {
    throw_data_error(key, in_quotes(file) + " is not an idx " + kind + " file: magic number " +
                              std::to_string(found) + ", expected " + std::to_string(magic) +
                              " (is it still gzip-compressed?)");
  }
}

void check_size(const std::vector<uint8_t>& bytes, const std::string& file, size_t expected,
                const std::string& contents, const FileKey& key) {
  if (bytes.size() == expected) return;
  throw_data_error(
      key, in_quotes(file) +
               (bytes.size() < expected ? " is truncated" : " is larger than its header says") +
               ": expected " + std::to_string(expected) + " bytes (" + contents + "), found " +
               std::to_string(bytes.size()));
}

}  // namespace

MnistDataset::MnistDataset(MnistOptions options) : options_(std::move(options)) {
  if (!(options_.std_dev > 0)) throw std::invalid_argument("mnist: std must be > 0");
  const std::string prefix = options_.split == MnistOptions::Split::Train ? "train" : "t10k";
  const std::filesystem::path root(options_.root);
  const std::string image_file = (root / (prefix + "-images-idx3-ubyte")).string();
  const std::string label_file = (root / (prefix + "-labels-idx1-ubyte")).string();
  const FileKey& key = options_.key;

  images_ = read_data_file(image_file, "MNIST image file", key);
  check_idx_file(images_, image_file, kImagesMagic, kImagesHeader, "image (idx3)", key);
  const size_t count = big_endian_u32(images_, 4);
  rows_ = big_endian_u32(images_, 8);
  cols_ = big_endian_u32(images_, 12);
  if (rows_ < 1 || cols_ < 1 || rows_ > 65535 || cols_ > 65535) {
    throw_data_error(key, in_quotes(image_file) + " is corrupt: its header says the images are " +
                              std::to_string(rows_) + "x" + std::to_string(cols_) + " pixels");
  }
  check_size(images_, image_file, kImagesHeader + count * static_cast<size_t>(rows_ * cols_),
             "16-byte header + " + std::to_string(count) + " images of " + std::to_string(rows_) +
                 "x" + std::to_string(cols_),
             key);

  std::vector<uint8_t> labels = read_data_file(label_file, "MNIST label file", key);
  check_idx_file(labels, label_file, kLabelsMagic, kLabelsHeader, "label (idx1)", key);
  const size_t label_count = big_endian_u32(labels, 4);
  check_size(labels, label_file, kLabelsHeader + label_count,
             "8-byte header + " + std::to_string(label_count) + " labels", key);
  if (label_count != count) {
    throw_data_error(key, in_quotes(label_file) + " has " + std::to_string(label_count) +
                              " labels but " + in_quotes(image_file) + " has " +
                              std::to_string(count) + " images");
  }
  labels_.assign(labels.begin() + kLabelsHeader, labels.end());
  for (size_t i = 0; i < labels_.size(); ++i) {
    if (labels_[i] > 9) {
      throw_data_error(key, in_quotes(label_file) + ": label " + std::to_string(labels_[i]) +
                                " of image " + std::to_string(i) + " is not a digit 0..9");
    }
  }
}

Example MnistDataset::get(size_t index) const {
  if (index >= size()) {
    throw std::out_of_range("mnist: index " + std::to_string(index) + " >= size " +
                            std::to_string(size()));
  }
  const size_t pixels = static_cast<size_t>(rows_ * cols_);
  const uint8_t* src = images_.data() + kImagesHeader + index * pixels;
  at::Tensor input = at::empty({1, rows_, cols_}, at::kFloat);
  float* x = input.data_ptr<float>();
  const double scale = 1.0 / (255.0 * options_.std_dev);
  const double shift = options_.mean / options_.std_dev;
  for (size_t p = 0; p < pixels; ++p) x[p] = static_cast<float>(src[p] * scale - shift);
  return Example{input, at::scalar_tensor(int64_t{labels_[index]}, at::kLong)};
}

}  // namespace rh::data
