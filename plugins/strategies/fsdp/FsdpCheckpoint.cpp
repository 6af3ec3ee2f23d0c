// Strategy `fsdp`: checkpoints: the host's UnitParams requests (a unit
// gathered, released or adopted for a full state dict, loading from rank 0)
// and StateExport / StateImport.
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <string>
#include <vector>

#include "FsdpStrategy.hpp"
#include "rh/cpp/torch.hpp"

namespace rh::fsdp {

void FsdpStrategy::unit_params(int32_t model_unit, rh_UnitParamsOp op) {
  Unit* u = model_unit < 0 ? root_unit() : unit_for(model_unit);
  if (op == RH_UNIT_PARAMS_ROOT_ADOPT) broadcast_whole(model_unit);
  if (u == nullptr) return;  // nothing managed in it: whole everywhere
  switch (op) {
    case RH_UNIT_PARAMS_GATHER:
      start_gather(*u, false);
      finish_gather(*u);
      save_peak_numel_ = std::max(save_peak_numel_, live_numel_);
      break;
    case RH_UNIT_PARAMS_RELEASE:
      if (!u->persistent) free_params(*u);
      break;
    case RH_UNIT_PARAMS_ADOPT:
      // The host wrote whole values into this unit's parameters (one
      // rank in float32: into the masters themselves).
      if (!alias_) master_from(*u, [&](const Member& m) { return param(m.param).to(at::kFloat); });
      set_piece(*u, at::Tensor());
      if (!u->persistent) free_params(*u);
      break;
    case RH_UNIT_PARAMS_ROOT_PREPARE:
      if (rank_ == 0 && !u->persistent && u->state == UnitState::Sharded)
        for (const Member& m : u->members)
          if (m.slot == model_unit)
            rh::check(host_, api_->Model_RestoreParamStorage(model_, m.param));
      break;
    case RH_UNIT_PARAMS_ROOT_ADOPT:
      adopt_from_root(*u, model_unit);
      break;
  }
}

// Nothing of the shards: the host saves them as slices of logical tensors
// and reshards them at resume (docs/checkpoint-format.md). Only what a
// full save held at once is reported.
void FsdpStrategy::state_export(rh_StateDict*) {
  if (save_peak_numel_ >= 0 && !cfg_.sharded_state_dict) {
    // What a full state-dict save held whole at once (the checkpoint
    // test reads it): rank 0's and the most on any other rank.
    const double mine = static_cast<double>(save_peak_numel_ * elem(param_dtype_));
    at::Tensor peaks = at::zeros({2}, at::kDouble);
    peaks[rank_ == 0 ? 0 : 1] = mine;
    peaks = peaks.to(device_);
    if (world_ != nullptr && !alone()) collective_sync(world_, peaks, RH_REDUCE_MAX);
    peaks = peaks.cpu();
    if (rank_ == 0)
      log(RH_LOG_INFO, "strategy 'fsdp': saving held at most " +
                           std::to_string(static_cast<int64_t>(peaks[0].item<double>())) +
                           " bytes of gathered parameters at once on rank 0 and " +
                           std::to_string(static_cast<int64_t>(peaks[1].item<double>())) +
                           " on any other rank (largest unit " +
                           std::to_string(largest_unit_numel_ * elem(param_dtype_)) + " bytes)");
  }
  save_peak_numel_ = -1;
}

// Whoever wrote the checkpoint, in whatever layout: the host has put this
// rank's ranges of the fp32 masters in place (resume), and every unit's
// parameters follow them.
void FsdpStrategy::state_import(const rh_StateDict*) {
  // The masters are the checkpoint's now (the host restored them): every
  // unit's parameters follow them.
  for (Unit& u : units_) {
    set_piece(u, at::Tensor());
    if (u.persistent)
      params_from_masters(u);
    else
      free_params(u);
  }
}

// ---- Loading from rank 0 -----------------------------------------------------------

// ROOT_ADOPT: rank 0 wrote whole values into the members of model unit
// `slot`; every rank takes its shards of them. Shard groups of S > 1: a
// reduce-scatter with MAX of rank 0's blocks against -inf from every
// other rank (exact, -0.0 included), so each rank receives only its
// block; then, across the replicas (hybrid_shard), a broadcast from the
// shard group of rank 0. S = 1: a broadcast of the block.
void FsdpStrategy::adopt_from_root(Unit& u, int32_t slot) {
  RECORD_USER_SCOPE("fsdp::adopt_from_root");
  at::NoGradGuard no_grad;
  const auto f32 = u.master.options();
  at::Tensor mine = at::empty({u.block}, f32);
  const bool in_root_group = rank_ < shards_;  // the shard group rank 0 belongs to
  if (shard_comm_ != nullptr && in_root_group) {
    at::Tensor flat = at::full({shards_ * u.block}, -std::numeric_limits<float>::infinity(), f32);
    if (rank_ == 0) blocks_from_params(u, flat, slot);
    InFlight f;
    comm_.reduce_scatter(shard_comm_, flat, mine, RH_REDUCE_MAX, f);
    wait(f);
  } else if (shard_comm_ == nullptr && rank_ == 0) {
    blocks_from_params(u, mine, slot);
  }
  if (replicate_comm_ != nullptr) {
    collective_broadcast(replicate_comm_, mine, true);
  }
  for (const Member& m : u.members) {
    if (m.slot != slot) continue;
    const int64_t v = m.valid(shard_index_);
    if (v > 0) u.master.narrow(0, m.offset, v).copy_(mine.narrow(0, m.offset, v));
  }
  set_piece(u, at::Tensor());
  if (u.persistent) {
    params_from_masters(u);
  } else if (rank_ == 0 && u.state == UnitState::Sharded) {
    for (const Member& m : u.members)
      if (m.slot == slot) rh::check(host_, api_->Model_FreeParamStorage(model_, m.param));
  }
}

// ROOT_ADOPT: what every rank holds whole (frozen, ignored) of model unit
// `slot`, rank 0's values everywhere.
void FsdpStrategy::broadcast_whole(int32_t slot) {
  if (world_ == nullptr || alone()) return;
  for (size_t i = 0; i < managed_.size(); ++i) {
    if (managed_[i] || slot_of_[i] != slot) continue;
    at::Tensor p = param(i);
    collective_broadcast(world_, p, true);
  }
}

}  // namespace rh::fsdp
