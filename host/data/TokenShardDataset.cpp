#include "data/TokenShardDataset.hpp"

#include <ATen/ATen.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace rh::data {
namespace {

uint64_t read_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | p[b];
  return v;
}

// Megatron-LM's DType codes (megatron/core/datasets/indexed_dataset.py):
// the integer ones a token stream uses.
struct MegatronDtype {
  uint8_t code;
  int size;
  bool is_signed;
  const char* name;
};
constexpr MegatronDtype kMegatronDtypes[] = {
    {1, 1, false, "uint8"}, {2, 1, true, "int8"},  {3, 2, true, "int16"},
    {4, 4, true, "int32"},  {5, 8, true, "int64"}, {8, 2, false, "uint16"},
};

// Checks `prefix`.idx against the .bin of `bin_bytes` bytes; returns the
// element size and signedness. The layout (version 1): "MMIDIDX\0\0",
// uint64 version, uint8 dtype code, uint64 sequence count S, uint64
// document count D, int32 lengths[S], int64 byte offsets[S] into the .bin,
// int64 document starts[D] (sequence indices, 0 first, S last).
void check_megatron_index(const std::string& idx, const MappedFile& m, uint64_t bin_bytes,
                          const FileKey& key, int& size, bool& is_signed) {
  const auto fail = [&](uint64_t offset, const std::string& what) {
    throw_data_error(key, in_quotes(idx) + ": at byte " + std::to_string(offset) + ": " + what +
                              " (not a Megatron-LM MMIDIDX index of its .bin, or damaged)");
  };
  static const uint8_t kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
  constexpr uint64_t kHeader = 9 + 8 + 1 + 8 + 8;
  const uint8_t* data = m.data();
  if (m.size() < kHeader) fail(m.size(), "the file ends inside its 34-byte header");
  if (std::memcmp(data, kMagic, 9) != 0) fail(0, "no MMIDIDX magic");
  const uint64_t version = read_le(data + 9, 8);
  if (version != 1) fail(9, "version " + std::to_string(version) + ", only 1 is read");
  const MegatronDtype* dtype = nullptr;
  for (const MegatronDtype& d : kMegatronDtypes)
    if (d.code == data[17]) dtype = &d;
  if (dtype == nullptr)
    fail(17, "dtype code " + std::to_string(data[17]) + " is not an integer token type");
  size = dtype->size;
  is_signed = dtype->is_signed;
  const uint64_t S = read_le(data + 18, 8);
  const uint64_t D = read_le(data + 26, 8);
  const uint64_t lengths = kHeader, offsets = lengths + 4 * S, docs = offsets + 8 * S;
  if (S > m.size() || D > m.size() || docs + 8 * D > m.size())
    fail(18, std::to_string(S) + " sequences and " + std::to_string(D) +
                 " document starts need more than the file's " + std::to_string(m.size()) +
                 " bytes");
  uint64_t next = 0;  // where sequence i must start: right after sequence i-1
  for (uint64_t i = 0; i < S; ++i) {
    const auto length = static_cast<int32_t>(read_le(data + lengths + 4 * i, 4));
    const uint64_t at = read_le(data + offsets + 8 * i, 8);
    if (length < 0)
      fail(lengths + 4 * i, "sequence " + std::to_string(i) + " has a negative length");
    if (at != next)
      fail(offsets + 8 * i, "sequence " + std::to_string(i) + " starts at .bin byte " +
                                std::to_string(at) + ", expected " + std::to_string(next) +
                                " (the sequences must follow one another)");
    next = at + static_cast<uint64_t>(length) * static_cast<uint64_t>(size);
  }
  if (next != bin_bytes)
    fail(offsets, "its sequences end at .bin byte " + std::to_string(next) + ", the .bin has " +
                      std::to_string(bin_bytes) + " (" + dtype->name + " tokens)");
  uint64_t previous = 0;
  for (uint64_t d = 0; d < D; ++d) {
    const uint64_t start = read_le(data + docs + 8 * d, 8);
    if ((d == 0 && start != 0) || start < previous || start > S || (d + 1 == D && start != S))
      fail(docs + 8 * d, "document start " + std::to_string(d) + " is " + std::to_string(start) +
                             " (starts rise from 0 to the sequence count " + std::to_string(S) +
                             ")");
    previous = start;
  }
}

}  // namespace

