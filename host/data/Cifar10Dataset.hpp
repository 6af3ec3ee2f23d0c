// `type: cifar10` — CIFAR-10, binary version, from the files under `root`:
//   train: data_batch_1.bin .. data_batch_5.bin      test: test_batch.bin
// Each record is 1 label byte and 3072 pixel bytes (1024 red, 1024 green,
// 1024 blue, row-major 32x32). Inputs (3, 32, 32) float: pixels scaled to
// [0, 1], then (x - mean[c]) / std[c] per channel.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/DataFiles.hpp"
#include "data/Dataset.hpp"

namespace rh::data {

struct Cifar10Options {
  enum class Split { Train, Test };

  std::string root;  // resolved directory
  FileKey key;       // the `root:` key, for errors
  Split split = Split::Train;
  std::array<double, 3> mean = {0.4914, 0.4822, 0.4465};
  std::array<double, 3> std_dev = {0.2470, 0.2435, 0.2616};
};

class Cifar10Dataset : public Dataset {
 public:
  static constexpr size_t kImageBytes = 3 * 32 * 32;
  static constexpr size_t kRecordBytes = 1 + kImageBytes;

  // Throws ConfigError at `key` naming the file: unreadable, empty, a size that
  // is not a multiple of 3073 bytes, a label above 9.
  explicit Cifar10Dataset(Cifar10Options options);

  size_t size() const override { return records_.size() / kRecordBytes; }
  Example get(size_t index) const override;  // input (3, 32, 32) float32, target () int64
  model::Task task() const override { return model::Task::Classification; }
  int64_t num_classes() const override { return 10; }

 private:
  Cifar10Options options_;
  std::vector<uint8_t> records_;  // every file's records, in file order
};

}  // namespace rh::data
