// Strategy `zero`: the parameters' all-gathers: the masters into the
// parameters after each step, and stage 3's gathers around each unit
// (prefetched) and frees after it.
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "ZeroStrategy.hpp"
#include "rh/cpp/torch.hpp"

namespace rh::zero {

// ---- Parameters ------------------------------------------------------------------

// All-gathers the masters (in the working dtype) into the parameters, in
// pieces of at most `piece_elements` gathered elements.
void ZeroStrategy::gather_into_params(Group& g, int64_t piece_elements) {
  at::NoGradGuard no_grad;
  const int64_t piece = std::max<int64_t>(1, piece_elements / world_size_);
  at::Tensor send = g.master.to(working_);
  at::Tensor buf = gather_pool_.take();
  at::Tensor flat = buf.narrow(0, 0, world_size_ * g.chunk).view({world_size_, g.chunk});
  const bool one_piece = piece >= g.chunk;  // gathered straight into `flat`
  struct Piece {
    int64_t at, len;
    at::Tensor out;
    InFlight f;
  };
  std::vector<Piece> pieces;
  for (int64_t at = 0; at < g.chunk; at += piece) {
    Piece p{at, std::min(piece, g.chunk - at), {}, {}};
    p.out = one_piece ? flat.view({-1}) : at::empty({world_size_ * p.len}, send.options());
    comm_.all_gather(world_, send.narrow(0, p.at, p.len), p.out, p.f);
    pieces.push_back(std::move(p));
  }
  // Every piece is waited for (and freed) even when one failed.
  std::exception_ptr failed;
  for (Piece& p : pieces) {
    try {
      wait(p.f);
      if (!one_piece) flat.narrow(1, p.at, p.len).copy_(p.out.view({world_size_, p.len}));
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  if (failed) std::rethrow_exception(failed);
  scatter_to_params(g, flat.reshape({-1}));
  gather_pool_.give(std::move(buf));
}

void ZeroStrategy::scatter_to_params(Group& g, const at::Tensor& flat) {
  Layout::scatter(g.members, flat, world_size_, g.chunk, [&](size_t i) { return param(i); });
}

// Stage 3: a unit group's parameters whole, asynchronously.
void ZeroStrategy::start_gather(Group& g) {
  if (g.whole || g.gather.issued()) return;
  RECORD_USER_SCOPE("zero::all_gather");
  restore_storage(g.members);
  g.gather.start(comm_, gather_pool_, world_, g.master.to(working_), world_size_ * g.chunk);
  live_ += g.numel;
  peak_live_ = std::max(peak_live_, live_ + persistent_numel());
}

void ZeroStrategy::finish_gather(Group& g) {
  if (g.whole) return;
  if (!g.gather.issued()) start_gather(g);
  RECORD_USER_SCOPE("zero::wait_gather");
  scatter_to_params(g, g.gather.finish(comm_));
  g.gather.release(gather_pool_);
  g.whole = true;
}

void ZeroStrategy::free_params(Group& g) {
  if (g.gather.issued()) finish_gather(g);
  if (!g.whole) return;
  free_storage(g.members);
  g.whole = false;
  live_ -= g.numel;
}

int64_t ZeroStrategy::persistent_numel() const {
  int64_t n = 0;
  for (const Group& g : groups_)
    if (!g.sharded) n += g.numel;
  return n;
}

rh_Error* ZeroStrategy::on_unit(void* self, int32_t unit, rh_UnitPhase phase) {
  auto* s = static_cast<ZeroStrategy*>(self);
  return rh::guard(s->host_, [&] { s->unit_event(unit, phase); });
}

// Stage 3 around each unit: gather (and prefetch the next units) before
// its forward and its backward, free after each.
void ZeroStrategy::unit_event(int32_t unit, rh_UnitPhase phase) {
  const auto u = static_cast<size_t>(unit);
  switch (phase) {
    case RH_UNIT_PRE_FORWARD:
    case RH_UNIT_PRE_BACKWARD: {
      for (size_t k : unit_groups_[u]) start_gather(groups_[k]);
      prefetch(unit, phase == RH_UNIT_PRE_FORWARD ? 1 : -1);
      for (size_t k : unit_groups_[u]) finish_gather(groups_[k]);
      break;
    }
    case RH_UNIT_POST_FORWARD:
    case RH_UNIT_POST_BACKWARD:
      for (size_t k : unit_groups_[u]) free_params(groups_[k]);
      break;
  }
}

// Issues the gathers of the next units in `direction` while their
// elements fit in stage3_prefetch_bucket_size and the gathered total in
// stage3_max_live_parameters.
void ZeroStrategy::prefetch(int32_t unit, int direction) {
  int64_t budget = cfg_.zero_optimization.stage3_prefetch_bucket_size;
  const auto units = static_cast<int32_t>(unit_groups_.size());
  for (int32_t v = unit + direction; v >= 0 && v < units; v += direction) {
    int64_t numel = 0;
    bool pending = false;
    for (size_t k : unit_groups_[static_cast<size_t>(v)]) {
      numel += groups_[k].numel;
      pending = pending || !groups_[k].whole;
    }
    if (numel == 0) continue;
    if (numel > budget || live_ + numel > cfg_.zero_optimization.stage3_max_live_parameters) return;
    budget -= numel;
    if (pending)
      for (size_t k : unit_groups_[static_cast<size_t>(v)]) start_gather(groups_[k]);
  }
}

}  // namespace rh::zero
