// The plugin components a job names, created once at lifecycle step 1 so
// that every plugin has validated its subtree before anything runs.
#pragma once

#include <memory>
#include <vector>

#include "abi/ComponentFactory.hpp"

namespace rh::config {
class Node;
}

namespace rh::lifecycle {

struct JobComponents {
  std::unique_ptr<host::StrategyInstance> strategy;
  std::vector<std::unique_ptr<host::HookInstance>> hooks;  // job-file order
  std::unique_ptr<host::CheckpointIoInstance> checkpoint_io;
};

// `job` must contain `strategy` and `checkpoint_io` (see apply_job_defaults).
JobComponents create_components(host::ComponentFactory& factory, const config::Node& job);

}  // namespace rh::lifecycle
