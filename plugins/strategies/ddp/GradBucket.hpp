// Gradient buckets of the ddp strategy: which parameters are all-reduced
// together. Buckets follow the order gradients become ready (reverse
// parameter order at first, then the order observed in the first iteration),
// the first closed once it holds `first_cap_bytes` so communication starts
// early in backward, the others once they hold `cap_bytes` (as PyTorch's
// DDP: the parameter that crosses the cap is the bucket's last).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
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

// A plan as a checkpoint stores it: every bucket's parameter indices one
// after the other (`flat`), and each bucket's length (`lengths`).
void flatten_plan(const BucketPlan& plan, std::vector<int64_t>& flat,
                  std::vector<int64_t>& lengths);

// The plan `flat`/`lengths` describe, checked against the model: every index
// of `bucketed` (the parameters that need buckets) exactly once, no other,
// no empty bucket. Throws std::invalid_argument saying what does not fit.
BucketPlan unflatten_plan(const std::vector<int64_t>& flat, const std::vector<int64_t>& lengths,
                          const std::vector<size_t>& bucketed, size_t num_params);

}  // namespace rh::ddp
