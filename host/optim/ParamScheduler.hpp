// Parameter schedulers (MMEngine's param_scheduler): LinearLR, ConstantLR,
// StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, PolyLR, by epoch or
// by iteration, with begin/end, convert_to_iter_based, and several chained.
//
// The lr is a closed-form function of progress (iterations and epochs done),
// so resuming needs only the counters and lands on exactly the same lr.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace rh::config {
class Node;
}

namespace rh::optim {

class OptimWrapper;

class ParamSchedulers {
 public:
  // `cfg`: the validated `param_scheduler:` (a map or a list), or nullptr
  // (constant lr). `iters_per_epoch` converts epoch-based schedulers with
  // convert_to_iter_based. Takes the optimizer's current lrs as base lrs, so
  // build it after auto_scale_lr.
  ParamSchedulers(const config::Node* cfg, OptimWrapper& optim, int64_t iters_per_epoch);
  ~ParamSchedulers();

  // Sets the optimizer's lrs for the given progress: `iters_done` train
  // iterations and `epochs_done` finished epochs. Called at start (0, 0),
  // after every iteration and after every epoch, and on resume.
  void apply(int64_t iters_done, int64_t epochs_done);
  std::vector<double> lrs_at(int64_t iters_done, int64_t epochs_done) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  OptimWrapper& optim_;
};

}  // namespace rh::optim
