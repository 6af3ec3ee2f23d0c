// `type: mnist` — MNIST (or any idx-format digits set: Fashion-MNIST, KMNIST)
// from the uncompressed idx files under `root`:
//   train: train-images-idx3-ubyte, train-labels-idx1-ubyte
//   test:  t10k-images-idx3-ubyte,  t10k-labels-idx1-ubyte
// Inputs (1, H, W) float: pixels scaled to [0, 1], then (x - mean) / std.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/DataFiles.hpp"
#include "data/Dataset.hpp"

namespace rh::data {

struct MnistOptions {
  enum class Split { Train, Test };

  std::string root;  // resolved directory
  FileKey key;       // the `root:` key, for errors
  Split split = Split::Train;
  double mean = 0.1307;
  double std_dev = 0.3081;  // the `std:` key
};

class MnistDataset : public Dataset {
 public:
  // Throws ConfigError at `key` naming the file: unreadable, wrong magic number
  // (2051 images, 2049 labels), truncated or oversized for its header, image and
  // label counts that differ, a label above 9.
  explicit MnistDataset(MnistOptions options);

  size_t size() const override { return labels_.size(); }
  Example get(size_t index) const override;  // input (1, H, W) float32, target () int64
  model::Task task() const override { return model::Task::Classification; }
  int64_t num_classes() const override { return 10; }

 private:
  MnistOptions options_;
  int64_t rows_ = 0, cols_ = 0;
  std::vector<uint8_t> images_;  // the image file, header included
  std::vector<uint8_t> labels_;  // the labels, header stripped
};

}  // namespace rh::data
