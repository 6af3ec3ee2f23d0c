// Strategy `fsdp`: the gradients: each unit's reduce-scatter (and, across
// replicas, all-reduce) after its backward into the float32 sharded
// gradient, the global norm, and one rank's path that communicates nothing.
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "FsdpStrategy.hpp"
#include "rh/cpp/torch.hpp"

namespace rh::fsdp {

void FsdpStrategy::sync_gradients(bool sync) {
  if (alone()) {
    sync_alone(sync);
    return;
  }
  if (sync && sync_) {
    for (Unit& u : units_) u.ready = true;  // the root unit, units no gradient reached
    launch_ready();
    while (!in_flight_.empty()) finish_reduce(units_[in_flight_.front()]);
  }
  for (Unit& u : units_)
    if (!u.persistent) free_params(u);
  backward_unit_ = -1;
}

double FsdpStrategy::reduce_grad_norm(double norm_type, double local) {
  if (shard_comm_ == nullptr) return local;  // every rank holds every gradient
  at::Tensor t = at::scalar_tensor(local, at::kDouble).reshape({1}).to(device_);
  collective_sync(shard_comm_, t, std::isinf(norm_type) ? RH_REDUCE_MAX : RH_REDUCE_SUM);
  return t.cpu().item<double>();
}

// ---- Reducing --------------------------------------------------------------------

// Launches the reductions of ready units in one fixed order (the units
// backwards, the root unit last: it is ready only when backward is done):
// every rank issues the same collectives in the same order.
void FsdpStrategy::launch_ready() {
  while (next_launch_ < units_.size()) {
    const size_t back = units_.size() - 1 - next_launch_;
    const size_t k = root_unit_ < 0 ? back
                     : next_launch_ + 1 == units_.size()
                         ? static_cast<size_t>(root_unit_)
                         : back - 1;  // the root unit is the last of units_
    Unit& u = units_[k];
    if (!u.ready) return;
    ++next_launch_;
    launch_reduce(u);
  }
}

void FsdpStrategy::launch_reduce(Unit& u) {
  RECORD_USER_SCOPE("fsdp::reduce_scatter");
  const at::Tensor& flat = u.reduce.take(grad_pool_, shards_ * u.block);
  const at::Tensor blocks = flat.view({shards_, u.block});
  int64_t full_grad_bytes = 0;
  {
    at::NoGradGuard no_grad;
    for (const Member& m : u.members) {
      DLManagedTensor* view = nullptr;
      rh::check(host_, api_->Model_GetGrad(model_, m.param, &view));
      at::Tensor g;
      if (view != nullptr) {
        g = rh::borrow_tensor(view).reshape({-1});
        full_grad_bytes += g.numel() * static_cast<int64_t>(g.element_size());
      }
      for (int64_t r = 0; r < shards_; ++r) {
        const int64_t v = view ? m.valid(r) : 0;
        at::Tensor dst = blocks[r].narrow(0, m.offset, m.len);
        if (v > 0) {
          at::Tensor d = dst.narrow(0, 0, v);
          at::div_out(d, g.narrow(0, r * m.len, v).to(reduce_dtype_), world_size_tensor_);
        }
        if (v < m.len) dst.narrow(0, v, m.len - v).zero_();
      }
      if (view != nullptr) rh::check(host_, api_->Model_ReleaseGrad(model_, m.param));
    }
  }
  peak_full_grad_bytes_ = std::max(peak_full_grad_bytes_, full_grad_bytes);
  if (shard_comm_ != nullptr) {
    u.reduce.out = reduce_dtype_ == at::kFloat ? u.grad : at::empty({u.block}, flat.options());
    comm_.reduce_scatter(shard_comm_, flat, u.reduce.out, RH_REDUCE_SUM, u.reduce.f);
  } else if (replicate_comm_ != nullptr) {  // no_shard: an all-reduce, as ddp
    u.reduce.out = flat;
    comm_.all_reduce_async(replicate_comm_, flat, u.reduce.f);
  } else {
    u.reduce.out = flat;  // one rank
  }
  in_flight_.push_back(static_cast<size_t>(&u - units_.data()));
  // One reduction in flight while the next unit computes: its buffer
  // goes back to the pool as soon as it is done.
  while (in_flight_.size() > 1) finish_reduce(units_[in_flight_.front()]);
}

void FsdpStrategy::finish_reduce(Unit& u) {
  if (!leave_in_flight(static_cast<size_t>(&u - units_.data()))) return;
  RECORD_USER_SCOPE("fsdp::wait_reduce");
  if (u.reduce.f.work != nullptr) wait(u.reduce.f);
  if (shard_comm_ != nullptr && replicate_comm_ != nullptr) {
    // hybrid_shard: the shard group's sums, summed across the replicas.
    collective_sync(replicate_comm_, u.reduce.out, RH_REDUCE_SUM, true);
  }
  if (!u.reduce.out.is_same(u.grad)) u.grad.copy_(u.reduce.out);
  u.reduce.release(grad_pool_);
}

// ---- One rank -------------------------------------------------------------------

void FsdpStrategy::on_grad_ready(void* self, size_t index) {
  static_cast<FsdpStrategy*>(self)->grad_ready(index);
}

// float32: the gradient copied into (or, later in a window, added to) its
// piece of `grad` and released: every micro-batch's float32 sums in the
// order autograd would make them in the parameter, without holding it.
void FsdpStrategy::grad_ready(size_t index) {
  const auto [k, j] = place_[index];
  if (k < 0) return;
  Member& m = units_[static_cast<size_t>(k)].members[static_cast<size_t>(j)];
  DLManagedTensor* view = nullptr;
  rh::check(host_, api_->Model_GetGrad(model_, m.param, &view));
  if (view == nullptr) return;
  rh::sharding::take_into(units_[static_cast<size_t>(k)].grad, m.offset, m.numel, view,
                          accumulating_);
  rh::check(host_, api_->Model_ReleaseGrad(model_, m.param));
  m.taken = true;
}

// What N ranks' reduction leaves in `grad`, without one.
void FsdpStrategy::sync_alone(bool sync) {
  if (alias_) {
    // Taken as they came; one that never arrived counts as zeros.
    for (Unit& u : units_)
      for (const Member& m : u.members)
        if (!m.taken && !accumulating_) u.grad.narrow(0, m.offset, m.numel).zero_();
    accumulating_ = !sync;  // the next backward adds unless a step comes first
    return;
  }
  if (!sync) return;  // accumulating: the gradients stay in the parameters
  // bf16 / fp16: each gradient cast into its piece of `grad` and released;
  // one that never arrived counts as zeros.
  at::NoGradGuard no_grad;
  for (Unit& u : units_)
    for (const Member& m : u.members) {
      DLManagedTensor* view = nullptr;
      rh::check(host_, api_->Model_GetGrad(model_, m.param, &view));
      if (view == nullptr) {
        u.grad.narrow(0, m.offset, m.numel).zero_();
        continue;
      }
      rh::sharding::take_into(u.grad, m.offset, m.numel, view, false);
      rh::check(host_, api_->Model_ReleaseGrad(model_, m.param));
    }
}

}  // namespace rh::fsdp
