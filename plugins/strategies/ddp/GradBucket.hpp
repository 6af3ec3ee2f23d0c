// Gradient buckets of the ddp strategy: which parameters are all-reduced
// together. Buckets follow the order gradients become ready (reverse
// parameter order at first, then the order observed in the first iteration),
// the first capped at `first_cap_bytes` so communication starts early in
// backward, the others at `cap_bytes`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rh::ddp {

struct BucketPlan {
  std::vector<std::vector<size_t>> buckets;  // parameter indices, in ready order
  std::vector<int> bucket_of;                // parameter index -> bucket (-1: not bucketed)
};

// `order`: parameter indices in the order their gradients are expected;
// `bytes[i]`: size of parameter i's gradient. `num_params` sizes bucket_of.
BucketPlan plan_buckets(const std::vector<size_t>& order, const std::vector<size_t>& bytes,
                        size_t num_params, size_t first_cap_bytes, size_t cap_bytes);

}  // namespace rh::ddp
