#include "host/data/CountingDataset.hpp"

#include <torch/torch.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace rh::data::test {

Example CountingDataset::get(size_t index) const {
  ++reads_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    read_.insert(index);
  }
  if (jitter_) {
    // Later indices of a batch finish first, and batches take different times.
    std::this_thread::sleep_for(std::chrono::microseconds(((index * 7919) % 13) * 100));
  }
  if (static_cast<int64_t>(index) == throw_at_) {
    throw std::runtime_error("cannot decode example " + std::to_string(index));
  }
  return Example{torch::full({1}, static_cast<double>(index), torch::kFloat),
                 torch::scalar_tensor(static_cast<int64_t>(index), torch::kLong)};
}

}  // namespace rh::data::test
