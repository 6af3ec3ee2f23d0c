#include "lifecycle/JobComponents.hpp"

#include "config/ConfigNode.hpp"
#include "plugins/HostError.hpp"

namespace rh::lifecycle {
namespace {

// The host honours every trait it declares, or refuses the strategy here
// (before anything runs): a trait silently ignored would make a plugin look
// right and be wrong.
void check_traits(const host::StrategyInstance& strategy) {
  const rh_StrategyTraits t = strategy.traits();
  if (t.load_phase == RH_LOAD_AFTER_WRAP)
    throw host::HostError(
        RH_ERROR_UNIMPLEMENTED,
        strategy.what() +
            " declares load_phase after_wrap (weights loaded through the strategy), which this "
            "host does not support yet: it would copy them into the model's parameters behind "
            "the strategy; declare before_wrap");
  if (t.sharded_checkpoint != 0)
    throw host::HostError(RH_ERROR_UNIMPLEMENTED,
                          strategy.what() +
                              " declares sharded_checkpoint (every rank writes its own shard), "
                              "which this host does not support yet: only rank 0 writes "
                              "checkpoints, so the other ranks' shards would be lost");
}

}  // namespace

JobComponents create_components(host::ComponentFactory& factory, const config::Node& job) {
  JobComponents c;
  c.strategy = factory.create_strategy(*job.find("strategy"));
  check_traits(*c.strategy);
  if (const config::Node* hooks = job.find("hooks"))
    for (const auto& h : hooks->seq_items()) c.hooks.push_back(factory.create_hook(*h));
  c.checkpoint_io = factory.create_checkpoint_io(*job.find("checkpoint_io"));
  return c;
}

}  // namespace rh::lifecycle
