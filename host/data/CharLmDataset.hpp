// `type: char_lm` — a character-level language model over any text file.
//
// The vocabulary is the sorted set of bytes in the whole file (so the train
// and val splits agree on it); val is the last `val_fraction` of the text,
// train the rest. Example i of a split is the block of tokens [i, i+T) with
// the next tokens [i+1, i+T+1) as targets (T = block_size).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/DataFiles.hpp"
#include "data/Dataset.hpp"

namespace rh::data {

struct CharLmOptions {
  enum class Split { Train, Val };

  std::string file;  // resolved path of the text
  FileKey key;       // the `path:` key, for errors
  int64_t block_size = 64;
  Split split = Split::Train;
  double val_fraction = 0.1;
};

class CharLmDataset : public Dataset {
 public:
  // Throws ConfigError at `key` when the file cannot be read or the split is
  // shorter than block_size + 1 bytes.
  explicit CharLmDataset(CharLmOptions options);

  size_t size() const override { return tokens_.size() - static_cast<size_t>(block_size_); }
  Example get(size_t index) const override;  // input (T) int64, target (T) int64
  model::Task task() const override { return model::Task::LanguageModel; }
  int64_t num_classes() const override { return static_cast<int64_t>(vocabulary_.size()); }

  // Token id -> byte.
  const std::vector<uint8_t>& vocabulary() const { return vocabulary_; }

 private:
  int64_t block_size_;
  std::vector<uint8_t> vocabulary_;
  std::vector<uint8_t> tokens_;  // this split's text as token ids
};

}  // namespace rh::data
