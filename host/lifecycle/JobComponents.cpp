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
  const rh_StrategyVtable& vt = strategy.vtable();
  const bool unit_params = RH_STRUCT_HAS(&vt, rh_StrategyVtable, UnitParams) && vt.UnitParams;
  if (t.load_phase == RH_LOAD_AFTER_WRAP && !unit_params)
    throw host::HostError(
        RH_ERROR_UNIMPLEMENTED,
        strategy.what() +
            " declares load_phase after_wrap (weights loaded through the strategy) but has no "
            "UnitParams entry (ABI 1.3) to take them: the host would copy them into the model's "
            "parameters behind the strategy; implement UnitParams or declare before_wrap");
  if (t.sharded_checkpoint != 0 && (!unit_params || vt.OptimizerParams == nullptr))
    throw host::HostError(RH_ERROR_UNIMPLEMENTED,
                          strategy.what() +
                              " declares sharded_checkpoint (every rank writes its own shard) "
                              "without OptimizerParams and UnitParams (ABI 1.3): the host "
                              "saves the shards OptimizerParams gives and gathers the model "
                              "for rank 0 through UnitParams");
  if (t.sharded_model_state != 0 && t.sharded_checkpoint == 0)
    throw host::HostError(RH_ERROR_UNIMPLEMENTED,
                          strategy.what() +
                              " declares sharded_model_state without sharded_checkpoint: the "
                              "parameters' shards are saved in the per-rank optimizer files");
  if (t.load_from_root != 0 && (t.load_phase != RH_LOAD_AFTER_WRAP || !unit_params))
    throw host::HostError(RH_ERROR_UNIMPLEMENTED,
                          strategy.what() +
                              " declares load_from_root without load_phase after_wrap and "
                              "UnitParams: only weights loaded through the strategy come from "
                              "rank 0 alone");
  if (t.input_dtype.code != 0 || t.input_dtype.bits != 0) {
    const bool floating = (t.input_dtype.code == kDLFloat || t.input_dtype.code == kDLBfloat) &&
                          t.input_dtype.lanes == 1;
    if (!floating)
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            strategy.what() +
                                " declares an input_dtype that is not a floating-point "
                                "type (DLPack code " +
                                std::to_string(t.input_dtype.code) + ", " +
                                std::to_string(t.input_dtype.bits) + " bits)");
  }
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
