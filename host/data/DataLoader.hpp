// Batches a dataset for one rank: sampler order, batch_size, drop_last, and
// `num_workers` background threads preparing up to `prefetch` batches ahead.
// Resumable: start_epoch(epoch, skip) starts at batch `skip` without reading
// the skipped examples.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>

#include "data/Dataset.hpp"
#include "data/DistributedSampler.hpp"

namespace rh::config {
class Node;
}

namespace rh::data {

struct Batch {
  at::Tensor input;   // (B, ...) stacked Example::input
  at::Tensor target;  // (B) or (B, T)
  // The first `num_real` examples are real; the rest are the sampler's
  // padding (repeats that even out the ranks), which metrics must not count.
  size_t num_real = 0;
};

struct LoaderOptions {
  size_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;  // drop the last incomplete batch (and sampler padding)
  int num_workers = 1;     // background threads; 0 = load in the caller's thread
  int prefetch = 2;        // batches prepared ahead, in all
  // Workers kept through the end of an epoch, waiting for the next (else
  // joined and started again each epoch).
  bool persistent_workers = false;
  // Batches in page-locked memory, for an asynchronous copy to a GPU. Only
  // where a GPU is used: the Runner clears it on a CPU (PyTorch ignores it
  // there too).
  bool pin_memory = false;
  uint64_t seed = 0;
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<Dataset> dataset, LoaderOptions options, int rank, int world_size);
  ~DataLoader();  // stops and joins the workers
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts epoch `epoch` at batch `skip_batches` (resume).
  void start_epoch(int64_t epoch, size_t skip_batches = 0);
  // Starts epoch `epoch` at sample `sample_offset` of its global order (a
  // resume with another global batch, DistributedSampler::indices(start)):
  // the epoch's batches are numbered on as if `skip_batches` had been done,
  // so it still ends at batches_per_epoch(); skip_batches must be
  // batches_per_epoch() - batches_from(sample_offset).
  void start_epoch_at_sample(int64_t epoch, size_t skip_batches, size_t sample_offset);
  // The batches left in an epoch from global sample `sample_offset` on.
  size_t batches_from(size_t sample_offset) const;
  // The next batch of the epoch, or nullopt at its end. Rethrows a worker's error.
  std::optional<Batch> next();
  size_t batches_per_epoch() const;
  // Batches prepared and waiting when next() was last called: near 0, the
  // step waits on the data; near prefetch, the data waits on the step.
  size_t queue_depth() const;
  const Dataset& dataset() const { return *dataset_; }
  const LoaderOptions& options() const { return options_; }

 private:
  struct Impl;
  std::shared_ptr<Dataset> dataset_;
  LoaderOptions options_;
  std::unique_ptr<Impl> impl_;
};

// Options of a validated `data.train`/`data.val`/`data.test` subtree.
LoaderOptions loader_options(const config::Node& cfg, uint64_t seed);

}  // namespace rh::data
