// Which dataset indices this rank sees, in which order, each epoch.
//
// Like torch.utils.data.DistributedSampler: every epoch the whole index range
// is shuffled with seed + epoch (same permutation on every rank), padded (or
// trimmed with drop_last) to a multiple of world_size, and rank r takes
// indices r, r + world, r + 2·world... so ranks are disjoint and every sample
// is seen once per epoch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rh::data {

class DistributedSampler {
 public:
  DistributedSampler(size_t dataset_size, int rank, int world_size, bool shuffle, uint64_t seed,
                     bool drop_last);
  void set_epoch(int64_t epoch);
  // This rank's indices for the current epoch, in order.
  std::vector<size_t> indices() const;
  // The same from position `start` of the epoch's global order on (a run
  // resumed after `start` samples with another global batch): rank r takes
  // positions start + r, start + r + world, ..., as many on every rank
  // (ceil of the rest over the world, or floor with drop_last), repeating
  // from the start of the order past its end. indices(0) == indices().
  std::vector<size_t> indices(size_t start) const;
  // indices(start).size(), without drawing the order.
  size_t num_samples(size_t start) const;
  // How many of indices(start) are real samples (a prefix).
  size_t num_real_samples(size_t start) const;
  size_t num_samples() const;  // per rank per epoch
  // How many of indices() are real samples: the rest (at the end) repeat
  // earlier ones only to even out the ranks, and evaluation must not count
  // them (299 samples on 2 ranks: rank 1 has 149 real + 1 padding).
  size_t num_real_samples() const;

 private:
  size_t dataset_size_;
  int rank_;
  int world_size_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0;
};

}  // namespace rh::data
