#include "data/Cifar10Dataset.hpp"

#include <ATen/ATen.h>

#include <filesystem>
#include <stdexcept>

namespace rh::data {

Cifar10Dataset::Cifar10Dataset(Cifar10Options options) : options_(std::move(options)) {
  for (double s : options_.std_dev) {
    if (!(s > 0)) throw std::invalid_argument("cifar10: std must be > 0");
  }
  std::vector<std::string> names;
  if (options_.split == Cifar10Options::Split::Train) {
    for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  } else {
    names.push_back("test_batch.bin");
  }

  for (const std::string& name : names) {
    const std::string file = (std::filesystem::path(options_.root) / name).string();
    const std::filesystem::path extracted =
        std::filesystem::path(options_.root) / "cifar-10-batches-bin" / name;
    std::error_code ec;
    if (!std::filesystem::exists(file, ec) && std::filesystem::exists(extracted, ec)) {
      throw_data_error(options_.key, "cannot read the CIFAR-10 batch file " + in_quotes(file) +
                                         ": it is in " +
                                         in_quotes(extracted.parent_path().string()) +
                                         "; set root to that folder");
    }
    const std::vector<uint8_t> bytes = read_data_file(file, "CIFAR-10 batch file", options_.key);
    if (bytes.empty() || bytes.size() % kRecordBytes != 0) {
      throw_data_error(options_.key,
                       in_quotes(file) + " is corrupt: its size " + std::to_string(bytes.size()) +
                           " bytes is not a positive multiple of " + std::to_string(kRecordBytes) +
                           " (1 label byte + 3072 pixel bytes per image; is it the binary " +
                           "version of CIFAR-10?)");
    }
    for (size_t r = 0; r < bytes.size() / kRecordBytes; ++r) {
      const uint8_t label = bytes[r * kRecordBytes];
      if (label > 9) {
        throw_data_error(options_.key, in_quotes(file) + " is corrupt: record " +
                                           std::to_string(r) + " has label " +
                                           std::to_string(label) + ", expected 0..9");
      }
    }
    records_.insert(records_.end(), bytes.begin(), bytes.end());
  }
}

Example Cifar10Dataset::get(size_t index) const {
  if (index >= size()) {
    throw std::out_of_range("cifar10: index " + std::to_string(index) + " >= size " +
                            std::to_string(size()));
  }
  const uint8_t* record = records_.data() + index * kRecordBytes;
  at::Tensor input = at::empty({3, 32, 32}, at::kFloat);
  float* x = input.data_ptr<float>();
  constexpr size_t kPlane = 32 * 32;
  for (size_t c = 0; c < 3; ++c) {
    const double scale = 1.0 / (255.0 * options_.std_dev[c]);
    const double shift = options_.mean[c] / options_.std_dev[c];
    const uint8_t* src = record + 1 + c * kPlane;
    for (size_t p = 0; p < kPlane; ++p)
      x[c * kPlane + p] = static_cast<float>(src[p] * scale - shift);
  }
  return Example{input, at::scalar_tensor(int64_t{record[0]}, at::kLong)};
}

}  // namespace rh::data
