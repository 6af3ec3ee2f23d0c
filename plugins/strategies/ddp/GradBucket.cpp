#include "GradBucket.hpp"

#include <stdexcept>

namespace rh::ddp {

BucketPlan plan_buckets(const std::vector<size_t>& order, const std::vector<size_t>& bytes,
                        size_t num_params, size_t first_cap_bytes, size_t cap_bytes) {
  BucketPlan plan;
  plan.bucket_of.assign(num_params, -1);
  size_t filled = 0;  // bytes in the current (last) bucket
  for (size_t index : order) {
    const size_t limit = plan.buckets.size() == 1 ? first_cap_bytes : cap_bytes;
    // PyTorch's rule (Reducer's compute_bucket_assignment_by_size): a bucket
    // closes once it holds the cap or more, the parameter that crossed it
    // included. So the first bucket of an MLP whose last hidden layer is
    // 4 MB takes that layer (and goes out while backward goes on), where
    // "never above the cap" left it for the second bucket, which could only
    // leave once backward had ended: 1.2 x PyTorch DDP's step across hosts
    // (tools/bench/bench_multinode.sh), ~1.0 with this rule.
    if (plan.buckets.empty() || filled >= limit) {
      plan.buckets.emplace_back();
      filled = 0;
    }
    plan.buckets.back().push_back(index);
    plan.bucket_of[index] = static_cast<int>(plan.buckets.size() - 1);
    filled += bytes[index];
  }
  return plan;
}

void flatten_plan(const BucketPlan& plan, std::vector<int64_t>& flat,
                  std::vector<int64_t>& lengths) {
  flat.clear();
  lengths.clear();
  for (const auto& bucket : plan.buckets) {
    lengths.push_back(static_cast<int64_t>(bucket.size()));
    for (size_t i : bucket) flat.push_back(static_cast<int64_t>(i));
  }
}

BucketPlan unflatten_plan(const std::vector<int64_t>& flat, const std::vector<int64_t>& lengths,
                          const std::vector<size_t>& bucketed, size_t num_params) {
  std::vector<char> wanted(num_params, 0);
  for (size_t i : bucketed) wanted[i] = 1;
  BucketPlan plan;
  plan.bucket_of.assign(num_params, -1);
  size_t next = 0;
  for (int64_t length : lengths) {
    if (length <= 0)
      throw std::invalid_argument("a bucket of " + std::to_string(length) + " parameters");
    if (static_cast<uint64_t>(length) > flat.size() - next)
      throw std::invalid_argument("the bucket lengths add up to more than the " +
                                  std::to_string(flat.size()) + " parameter indices");
    plan.buckets.emplace_back();
    for (int64_t k = 0; k < length; ++k, ++next) {
      const int64_t i = flat[next];
      if (i < 0 || static_cast<uint64_t>(i) >= num_params || !wanted[i])
        throw std::invalid_argument("parameter index " + std::to_string(i) +
                                    " is not a trainable parameter of this model (it has " +
                                    std::to_string(num_params) + " parameters)");
      if (plan.bucket_of[i] >= 0)
        throw std::invalid_argument("parameter index " + std::to_string(i) + " is in two buckets");
      plan.bucket_of[i] = static_cast<int>(plan.buckets.size() - 1);
      plan.buckets.back().push_back(static_cast<size_t>(i));
    }
  }
  if (next != flat.size())
    throw std::invalid_argument("the bucket lengths add up to " + std::to_string(next) + ", not " +
                                std::to_string(flat.size()));
  if (next != bucketed.size())
    throw std::invalid_argument("it buckets " + std::to_string(next) +
                                " parameters, this model trains " +
                                std::to_string(bucketed.size()));
  return plan;
}

}  // namespace rh::ddp
