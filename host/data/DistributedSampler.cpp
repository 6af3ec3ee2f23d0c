#include "data/DistributedSampler.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

namespace rh::data {
namespace {

// Uniform in [0, n) by rejection: unlike std::uniform_int_distribution (whose
// algorithm each standard library picks), the same on every platform.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // a multiple of n
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return x % n;
}

}  // namespace

DistributedSampler::DistributedSampler(size_t dataset_size, int rank, int world_size, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      rank_(rank),
      world_size_(world_size),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("DistributedSampler: rank " + std::to_string(rank) +
                                " is not in [0, world_size " + std::to_string(world_size) + ")");
  }
}

void DistributedSampler::set_epoch(int64_t epoch) { epoch_ = epoch; }

size_t DistributedSampler::num_samples() const {
  const size_t world = static_cast<size_t>(world_size_);
  return drop_last_ ? dataset_size_ / world : (dataset_size_ + world - 1) / world;
}

size_t DistributedSampler::num_samples(size_t start) const {
  const size_t world = static_cast<size_t>(world_size_);
  const size_t total = num_samples() * world;
  const size_t rest = start < total ? total - start : 0;
  return drop_last_ ? rest / world : (rest + world - 1) / world;
}

size_t DistributedSampler::num_real_samples() const { return num_real_samples(0); }

std::vector<size_t> DistributedSampler::indices() const { return indices(0); }

std::vector<size_t> DistributedSampler::indices(size_t start) const {
  // The epoch's order, the same on every rank.
  std::vector<size_t> order(dataset_size_);
  std::iota(order.begin(), order.end(), size_t{0});
  if (shuffle_) {
    std::mt19937_64 rng(seed_ + static_cast<uint64_t>(epoch_));
    for (size_t i = order.size(); i > 1; --i) {  // Fisher-Yates
      std::swap(order[i - 1], order[uniform_below(rng, i)]);
    }
  }

  // Padded by repeating from the start (or trimmed) to num_samples() * world
  // positions, then every world-th position from start + rank.
  const size_t world = static_cast<size_t>(world_size_);
  const size_t count = num_samples(start);
  std::vector<size_t> mine;
  mine.reserve(count);
  for (size_t j = 0; j < count && dataset_size_ > 0; ++j)
    mine.push_back(order[(start + static_cast<size_t>(rank_) + j * world) % dataset_size_]);
  return mine;
}

size_t DistributedSampler::num_real_samples(size_t start) const {
  // Positions below dataset_size are real: start + rank + j * world < n.
  const size_t world = static_cast<size_t>(world_size_);
  const size_t first = start + static_cast<size_t>(rank_);
  const size_t real = first < dataset_size_ ? (dataset_size_ - first + world - 1) / world : 0;
  return std::min(real, num_samples(start));
}

}  // namespace rh::data
