#include "data/CharLmDataset.hpp"

#include <ATen/ATen.h>

#include <array>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace rh::data {

CharLmDataset::CharLmDataset(CharLmOptions options) : block_size_(options.block_size) {
  if (block_size_ < 1 || !(options.val_fraction >= 0 && options.val_fraction <= 1)) {
    throw std::invalid_argument("char_lm: need block_size >= 1 and 0 <= val_fraction <= 1");
  }
  const std::vector<uint8_t> text = read_data_file(options.file, "text file", options.key);

  std::array<int, 256> id{};
  id.fill(-1);
  for (uint8_t byte : text) id[byte] = 0;
  for (int byte = 0; byte < 256; ++byte) {
    if (id[static_cast<size_t>(byte)] == 0) {
      id[static_cast<size_t>(byte)] = static_cast<int>(vocabulary_.size());
      vocabulary_.push_back(static_cast<uint8_t>(byte));
    }
  }

  const size_t n = text.size();
  const size_t val_size =
      static_cast<size_t>(std::floor(static_cast<double>(n) * options.val_fraction));
  const bool train = options.split == CharLmOptions::Split::Train;
  const size_t begin = train ? 0 : n - val_size;
  const size_t end = train ? n - val_size : n;
  const size_t needed = static_cast<size_t>(block_size_) + 1;
  if (end - begin < needed) {
    const double percent = 100 * (train ? 1 - options.val_fraction : options.val_fraction);
    std::ostringstream share;
    share << (train ? "the first " : "the last ") << std::setprecision(6) << percent << "% of "
          << n;
    throw_data_error(options.key, in_quotes(options.file) + " is too short for block_size " +
                                      std::to_string(block_size_) + ": its " +
                                      (train ? "train" : "val") + " split has " +
                                      std::to_string(end - begin) + " bytes (" + share.str() +
                                      "), at least " + std::to_string(needed) +
                                      " are needed; use a longer text or a smaller block_size");
  }
  tokens_.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) tokens_.push_back(static_cast<uint8_t>(id[text[i]]));
}

Example CharLmDataset::get(size_t index) const {
  if (index >= size()) {
    throw std::out_of_range("char_lm: index " + std::to_string(index) + " >= size " +
                            std::to_string(size()));
  }
  const int64_t T = block_size_;
  at::Tensor input = at::empty({T}, at::kLong);
  at::Tensor target = at::empty({T}, at::kLong);
  int64_t* x = input.data_ptr<int64_t>();
  int64_t* y = target.data_ptr<int64_t>();
  for (int64_t t = 0; t < T; ++t) {
    x[t] = tokens_[index + static_cast<size_t>(t)];
    y[t] = tokens_[index + static_cast<size_t>(t) + 1];
  }
  return Example{input, target};
}

}  // namespace rh::data