TokenShardDataset::TokenShardDataset(TokenShardOptions options)
    : bin_(options.format == TokenShardOptions::Format::Megatron ? options.file + ".bin"
                                                                 : options.file),
      map_(bin_,
           options.format == TokenShardOptions::Format::Megatron ? "Megatron .bin" : "token file",
           options.key),
      element_size_(options.element_size),
      block_size_(options.block_size),
      stride_(options.stride > 0 ? options.stride : options.block_size),
      vocab_size_(options.vocab_size) {
  if (block_size_ < 1) throw std::invalid_argument("token shards: need block_size >= 1");
  if (options.format == TokenShardOptions::Format::Megatron) {
    const std::string idx = options.file + ".idx";
    check_megatron_index(idx, MappedFile(idx, "Megatron .idx", options.key), map_.size(),
                         options.key, element_size_, is_signed_);
  }
  const auto fail = [&](const std::string& what) {
    throw_data_error(options.key, in_quotes(bin_) + ": " + what);
  };
  const size_t bytes = map_.size();
  if (bytes % static_cast<size_t>(element_size_) != 0)
    fail(std::to_string(bytes) + " bytes is not a whole number of " +
         std::to_string(element_size_) + "-byte tokens (the dtype is not the file's, or it " +
         "is cut short)");
  const uint64_t tokens = bytes / static_cast<size_t>(element_size_);
  const auto window = static_cast<uint64_t>(block_size_) + 1;
  if (tokens < window)
    fail(std::to_string(tokens) +
         " tokens, fewer than one example's block_size + 1 = " + std::to_string(window));
  examples_ = static_cast<size_t>((tokens - window) / static_cast<uint64_t>(stride_) + 1);
  if (stride_ == 1) ::madvise(const_cast<uint8_t*>(map_.data()), bytes, MADV_RANDOM);
}

uint64_t TokenShardDataset::token(uint64_t i) const {
  const uint64_t byte = i * static_cast<uint64_t>(element_size_);
  uint64_t v = read_le(map_.data() + byte, element_size_);
  if (is_signed_) {
    const int shift = 64 - 8 * element_size_;  // sign-extends Megatron's int16/int32
    const int64_t s = static_cast<int64_t>(v << shift) >> shift;
    if (s < 0)
      throw std::runtime_error(in_quotes(bin_) + ": token " + std::to_string(i) + " (byte " +
                               std::to_string(byte) + ") is negative, " + std::to_string(s));
    v = static_cast<uint64_t>(s);
  }
  if (vocab_size_ > 0 && v >= static_cast<uint64_t>(vocab_size_))
    throw std::runtime_error(in_quotes(bin_) + ": token " + std::to_string(i) + " (byte " +
                             std::to_string(byte) + ") is " + std::to_string(v) +
                             ", not below vocab_size " + std::to_string(vocab_size_));
  return v;
}

void TokenShardDataset::fill(size_t index, int64_t* x, int64_t* y) const {
  if (index >= examples_)
    throw std::out_of_range("token shards: index " + std::to_string(index) + " >= size " +
                            std::to_string(examples_));
  const int64_t T = block_size_;
  const uint64_t start = static_cast<uint64_t>(index) * static_cast<uint64_t>(stride_);
  const uint8_t* p = map_.data() + start * static_cast<uint64_t>(element_size_);
  // nanoGPT's and Megatron's usual unsigned tokens, little-endian as this
  // host: read as they lie (memcpy: the file need not be aligned); the
  // checked, general path for the rest.
  if (!is_signed_ && (element_size_ == 2 || element_size_ == 4) &&
      __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) {
    uint64_t largest = 0;
    for (int64_t t = 0; t <= T; ++t) {
      uint64_t v;
      if (element_size_ == 2) {
        uint16_t u;
        std::memcpy(&u, p + 2 * t, 2);
        v = u;
      } else {
        uint32_t u;
        std::memcpy(&u, p + 4 * t, 4);
        v = u;
      }
      largest = std::max(largest, v);
      if (t < T) x[t] = static_cast<int64_t>(v);
      if (t > 0) y[t - 1] = static_cast<int64_t>(v);
    }
    if (vocab_size_ <= 0 || largest < static_cast<uint64_t>(vocab_size_)) return;
    // A token out of range: the checked path names it.
  }
  int64_t previous = static_cast<int64_t>(token(start));
  for (int64_t t = 0; t < T; ++t) {
    x[t] = previous;
    previous = static_cast<int64_t>(token(start + static_cast<uint64_t>(t) + 1));
    y[t] = previous;
  }
}

Example TokenShardDataset::get(size_t index) const {
  at::Tensor input = at::empty({block_size_}, at::kLong);
  at::Tensor target = at::empty({block_size_}, at::kLong);
  fill(index, input.data_ptr<int64_t>(), target.data_ptr<int64_t>());
  return Example{input, target};
}

bool TokenShardDataset::fill_batch(const size_t* indices, size_t n, SampleKey, at::Tensor& input,
                                   at::Tensor& target) const {
  const int64_t rows = static_cast<int64_t>(n);
  input = at::empty({rows, block_size_}, at::kLong);
  target = at::empty({rows, block_size_}, at::kLong);
  int64_t* x = input.data_ptr<int64_t>();
  int64_t* y = target.data_ptr<int64_t>();
  for (size_t i = 0; i < n; ++i)
    fill(indices[i], x + static_cast<int64_t>(i) * block_size_,
         y + static_cast<int64_t>(i) * block_size_);
  return true;
}

}  // namespace rh::data
