// Strategy `zero`: the gradients: each group's reduce-scatter (or
// all-reduce) as its gradients arrive, fp16's overflow check and loss
// scaling, gradient clipping, and one rank's path that communicates nothing.
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ZeroStrategy.hpp"
#include "rh/cpp/torch.hpp"
#include "rh/cpp/torch_exact_norm.hpp"

namespace rh::zero {

void ZeroStrategy::sync_gradients(bool sync) {
  if (alone()) {
    sync_alone(sync);
    return;
  }
  if (reduce_now_) {
    while (next_launch_ < groups_.size()) launch(next_launch_++);
    for (Group& g : groups_) finish_reduce(g);
    accumulating_ = !sync;  // the next backward adds to grad unless a step comes first
  }
  if (stage_ == 3)  // anything a unit left gathered (an unused unit)
    for (Group& g : groups_)
      if (g.sharded && g.whole) free_params(g);
}

bool ZeroStrategy::should_step() {
  accumulating_ = false;
  bool step = true;
  if (scaler_) {
    const double inv = 1.0 / scaler_->scale();
    for (Group& g : groups_) g.grad.mul_(inv);
    if (injections_.count(steps_)) {
      log(RH_LOG_WARN, "strategy 'zero': RH_ZERO_TEST_INJECT_INF: an inf in rank " +
                           std::to_string(rank_) + "'s gradient at step " + std::to_string(steps_));
      groups_.front().grad[0] = std::numeric_limits<float>::infinity();
    }
    bool overflow = false;
    for (Group& g : groups_) overflow = overflow || !g.grad.isfinite().all().item<bool>();
    if (!alone()) {  // an overflow on any rank skips the step on every rank
      at::Tensor flag = at::scalar_tensor(overflow ? 1.0 : 0.0, at::kFloat)
                            .reshape({1})
                            .to(groups_.front().grad.device());
      all_reduce(flag, RH_REDUCE_MAX);
      overflow = flag.item<float>() > 0;
    }
    const double scale_before = scaler_->scale();
    try {
      scaler_->update(overflow, steps_);
    } catch (const rh::zero::LossScaleAtMinimumError& e) {
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                          std::string("strategy 'zero': ") + e.what());
    }
    put_metric("zero/loss_scale", scaler_->scale());
    if (overflow && rank_ == 0)
      log(RH_LOG_WARN, "strategy 'zero': gradient overflow at optimizer step " +
                           std::to_string(steps_) + " (loss scale " + std::to_string(scale_before) +
                           ", now " + std::to_string(scaler_->scale()) +
                           "): step skipped on every rank");
    step = !overflow;
  }
  if (step && cfg_.gradient_clipping > 0) {
    // The host's clip_grad arithmetic (rh/cpp/torch_exact_norm.hpp): exact, so
    // the same norm as ddp's over whole gradients.
    rh::ExactNormSum sum(2);
    for (Group& g : groups_) sum.add(g.grad);
    rh::ExactNormSum::Parts parts = sum.parts();
    for (double& part : parts) part = reduce_grad_norm(2.0, part);
    const double norm = std::sqrt(rh::ExactNormSum::total(parts, 2));
    const double coef = cfg_.gradient_clipping / (norm + 1e-6);
    if (coef < 1)
      for (Group& g : groups_) g.grad.mul_(coef);
  }
  ++steps_;
  if (!step) put_comm_metrics();
  return step;
}

double ZeroStrategy::reduce_grad_norm(double norm_type, double local) {
  if (alone()) return local;
  at::Tensor t = at::scalar_tensor(local, at::kDouble).reshape({1});
  t = t.to(groups_.front().grad.device());
  all_reduce(t, std::isinf(norm_type) ? RH_REDUCE_MAX : RH_REDUCE_SUM);
  return t.cpu().item<double>();
}

// ---- Gradients ----------------------------------------------------------------

void ZeroStrategy::on_grad_ready(void* self, size_t index) {
  static_cast<ZeroStrategy*>(self)->grad_ready(index);
}

void ZeroStrategy::grad_ready(size_t index) {
  // Stage 1 accumulating in float32 (hold_) takes it; in float32 the
  // gradient stays in the parameter until the window's last backward.
  if (!reduce_now_ && !hold_) return;
  const int k = group_of_[index];
  if (k < 0) return;
  Group& g = groups_[static_cast<size_t>(k)];
  if (alone()) {  // into `grad` at once: nothing to reduce
    take_local(g, static_cast<size_t>(member_of_[index]));
    return;
  }
  if (!g.reduce.taken()) allocate_flat_grad(g);
  take_grad(g, static_cast<size_t>(member_of_[index]));
  if (hold_) return;  // reduced at the window's last backward
  if (++g.ready < static_cast<int>(g.members.size())) return;
  while (next_launch_ < groups_.size() &&
         groups_[next_launch_].ready == static_cast<int>(groups_[next_launch_].members.size()))
    launch(next_launch_++);
}

