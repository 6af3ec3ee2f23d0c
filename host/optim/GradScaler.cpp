#include "optim/GradScaler.hpp"

#include <cmath>
#include <sstream>

namespace rh::optim {
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

GradScaler::GradScaler(const GradScalerOptions& o) : options_(o) {
  require(std::isfinite(o.init_scale) && o.init_scale > 0,
          "loss scale must be a finite number > 0, got " + number_text(o.init_scale));
  if (o.dynamic) {
    require(std::isfinite(o.growth_factor) && o.growth_factor > 1,
            "loss_scale.growth_factor must be > 1, got " + number_text(o.growth_factor));
    require(o.backoff_factor > 0 && o.backoff_factor < 1,
            "loss_scale.backoff_factor must be in (0, 1), got " + number_text(o.backoff_factor));
    require(o.growth_interval >= 1,
            "loss_scale.growth_interval must be >= 1, got " + std::to_string(o.growth_interval));
  }
  state_.scale = static_cast<float>(o.init_scale);  // a float32 tensor in PyTorch
}

void GradScaler::update(bool found_inf, int64_t step) {
  if (!options_.dynamic) return;  // update(new_scale) with the same number
  // The scale is a float32 tensor in PyTorch: every product is rounded to
  // float, and a growth that would overflow float is not taken.
  if (found_inf) {
    state_.scale = static_cast<float>(state_.scale * options_.backoff_factor);
    state_.growth_tracker = 0;
    if (!(state_.scale > 0))
      throw std::runtime_error(
          "AmpOptimWrapper: the loss scale fell to 0 at iteration " + std::to_string(step) +
          " after overflow upon overflow: the gradients are inf or nan whatever the scale (look "
          "at the learning rate and the data, or train in bfloat16)");
  } else if (++state_.growth_tracker == options_.growth_interval) {
    const float grown = static_cast<float>(state_.scale * options_.growth_factor);
    if (std::isfinite(grown)) state_.scale = grown;
    state_.growth_tracker = 0;
  }
}

bool GradScaler::load_state(const GradScalerState& s) {
  require(std::isfinite(s.scale) && s.scale > 0,
          "loss scaler state: scale " + number_text(s.scale) + " is not a finite number > 0");
  require(s.growth_tracker >= 0,
          "loss scaler state: growth_tracker " + std::to_string(s.growth_tracker) + " is negative");
  if (!options_.dynamic) return true;  // the job's static scale stands
  state_ = s;
  if (s.growth_tracker < options_.growth_interval) return true;
  state_.growth_tracker = 0;  // counted towards a longer growth_interval than this job's
  return false;
}

}  // namespace rh::optim
