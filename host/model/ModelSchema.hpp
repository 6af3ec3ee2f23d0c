// The `model:` subtree's schema, one entry per model type (no LibTorch here:
// the host validates the whole job before anything is built).
#pragma once

#include "config/Schema.hpp"

namespace rh::model {

config::Schema model_schema();

}  // namespace rh::model