// Reduce-scatters a group's flat gradient: rank r gets the sum of chunk r.
void ZeroStrategy::launch(size_t k) {
  RECORD_USER_SCOPE("zero::reduce_scatter");
  Group& g = groups_[k];
  if (!g.reduce.taken()) allocate_flat_grad(g);
  // A gradient still in its parameter (accumulated before this reducing
  // backward and not produced again) is taken now; one that never arrived
  // (an unused parameter) counts as zeros.
  for (size_t j = 0; j < g.members.size(); ++j)
    if (!g.filled[j] && !take_grad(g, j) && !g.held[j])
      g.reduce.flat.narrow(0, g.members[j].offset, g.members[j].numel).zero_();
  if (cfg_.zero_optimization.reduce_scatter) {
    // Accumulating: into a temporary that finish_reduce adds to grad.
    if (accumulating_) g.reduce.out = at::empty_like(g.grad);
    comm_.reduce_scatter(world_, g.reduce.flat, accumulating_ ? g.reduce.out : g.grad,
                         RH_REDUCE_SUM, g.reduce.f);
  } else {
    // reduce_scatter: false (DeepSpeed's all-reduce path): the whole flat
    // buffer summed in place, this rank's chunk taken in finish_reduce.
    comm_.all_reduce_async(world_, g.reduce.flat, g.reduce.f);
  }
  // overlap_comm: one reduce-scatter in flight while the next group fills
  // (DeepSpeed's double buffering); off: each one finishes at once. Either
  // way a group's buffer goes back to the pool as soon as it is reduced.
  in_flight_.push_back(k);
  const size_t keep = cfg_.zero_optimization.overlap_comm ? 1 : 0;
  while (in_flight_.size() > keep) finish_reduce(groups_[in_flight_.front()]);
}

// Copies member j's gradient (/ N) into its group's flat buffer, or adds
// it to the sum held there (stage 1 accumulating in float32), and
// releases it; false when the parameter has none.
bool ZeroStrategy::take_grad(Group& g, size_t j) {
  const Member& m = g.members[j];
  DLManagedTensor* view = nullptr;
  rh::check(host_, api_->Model_GetGrad(model_, m.param, &view));
  if (view == nullptr) return false;
  at::Tensor slice = g.reduce.flat.narrow(0, m.offset, m.numel);
  const at::Tensor grad = rh::borrow_tensor(view).reshape({-1}).to(at::kFloat);
  if (g.held[j])
    slice.add_(grad / world_size_tensor_);
  else
    at::div_out(slice, grad, world_size_tensor_);
  rh::check(host_, api_->Model_ReleaseGrad(model_, m.param));  // no full gradient kept
  g.filled[j] = 1;
  g.held[j] = hold_ || g.held[j];
  return true;
}

// ---- One rank -------------------------------------------------------------------

// What N ranks' reduce-scatter leaves in `grad`, without one.
void ZeroStrategy::sync_alone(bool sync) {
  if (!reduce_now_) return;  // stage 1 accumulating: the gradients stay in the parameters
  // Gradients not taken yet (stage 1 in bf16 / fp16: all of them); one
  // that never arrived counts as zeros.
  for (Group& g : groups_)
    for (size_t j = 0; j < g.members.size(); ++j)
      if (!g.filled[j] && !take_local(g, j) && !accumulating_)
        g.grad.narrow(0, g.members[j].offset, g.members[j].numel).zero_();
  accumulating_ = !sync;  // the next backward adds to grad unless a step comes first
}

// Member j's gradient copied (cast) into its piece of `grad`, or added
// to it while accumulating, and released; false when the parameter has
// none.
bool ZeroStrategy::take_local(Group& g, size_t j) {
  const Member& m = g.members[j];
  DLManagedTensor* view = nullptr;
  rh::check(host_, api_->Model_GetGrad(model_, m.param, &view));
  if (view == nullptr) return false;
  rh::sharding::take_into(g.grad, m.offset, m.numel, view, accumulating_);
  rh::check(host_, api_->Model_ReleaseGrad(model_, m.param));
  g.filled[j] = 1;
  return true;
}

void ZeroStrategy::finish_reduce(Group& g) {
  if (g.reduce.f.work == nullptr) return;
  RECORD_USER_SCOPE("zero::wait");
  wait(g.reduce.f);
  if (!cfg_.zero_optimization.reduce_scatter) {  // all-reduced: take this rank's chunk
    const at::Tensor mine = g.reduce.flat.narrow(0, rank_ * g.chunk, g.chunk);
    if (accumulating_)
      g.grad.add_(mine);
    else
      g.grad.copy_(mine);
  } else if (g.reduce.out.defined()) {
    g.grad.add_(g.reduce.out);
  }
  g.reduce.release(grad_pool_);  // the full gradient is gone
  leave_in_flight(static_cast<size_t>(&g - groups_.data()));
}

void ZeroStrategy::allocate_flat_grad(Group& g) {
  at::Tensor& flat = g.reduce.take(grad_pool_, g.chunk * world_size_);
  flat.narrow(0, g.numel, g.chunk * world_size_ - g.numel).zero_();  // the padding
  std::fill(g.filled.begin(), g.filled.end(), 0);
  std::fill(g.held.begin(), g.held.end(), 0);
}

void ZeroStrategy::all_reduce(at::Tensor& t, rh_ReduceOp op) {
  RECORD_USER_SCOPE("zero::all_reduce");
  comm_.all_reduce(world_, t, op);
}

}  // namespace rh::zero
