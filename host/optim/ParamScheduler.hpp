// Parameter schedulers (MMEngine's param_scheduler): LinearLR, ConstantLR,
// StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, PolyLR, by epoch or
// by iteration, with begin/end, convert_to_iter_based, and several chained.
//
// The lr is a closed-form function of progress (iterations and epochs done),
// so resuming needs only the counters and lands on exactly the same lr:
//
//   lr_g(iters, epochs) = base_lr_g × Π_i factor_i(t_i)        (list order)
//
// Step counter: a scheduler with by_epoch: true counts finished epochs, one
// with by_epoch: false (or converted, below) finished iterations; `n` below.
// Window [begin, end), `end` infinite unless written or defaulted from
// TrainLength (below); before `begin` the factor is 1 (the scheduler has not
// acted yet); from begin on t = min(n, end - 1) - begin, so after `end` the
// value of the window's last step is held (MMEngine stops updating there).
// With T = end - begin - 1 (MMEngine's total_iters, the last step's t):
//   LinearLR          start_factor + (end_factor - start_factor) × min(t, T) / T
//                     (needs an end; T = 0 keeps start_factor). Defaults 1/3, 1.0.
//   ConstantLR        factor while t < T, then 1 (never restored without end,
//                     nor when T = 0). Default 1/3.
//   StepLR            gamma^floor(t / step_size). gamma default 0.1.
//   MultiStepLR       gamma^(number of milestones <= t), counted with repeats;
//                     milestones count from begin.
//   ExponentialLR     gamma^t.
//   CosineAnnealingLR (eta + (base - eta) × (1 + cos(π t / T_max)) / 2) / base,
//                     eta = eta_min (default 0) or base × eta_min_ratio;
//                     T_max default end - begin (needs an end then); past
//                     T_max it is periodic.
//   PolyLR            (eta_min + (base - eta_min) × (1 - min(t, T) / T)^power) / base
//                     (needs an end). eta_min 0, power 1 by default.
// convert_to_iter_based (by_epoch schedulers only) multiplies begin, end,
// T_max, step_size and milestones by iters_per_epoch and counts iterations.
//
// These are MMEngine's values: its schedulers are recursive (each step
// multiplies the current lr by a ratio), and for one scheduler the recursion
// telescopes to these forms. Chained schedulers multiply, which is exactly
// MMEngine's chain for the multiplicative types (all but CosineAnnealingLR and
// PolyLR with an eta_min != 0). Those two step lr -> eta + c (lr - eta), so
// they equal MMEngine's chain only while the other schedulers' product is 1
// in the steps where they move (the usual warm-up that has reached
// end_factor 1.0 before the first cosine step), or when eta_min is 0; else
// the two differ slightly (tests bound one such case). Tests compare every
// type and the usual chains against a port of MMEngine's recursive forms.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace rh::config {
class Node;
}

namespace rh::optim {

class OptimWrapper;

// The training's length, for the default `end` of a scheduler that has none:
// max_epochs for a by_epoch one, max_iters otherwise (MMEngine's runner does
// the same, before convert_to_iter_based). 0 = unknown: `end` stays infinite.
struct TrainLength {
  int64_t max_epochs = 0;
  int64_t max_iters = 0;
};

class ParamSchedulers {
 public:
  // `cfg`: the validated `param_scheduler:` (a map or a list), or nullptr
  // (constant lr). `iters_per_epoch` converts epoch-based schedulers with
  // convert_to_iter_based. The base lrs are optim.base_lrs(): its lrs after
  // auto_scale_lr (scale_lr() before building schedulers). Throws
  // config::ConfigError for what check_param_scheduler() reports, and when
  // LinearLR, PolyLR or CosineAnnealingLR without T_max has no end (neither
  // written nor from `length`), or convert_to_iter_based has no iters_per_epoch.
  ParamSchedulers(const config::Node* cfg, OptimWrapper& optim, int64_t iters_per_epoch,
                  TrainLength length = {});
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
