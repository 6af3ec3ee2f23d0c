#include "GradBucket.hpp"

namespace rh::ddp {

BucketPlan plan_buckets(const std::vector<size_t>& order, const std::vector<size_t>& bytes,
                        size_t num_params, size_t first_cap_bytes, size_t cap_bytes) {
  BucketPlan plan;
  plan.bucket_of.assign(num_params, -1);
  size_t filled = 0;  // bytes in the current (last) bucket
  for (size_t index : order) {
    const size_t limit = plan.buckets.size() == 1 ? first_cap_bytes : cap_bytes;
    // A parameter larger than the cap gets a bucket of its own.
    if (plan.buckets.empty() || (filled > 0 && filled + bytes[index] > limit)) {
      plan.buckets.emplace_back();
      filled = 0;
    }
    plan.buckets.back().push_back(index);
    plan.bucket_of[index] = static_cast<int>(plan.buckets.size() - 1);
    filled += bytes[index];
  }
  return plan;
}

}  // namespace rh::ddp
