#include "LossScaler.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace rh::zero {
namespace {

std::string number_text(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

}  // namespace

LossScaler::LossScaler(const LossScalerOptions& options) : options_(options) {
  require(std::isfinite(options.loss_scale) && options.loss_scale >= 0,
          "fp16.loss_scale must be >= 0 (0 = dynamic), got " + number_text(options.loss_scale));
  require(options.initial_scale_power >= 0 && options.initial_scale_power <= 127,
          "fp16.initial_scale_power must be in [0, 127], got " +
              std::to_string(options.initial_scale_power));
  require(options.loss_scale_window >= 1,
          "fp16.loss_scale_window must be >= 1, got " + std::to_string(options.loss_scale_window));
  require(options.hysteresis >= 1,
          "fp16.hysteresis must be >= 1, got " + std::to_string(options.hysteresis));
  require(std::isfinite(options.min_loss_scale) && options.min_loss_scale > 0,
          "fp16.min_loss_scale must be > 0, got " + number_text(options.min_loss_scale));
  require(!dynamic() || std::ldexp(1.0, options.initial_scale_power) >= options.min_loss_scale,
          "the initial loss scale 2^" + std::to_string(options.initial_scale_power) +
              " is below fp16.min_loss_scale (" + number_text(options.min_loss_scale) + ")");
  state_.scale = dynamic() ? std::ldexp(1.0, options.initial_scale_power) : options.loss_scale;
  state_.cur_iter = 0;
  state_.last_overflow_iter = -1;
  state_.cur_hysteresis = options.hysteresis;
}

void LossScaler::update(bool overflow, int64_t step) {
  if (!dynamic()) {  // DeepSpeed's LossScaler.update_scale: pass
    ++state_.cur_iter;
    return;
  }
  const LossScalerOptions& o = options_;
  if (overflow) {
    if (o.hysteresis == 1 || state_.cur_hysteresis == 1) {
      if (state_.scale == o.min_loss_scale) {
        throw LossScaleAtMinimumError(
            "fp16 gradient overflow (inf or nan) at step " + std::to_string(step) +
            " with the loss scale already at fp16.min_loss_scale (" +
            number_text(o.min_loss_scale) +
            "): the scale cannot go lower, so the run stops (as DeepSpeed's does). Train in bf16 "
            "(strategy.bf16.enabled: true, strategy.fp16.enabled: false), whose range does not "
            "overflow, or find what makes the gradients inf/nan (learning rate, data)");
      }
      state_.scale = std::max(state_.scale / 2, o.min_loss_scale);
    } else {
      --state_.cur_hysteresis;
    }
    state_.last_overflow_iter = state_.cur_iter;
  } else {
    if (o.consecutive_hysteresis) state_.cur_hysteresis = o.hysteresis;
    if ((state_.cur_iter - state_.last_overflow_iter) % o.loss_scale_window == 0) {
      state_.cur_hysteresis = o.hysteresis;
      state_.scale *= 2;
    }
  }
  ++state_.cur_iter;
}

void LossScaler::load_state(const LossScalerState& s) {
  require(s.cur_iter >= 0,
          "loss scaler state: cur_iter must be >= 0, got " + std::to_string(s.cur_iter));
  if (!dynamic()) {
    state_.cur_iter = s.cur_iter;
    return;
  }
  require(std::isfinite(s.scale) && s.scale >= options_.min_loss_scale,
          "loss scaler state: scale " + number_text(s.scale) +
              " is not a finite value >= fp16.min_loss_scale (" +
              number_text(options_.min_loss_scale) + ")");
  require(s.last_overflow_iter >= -1 && s.last_overflow_iter < s.cur_iter,
          "loss scaler state: last_overflow_iter " + std::to_string(s.last_overflow_iter) +
              " is outside [-1, cur_iter " + std::to_string(s.cur_iter) + ")");
  require(s.cur_hysteresis >= 1 && s.cur_hysteresis <= options_.hysteresis,
          "loss scaler state: cur_hysteresis " + std::to_string(s.cur_hysteresis) +
              " is outside [1, fp16.hysteresis " + std::to_string(options_.hysteresis) + "]");
  state_ = s;
}

}  // namespace rh::zero
