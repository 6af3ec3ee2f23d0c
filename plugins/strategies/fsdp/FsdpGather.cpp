// Strategy `fsdp`: the parameters' communication: the all-gathers that
// make a unit whole (before its forward and its backward, prefetched),
// resharding after forward, the copies between whole parameters, rank blocks
// and masters, and the blocking collectives the others use.
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <string>
#include <vector>

#include "FsdpStrategy.hpp"
#include "rh/cpp/torch.hpp"

namespace rh::fsdp {

// ---- Copies between whole parameters, blocks and masters -------------------------

// The gathered blocks [S * block] into the parameters.
void FsdpStrategy::scatter_to_params(Unit& u, const at::Tensor& flat) {
  Layout::scatter(u.members, flat, shards_, u.block, [&](size_t i) { return param(i); });
}

// The parameters' whole values as blocks [S * block] (padding zeroed);
// with `only_slot`, only the members of that model unit (the rest of
// `flat` untouched).
void FsdpStrategy::blocks_from_params(Unit& u, const at::Tensor& flat, int32_t only_slot) {
  Layout::blocks_from(
      u.members, flat, shards_, u.block, [&](size_t i) { return param(i); },
      [&](const Member& m) { return only_slot == kEverySlot || m.slot == only_slot; });
}

// Persistent units after a step (and at resume): the masters into the
// whole parameters.
void FsdpStrategy::params_from_masters(Unit& u) {
  if (alias_) return;  // one rank in float32: the parameters are the masters
  at::Tensor send = u.master.to(param_dtype_);
  if (shard_comm_ == nullptr) {
    scatter_to_params(u, send);
    return;
  }
  RECORD_USER_SCOPE("fsdp::all_gather");
  rh::sharding::GatherSlot slot;
  slot.start(comm_, gather_pool_, shard_comm_, send, shards_ * u.block);
  scatter_to_params(u, slot.finish(comm_));
  slot.release(gather_pool_);
}

// ---- Gathering -------------------------------------------------------------------

// Issues the all-gather that makes `u` whole: of the shards over the shard
// group, or of the pieces kept after forward over the piece group.
void FsdpStrategy::start_gather(Unit& u, bool for_forward) {
  if (u.persistent || u.state != UnitState::Sharded) return;
  RECORD_USER_SCOPE("fsdp::all_gather");
  restore_storage(u.members);
  u.gather_from_piece = u.piece.defined();
  u.keep_piece = for_forward && reshard_ > 1 && reshard_ < shards_;
  u.gather.start(comm_, gather_pool_, u.gather_from_piece ? piece_comm_ : shard_comm_,
                 u.gather_from_piece ? u.piece : u.master.to(param_dtype_), shards_ * u.block);
  u.state = UnitState::Gathering;
  ++live_units_;
  live_numel_ += u.numel;
  peak_units_ = std::max(peak_units_, live_units_);
  peak_numel_ = std::max(peak_numel_, live_numel_);
}

void FsdpStrategy::finish_gather(Unit& u) {
  if (u.persistent || u.state == UnitState::Whole) return;
  if (u.state == UnitState::Sharded) start_gather(u, false);
  RECORD_USER_SCOPE("fsdp::wait_gather");
  const auto t0 = Clock::now();
  const at::Tensor& gathered = u.gather.finish(comm_);
  gather_wait_s_ += seconds_since(t0);
  scatter_to_params(u, gathered);
  if (u.keep_piece) {
    keep_piece_of(u, gathered);
  } else if (u.gather_from_piece) {
    set_piece(u, at::Tensor());
  }
  u.gather.release(gather_pool_);
  u.state = UnitState::Whole;
}

// reshard_after_forward N: of the whole unit's blocks [S * block], rank j
// of its piece group keeps piece j, so that the piece group's all-gather
// rebuilds them.
void FsdpStrategy::keep_piece_of(Unit& u, const at::Tensor& flat) {
  const int64_t piece = shards_ * u.block / reshard_;
  set_piece(u, flat.narrow(0, (shard_index_ % reshard_) * piece, piece).clone());
}

// Keeps (or, undefined, drops) the piece of `u` kept after forward,
// counting what the pieces hold.
void FsdpStrategy::set_piece(Unit& u, at::Tensor piece) {
  if (u.piece.defined()) piece_numel_ -= u.piece.numel();
  u.piece = std::move(piece);
  if (u.piece.defined()) piece_numel_ += u.piece.numel();
  peak_piece_numel_ = std::max(peak_piece_numel_, piece_numel_);
}

void FsdpStrategy::free_params(Unit& u) {
  if (u.persistent) return;
  if (u.state == UnitState::Gathering) finish_gather(u);
  if (u.state != UnitState::Whole) return;
  free_storage(u.members);
  u.state = UnitState::Sharded;
  --live_units_;
  live_numel_ -= u.numel;
}

// After a unit's forward, as reshard_after_forward says.
void FsdpStrategy::reshard_after_forward(Unit& u) {
  if (u.persistent || reshard_ == 1) return;  // false: whole until after backward
  if (reshard_ < shards_ && !u.piece.defined() && u.state == UnitState::Whole) {
    // Whole without a forward gather (e.g. gathered for a checkpoint):
    // take the piece from the parameters.
    at::Tensor buf = gather_pool_.take();
    at::Tensor flat = buf.narrow(0, 0, shards_ * u.block);
    blocks_from_params(u, flat);
    keep_piece_of(u, flat);
    gather_pool_.give(std::move(buf));
  }
  free_params(u);
}

// Issues the gathers of the next `count` units in `direction`, while at
// most 1 + count units are whole (a backward prefetch that does not fit
// now is retried when a unit is freed).
void FsdpStrategy::prefetch(int from, int direction) {
  const int64_t count = direction > 0 ? cfg_.forward_prefetch : cfg_.backward_prefetch;
  const bool capped = direction < 0 || reshard_ != 1;
  int64_t seen = 0;
  for (int v = from + direction; v >= 0 && v < static_cast<int>(units_.size()) && seen < count;
       v += direction) {
    Unit& u = units_[static_cast<size_t>(v)];
    if (u.persistent) continue;
    ++seen;
    if (u.state != UnitState::Sharded) continue;
    if (capped && live_units_ >= 1 + count) return;
    start_gather(u, direction > 0);
  }
}

rh_Error* FsdpStrategy::on_unit(void* self, int32_t unit, rh_UnitPhase phase) {
  auto* s = static_cast<FsdpStrategy*>(self);
  return rh::guard(s->host_, [&] { s->unit_event(unit, phase); });
}

void FsdpStrategy::unit_event(int32_t model_unit, rh_UnitPhase phase) {
  const int f = fsdp_unit_of(model_unit);
  if (f < 0) return;
  Unit& u = units_[static_cast<size_t>(f)];
  switch (phase) {
    case RH_UNIT_PRE_FORWARD:
      start_gather(u, true);
      prefetch(f, 1);
      finish_gather(u);
      break;
    case RH_UNIT_POST_FORWARD:
      if (model_unit == u.model_units.back()) reshard_after_forward(u);
      break;
    case RH_UNIT_PRE_BACKWARD:
      start_gather(u, false);
      backward_unit_ = f;
      prefetch(f, -1);
      finish_gather(u);
      break;
    case RH_UNIT_POST_BACKWARD:
      if (++u.backward_done < static_cast<int>(u.model_units.size())) break;
      u.ready = true;
      free_params(u);  // resharded after backward, always
      if (sync_) launch_ready();
      if (backward_unit_ >= 0) prefetch(backward_unit_, -1);
      break;
  }
}

void FsdpStrategy::collective_sync(rh_Comm* comm, at::Tensor& t, rh_ReduceOp op, bool count_bytes) {
  RECORD_USER_SCOPE("fsdp::all_reduce");
  comm_.all_reduce(comm, t, op, count_bytes);
}

void FsdpStrategy::collective_broadcast(rh_Comm* comm, at::Tensor& t, bool count_bytes) {
  RECORD_USER_SCOPE("fsdp::broadcast");
  comm_.broadcast(comm, t, 0, count_bytes);
}

}  // namespace rh::fsdp
