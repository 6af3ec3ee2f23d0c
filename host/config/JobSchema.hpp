// The schema of the keys the host owns at the top of a job file (MMEngine's
// names). Subtrees that belong to a builder or plugin (model, data.*, the
// optimizer, schedulers, strategy/hooks/checkpoint_io options) are open maps
// here; their owners check the rest.
#pragma once

#include "config/Schema.hpp"

namespace rh::config {

const Schema& job_schema();

}  // namespace rh::config
