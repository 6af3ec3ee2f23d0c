// The schema of a job file (MMEngine's key names): the host's own keys and,
// through their owners' schemas, the model, data, optimizer and scheduler
// subtrees. Plugin subtrees (strategy/hooks/checkpoint_io options) are left
// open here: each plugin checks its own at create.
#pragma once

#include <vector>

#include "config/ConfigNode.hpp"
#include "config/Schema.hpp"

namespace rh::config {

const Schema& job_schema();

// Lifecycle step 0: the schema plus the cross-key rules a schema cannot say
// (optimizer and scheduler consistency). Every error, in file order.
std::vector<ConfigError> validate_job(const Node& root);

}  // namespace rh::config
