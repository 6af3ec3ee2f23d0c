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

// The key of a sample's random choices (image transforms), with its index
// (image/SampleRng.hpp): the job's seed and the epoch.
struct SampleKey {
  uint64_t seed = 0;
  int64_t epoch = 0;
};

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
  // The example as the loader asks for it in epoch `key.epoch`: a dataset
  // with random transforms draws them from (seed, epoch, index), so any
  // worker, rank or resume gives the same bytes; the others ignore the key.
  virtual Example sample(size_t index, SampleKey key) const {
    (void)key;
    return get(index);
  }
  // Examples indices[0 .. n) as a batch's (input, target), where a dataset
  // writes them faster than the loader stacks its examples (token files:
  // straight from the file into the batch); false: the loader stacks.
  virtual bool fill_batch(const size_t* indices, size_t n, SampleKey key, at::Tensor& input,
                          at::Tensor& target) const {
    (void)indices, (void)n, (void)key, (void)input, (void)target;
    return false;
  }
  virtual model::Task task() const = 0;
  // Classes (classification) or vocabulary size (language model).
  virtual int64_t num_classes() const = 0;
};

// Builds the dataset of a validated `dataset:` subtree (see DataSchema.hpp).
// `job_dir` resolves relative file paths. Throws config::ConfigError naming
// the key (and file/line for CSV rows) for missing or corrupt data files.
std::shared_ptr<Dataset> build_dataset(const config::Node& cfg, const std::string& job_dir);

// What build_dataset() and loader_options() would refuse without reading a
// file, for every data.<split> of a validated job: an image pipeline (its
// transforms built), an image dataset's unlabelled forms, keys that
// exclude each other. Throws the first config::ConfigError.
void check_loaders(const config::Node& job);

}  // namespace rh::data
