// GradScaler — the loss scale of AmpOptimWrapper: PyTorch's
// torch.cuda.amp.GradScaler rules (MMEngine's AmpOptimWrapper builds one),
// so that a job moved from MMEngine scales, skips and grows the same way.
//
// The rules (torch/amp/grad_scaler.py, _amp_update_scale_; each pinned by
// GradScalerTest):
//   - the scale starts at init_scale (2^16); growth_tracker = 0.
//   - update(found_inf) once per optimizer step, skipped or not:
//       found_inf: scale *= backoff_factor (0.5); growth_tracker = 0
//       else:      growth_tracker += 1; when it reaches growth_interval
//                  (2000): scale *= growth_factor (2.0), growth_tracker = 0
//   - static (MMEngine's `loss_scale: <number>`, GradScaler(init_scale=x) and
//     update(x) every step): the scale stays x; a step whose gradients are
//     not finite is still skipped.
//   - the scale is a float32 number, as PyTorch keeps it in a float32 tensor:
//     each product is rounded to float, and a growth that would overflow
//     float is not taken. There is no minimum: a scale backed off to 0 is an
//     error here (PyTorch would go on skipping every step).
//
// No LibTorch here: the caller unscales, detects overflow and agrees on it
// across ranks.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace rh::optim {

// torch.cuda.amp.GradScaler's arguments, with its defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool dynamic = true;  // false: MMEngine's `loss_scale: <number>` (the scale never changes)
};

// What a checkpoint keeps (GradScaler.state_dict(): scale, _growth_tracker).
struct GradScalerState {
  double scale = 0;
  int64_t growth_tracker = 0;
  bool operator==(const GradScalerState& o) const {
    return scale == o.scale && growth_tracker == o.growth_tracker;
  }
};

class GradScaler {
 public:
  // Throws std::invalid_argument for options that cannot work: init_scale
  // finite and > 0, growth_factor > 1 and backoff_factor < 1 (PyTorch
  // asserts these two), backoff_factor > 0, growth_interval >= 1.
  explicit GradScaler(const GradScalerOptions& options);

  double scale() const { return state_.scale; }
  const GradScalerOptions& options() const { return options_; }

  // Once per optimizer step, after every rank agreed on `found_inf`. `step`
  // (the run's iteration) names it in the error: throws std::runtime_error
  // when the scale backs off to 0.
  void update(bool found_inf, int64_t step);

  GradScalerState state() const { return state_; }
  // Restores a state taken by state(); throws std::invalid_argument for a
  // scale that is not finite and > 0 or a negative tracker. A static scaler
  // keeps the job's scale. The job's growth_interval stands (PyTorch's
  // load_state_dict would take the checkpoint's): a tracker that already
  // reached it (the interval was lowered) restarts at 0, and load_state
  // returns false so the caller can say so.
  bool load_state(const GradScalerState& state);

 private:
  GradScalerOptions options_;
  GradScalerState state_;
};

}  // namespace rh::optim
