// Datasets, the distributed sampler and the loader.
//
// A Dataset maps an index to one example (input, target). The sampler decides
// which indices this rank sees in which order each epoch; the loader batches
// them (stacking examples) on background threads.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "model/Model.hpp"

namespace rh::config {
class Node;
}

namespace rh::data {

struct Example {
  at::Tensor input;   // one example, no batch dim: (F), (3, H, W) float; (T) int64
  at::Tensor target;  // () int64 class id; (T) int64 next tokens
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  // Thread-safe (called from loader threads); deterministic for an index.
  virtual Example get(size_t index) const = 0;
  virtual model::Task task() const = 0;
  // Classes (classification) or vocabulary size (language model).
  virtual int64_t num_classes() const = 0;
};

// Builds the dataset of a validated `dataset:` subtree (see DataSchema.hpp).
// `job_dir` resolves relative file paths. Throws config::ConfigError naming
// the key (and file/line for CSV rows) for missing or corrupt data files.
std::shared_ptr<Dataset> build_dataset(const config::Node& cfg, const std::string& job_dir);

}  // namespace rh::data
