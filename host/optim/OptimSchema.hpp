// Schemas of `optim_wrapper:` and `param_scheduler:` (no LibTorch here).
#pragma once

#include "config/Schema.hpp"

namespace rh::optim {

config::Schema optim_wrapper_schema();
config::Schema param_scheduler_schema();

}  // namespace rh::optim
