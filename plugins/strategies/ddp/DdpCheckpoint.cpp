// Strategy `ddp`: StateExport / StateImport: the bucket plan (so that a
// resumed run sums in the same buckets) and find_unused_parameters'
// prediction.
#include <ATen/ATen.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "DdpStrategy.hpp"
#include "rh/cpp/torch.hpp"

namespace {

// State keys (the runner saves them as "strategy.<key>").
constexpr const char* kPlanParams = "bucket_plan.params";    // indices, bucket after bucket
constexpr const char* kPlanLengths = "bucket_plan.lengths";  // parameters per bucket
// first_bucket_mb and bucket_cap_mb in bytes, and 1 once rebuilt from the
// observed order (0: still the initial reverse-order plan)
constexpr const char* kPlanMeta = "bucket_plan.meta";
constexpr const char* kUnusedEverywhere = "unused_everywhere";  // per parameter, 0/1

}  // namespace

namespace rh::ddp {

// The bucket plan, once rebuilt from the observed order: a resumed run
// must sum in the same buckets as the uninterrupted one. Also the caps it
// was planned with and, with find_unused_parameters, which parameters no
// rank had a gradient for in the last step (the next step's prediction).
void DdpStrategy::state_export(rh_StateDict* dict) {
  std::vector<int64_t> flat, lengths;
  rh::ddp::flatten_plan(plan_, flat, lengths);
  put_longs(dict, kPlanParams, flat);
  put_longs(dict, kPlanLengths, lengths);
  put_longs(
      dict, kPlanMeta,
      {static_cast<int64_t>(first_cap_bytes_), static_cast<int64_t>(cap_bytes_), rebuilt_ ? 1 : 0});
  if (find_unused_)
    put_longs(dict, kUnusedEverywhere,
              std::vector<int64_t>(unused_everywhere_.begin(), unused_everywhere_.end()));
}

void DdpStrategy::state_import(const rh_StateDict* dict) {
  std::vector<int64_t> flat, lengths, meta;
  if (!get_longs(dict, kPlanParams, flat) || !get_longs(dict, kPlanLengths, lengths) ||
      !get_longs(dict, kPlanMeta, meta)) {
    log(RH_LOG_WARN,
        "strategy 'ddp': the checkpoint has no bucket plan (another strategy or an older "
        "runner-host wrote it): "
        "buckets are planned again after the first step, so gradients may be summed in another "
        "order than in the run that wrote it");
    return;
  }
  if (meta.size() != 3)
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                        "strategy 'ddp': checkpoint entry 'strategy." + std::string(kPlanMeta) +
                            "' has " + std::to_string(meta.size()) + " values, expected 3");
  BucketPlan plan;
  try {
    plan = rh::ddp::unflatten_plan(flat, lengths, trainable_, numel_.size());
  } catch (const std::invalid_argument& e) {
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                        "strategy 'ddp': the bucket plan in the checkpoint (strategy." +
                            std::string(kPlanParams) + ", strategy." + kPlanLengths +
                            ") does not fit this model: " + e.what());
  }
  const bool rebuilt = meta[2] != 0;
  if (meta[0] != static_cast<int64_t>(first_cap_bytes_) ||
      meta[1] != static_cast<int64_t>(cap_bytes_)) {
    log(RH_LOG_WARN,
        "strategy 'ddp': first_bucket_mb / bucket_cap_mb differ from the checkpoint's: buckets "
        "are planned again from its gradient order with the new sizes, so gradients are summed "
        "in another order than in the run that wrote it");
    std::vector<size_t> order(flat.begin(), flat.end());
    plan = rh::ddp::plan_buckets(order, bytes_, numel_.size(), first_cap_bytes_, cap_bytes_);
  }
  set_plan(std::move(plan));
  // No second rebuild: it would see another first step (alone: none).
  rebuilt_ = rebuilt;
  record_order_ = !rebuilt && !alone();
  std::vector<int64_t> unused;
  if (find_unused_ && get_longs(dict, kUnusedEverywhere, unused)) {
    if (unused.size() != unused_everywhere_.size())
      throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                          "strategy 'ddp': checkpoint entry 'strategy." +
                              std::string(kUnusedEverywhere) + "' has " +
                              std::to_string(unused.size()) + " values, this model has " +
                              std::to_string(unused_everywhere_.size()) + " parameters");
    for (size_t i = 0; i < unused.size(); ++i) unused_everywhere_[i] = unused[i] != 0 ? 1 : 0;
  }
}

void DdpStrategy::put_longs(rh_StateDict* dict, const char* key,
                            const std::vector<int64_t>& values) {
  rh::put_longs(host_, dict, key, values);
}

bool DdpStrategy::get_longs(const rh_StateDict* dict, const char* key, std::vector<int64_t>& out) {
  return rh::get_longs(host_, dict, key, out, "strategy 'ddp'");
}

}  // namespace rh::ddp
