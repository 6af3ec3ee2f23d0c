// Token shards for language-model training, memory-mapped (nothing is read
// until an example needs it, so a resume skips the data it does not use):
//
//   type: token_bin         nanoGPT's flat file (prepare.py's train.bin:
//                           the token ids, uint16 or uint32, little-endian)
//   type: megatron_indexed  Megatron-LM's indexed dataset (path_prefix.bin
//                           with its path_prefix.idx, "MMIDIDX" version 1):
//                           the documents concatenated, as Megatron's GPT
//                           dataset does, the dtype read from the .idx
//
// Example i is the window of block_size + 1 tokens at offset i x stride:
// input its first T, target its last T. The default stride T cuts the
// stream into consecutive blocks; stride 1 makes every offset an example,
// and `shuffle: true` then draws nanoGPT's random windows (each once an
// epoch). Which examples a rank reads, in which order, and where a resume
// starts are the sampler's (DistributedSampler.hpp), exact for any number
// of ranks and workers.
#pragma once

#include <cstdint>
#include <string>

#include "data/DataFiles.hpp"
#include "data/Dataset.hpp"

namespace rh::data {

struct TokenShardOptions {
  enum class Format { Bin, Megatron };
  Format format = Format::Bin;
  std::string file;         // token_bin: the .bin; megatron_indexed: the path prefix
  FileKey key;              // `path:` or `path_prefix:`, for errors
  int element_size = 2;     // token_bin's dtype: 2 (uint16) or 4 (uint32), unsigned
  int64_t block_size = 64;  // T
  int64_t stride = 0;       // tokens between examples' starts; 0: block_size
  int64_t vocab_size = 0;   // > 0: every token read must be below it
};

class TokenShardDataset : public Dataset {
 public:
  // Throws ConfigError at `key` naming the file (and the offset, for a
  // damaged .idx) when a file is missing, its size is not a whole number
  // of tokens, it is shorter than one example, or the .idx does not
  // describe the .bin.
  explicit TokenShardDataset(TokenShardOptions options);

  size_t size() const override { return examples_; }
  // input (T) int64, target (T) int64. Throws std::runtime_error naming the
  // file and the token's offset for a token >= vocab_size.
  Example get(size_t index) const override;
  // The batch (n, T) twice, written from the mapped file directly.
  bool fill_batch(const size_t* indices, size_t n, SampleKey key, at::Tensor& input,
                  at::Tensor& target) const override;
  model::Task task() const override { return model::Task::LanguageModel; }
  int64_t num_classes() const override { return vocab_size_; }

 private:
  uint64_t token(uint64_t i) const;
  // Example `index` into x[0 .. T) and y[0 .. T).
  void fill(size_t index, int64_t* x, int64_t* y) const;

  std::string bin_;  // the token file
  MappedFile map_;   // its bytes
  int element_size_ = 2;
  bool is_signed_ = false;  // Megatron's int8/int16/int32/int64
  int64_t block_size_ = 64;
  int64_t stride_ = 64;
  int64_t vocab_size_ = 0;
  size_t examples_ = 0;
};

}  // namespace rh::data
