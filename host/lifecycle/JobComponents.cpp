#include "lifecycle/JobComponents.hpp"

#include "config/ConfigNode.hpp"

namespace rh::lifecycle {

JobComponents create_components(host::ComponentFactory& factory, const config::Node& job) {
  JobComponents c;
  c.strategy = factory.create_strategy(*job.find("strategy"));
  if (const config::Node* hooks = job.find("hooks"))
    for (const auto& h : hooks->seq_items()) c.hooks.push_back(factory.create_hook(*h));
  c.checkpoint_io = factory.create_checkpoint_io(*job.find("checkpoint_io"));
  return c;
}

}  // namespace rh::lifecycle
