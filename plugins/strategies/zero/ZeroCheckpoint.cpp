// Strategy `zero`: checkpoints: the host's UnitParams requests (whole
// values adopted, stage 3's units gathered or freed for a full state dict)
// and StateExport / StateImport (the loss scaler, the step count).
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "ZeroStrategy.hpp"
#include "rh/cpp/torch.hpp"

namespace {

constexpr const char* kScaler =
    "loss_scaler";  // scale, cur_iter, last_overflow_iter, cur_hysteresis

}  // namespace

namespace rh::zero {

void ZeroStrategy::unit_params(int32_t unit, rh_UnitParamsOp op) {
  if (op == RH_UNIT_PARAMS_ADOPT) {
    // The host wrote whole values: every group built from the parameters
    // that hold them now (stages 1/2 and persistent groups: all of them;
    // stage 3: this unit's, which the host gathered first).
    // One rank in float32: the parameters are the masters, nothing to take.
    for (Group& g : groups_) {
      if (alias_ || (g.sharded && (g.unit != unit || !g.whole))) continue;
      master_from(g, [&](const Member& m) { return param(m.param).reshape({-1}).to(at::kFloat); });
    }
    if (stage_ < 3) return;
  }
  // One rank: every parameter is always whole.
  if (stage_ < 3 || unit < 0 || alone()) return;
  const auto& list = unit_groups_.at(static_cast<size_t>(unit));
  if (op == RH_UNIT_PARAMS_GATHER) {
    for (size_t k : list) start_gather(groups_[k]);
    for (size_t k : list) finish_gather(groups_[k]);
  } else {
    for (size_t k : list) free_params(groups_[k]);
  }
}

// The loss scaler's state and the step count. The shards themselves are
// the host's: it saves them as slices of logical tensors and reshards them
// for any stage and world size at resume (docs/checkpoint-format.md).
void ZeroStrategy::state_export(rh_StateDict* dict) {
  if (scaler_) {
    const rh::zero::LossScalerState s = scaler_->state();
    at::Tensor t = at::tensor(
        {s.scale, static_cast<double>(s.cur_iter), static_cast<double>(s.last_overflow_iter),
         static_cast<double>(s.cur_hysteresis)},
        at::kDouble);
    DLManagedTensor* dl = rh::export_tensor(t);
    rh_Error* err = host_->StateDict_PutTensor(dict, kScaler, std::strlen(kScaler), dl);
    dl->deleter(dl);
    rh::check(host_, err);
  }
  put_longs(dict, "steps", {steps_});
}

// An empty dict: another strategy wrote the checkpoint (nothing of ours).
void ZeroStrategy::state_import(const rh_StateDict* dict) {
  std::vector<int64_t> steps;
  if (get_longs(dict, "steps", steps) && steps.size() == 1) steps_ = steps[0];
  if (!scaler_) return;
  const DLManagedTensor* dl = nullptr;
  rh_Error* err = host_->StateDict_GetTensor(dict, kScaler, std::strlen(kScaler), &dl);
  if (err != nullptr && host_->Error_Code(err) == RH_ERROR_NOT_FOUND) {
    host_->Error_Destroy(err);
    log(RH_LOG_WARN,
        "strategy 'zero': the checkpoint has no loss scaler state (fp16 was off "
        "when it was written); the scaler starts afresh");
    return;
  }
  rh::check(host_, err);
  at::Tensor t = rh::borrow_tensor(dl).to(at::kDouble).contiguous();
  if (t.numel() != 4)
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT, "strategy 'zero': strategy.loss_scaler has " +
                                                       std::to_string(t.numel()) +
                                                       " values, expected 4");
  const double* v = t.data_ptr<double>();
  rh::zero::LossScalerState s;
  s.scale = v[0];
  s.cur_iter = static_cast<int64_t>(v[1]);
  s.last_overflow_iter = static_cast<int64_t>(v[2]);
  s.cur_hysteresis = static_cast<int>(v[3]);
  try {
    scaler_->load_state(s);
  } catch (const std::invalid_argument& e) {
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                        std::string("strategy 'zero': strategy.loss_scaler: ") + e.what());
  }
}

void ZeroStrategy::put_longs(rh_StateDict* dict, const char* key,
                             const std::vector<int64_t>& values) {
  rh::put_longs(host_, dict, key, values);
}

bool ZeroStrategy::get_longs(const rh_StateDict* dict, const char* key, std::vector<int64_t>& out) {
  return rh::get_longs(host_, dict, key, out, "strategy 'zero'");
}

}  // namespace rh::zero
