// LossScaler — the fp16 loss scale of the zero strategy: DeepSpeed's
// DynamicLossScaler (deepspeed/runtime/fp16/loss_scaler.py, update_scale) rule
// for rule, so that a DeepSpeed user's fp16 section behaves the same here, and
// its static LossScaler when fp16.loss_scale > 0.
//
// The rules, as DeepSpeed implements them (each pinned by LossScalerTest):
//   - scale starts at 2^initial_scale_power; cur_iter = 0,
//     last_overflow_iter = -1, cur_hysteresis = hysteresis.
//   - update(overflow) is called once per optimizer step, skipped or not:
//     overflow:
//       if hysteresis == 1 or cur_hysteresis == 1 (hysteresis used up):
//         if scale == min_loss_scale: error (the run stops; see below)
//         else scale = max(scale / 2, min_loss_scale)
//       else cur_hysteresis -= 1 (the scale stays)
//       last_overflow_iter = cur_iter
//     clean step:
//       if consecutive_hysteresis: cur_hysteresis = hysteresis
//       if (cur_iter - last_overflow_iter) % loss_scale_window == 0:
//         cur_hysteresis = hysteresis; scale *= 2
//     cur_iter += 1 in both cases.
//   So the scale doubles after every loss_scale_window clean steps counted
//   from the last overflow (the overflowing step itself is not counted; before
//   any overflow the count starts at the first step), and again every window
//   after a raise. Halving never refills the hysteresis: only a raise does, or
//   every clean step with consecutive_hysteresis. There is no maximum scale.
//   - At the minimum: an overflow whose hysteresis is used up while the scale
//     already equals min_loss_scale is an error (DeepSpeed's "Current loss
//     scale already at minimum - cannot decrease scale anymore. Exiting run.",
//     raise_error_at_min_scale=True, its default). The first overflow that
//     would take the scale below the minimum clamps it to the minimum and
//     training goes on; the error comes on the next one. While hysteresis is
//     left, an overflow at the minimum only decrements it.
//   - Static (loss_scale > 0): the scale never changes; update() only counts.
//
// Validation DeepSpeed does not do (each would break its rule): the window
// must be >= 1 (DeepSpeed divides by it), hysteresis >= 1 (with 0 DeepSpeed
// would decrement forever and never halve), min_loss_scale > 0 and
// 0 <= initial_scale_power <= 127 (2^128 is not a finite float32 scale), and
// 2^initial_scale_power >= min_loss_scale (below it, DeepSpeed's max(scale/2,
// min) would *raise* the scale on the first overflow).
//
// No LibTorch here: the caller detects overflow and applies the scale.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace rh::zero {

// DeepSpeed's fp16 keys, with its documented defaults.
struct LossScalerOptions {
  double loss_scale = 0;  // > 0: a static scale; 0: dynamic
  int initial_scale_power = 16;
  int64_t loss_scale_window = 1000;
  int hysteresis = 2;  // DeepSpeed's delayed_shift
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1;
};

// What a checkpoint keeps so that a resumed run takes the same decisions
// (DeepSpeed pickles these fields of its scaler object).
struct LossScalerState {
  double scale = 0;
  int64_t cur_iter = 0;
  int64_t last_overflow_iter = -1;
  int cur_hysteresis = 0;

  bool operator==(const LossScalerState& o) const {
    return scale == o.scale && cur_iter == o.cur_iter &&
           last_overflow_iter == o.last_overflow_iter && cur_hysteresis == o.cur_hysteresis;
  }
};

// The overflow at the minimum scale: the run cannot go on in fp16.
class LossScaleAtMinimumError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class LossScaler {
 public:
  // Throws std::invalid_argument for options outside the ranges above.
  explicit LossScaler(const LossScalerOptions& options);

  double scale() const { return state_.scale; }
  bool dynamic() const { return options_.loss_scale <= 0; }
  const LossScalerOptions& options() const { return options_; }

  // DeepSpeed's update_scale(overflow), once per optimizer step. `step` is
  // the step as the user sees it (the run's iteration), named in the error.
  // Throws LossScaleAtMinimumError (state unchanged) at the minimum.
  void update(bool overflow, int64_t step);

  LossScalerState state() const { return state_; }
  // Restores a state taken by state() under the same options; throws
  // std::invalid_argument for one these options cannot have produced
  // (a scale below min_loss_scale, cur_hysteresis outside [1, hysteresis],
  // last_overflow_iter outside [-1, cur_iter)). A static scaler keeps its
  // scale from the options (the job), and takes only cur_iter.
  void load_state(const LossScalerState& state);

 private:
  LossScalerOptions options_;
  LossScalerState state_;
};

}  // namespace rh::zero
