// A dataset for loader tests: example i is input (1) float = i, target ()
// int64 = i. It counts and records its reads, can throw at one index, and can
// sleep a little per read so that worker threads finish out of order.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>

#include "data/Dataset.hpp"

namespace rh::data::test {

class CountingDataset : public Dataset {
 public:
  explicit CountingDataset(size_t size, int64_t throw_at = -1, bool jitter = false)
      : size_(size), throw_at_(throw_at), jitter_(jitter) {}

  size_t size() const override { return size_; }
  Example get(size_t index) const override;
  model::Task task() const override { return model::Task::Classification; }
  int64_t num_classes() const override { return static_cast<int64_t>(size_); }

  size_t reads() const { return reads_; }
  std::multiset<size_t> read_indices() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return read_;
  }

 private:
  size_t size_;
  int64_t throw_at_;
  bool jitter_;
  mutable std::atomic<size_t> reads_{0};
  mutable std::mutex mutex_;
  mutable std::multiset<size_t> read_;
};

}  // namespace rh::data::test
