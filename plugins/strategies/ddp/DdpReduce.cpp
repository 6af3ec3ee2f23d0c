// Strategy `ddp`: the communication: gradients copied into their buckets
// and each bucket all-reduced as soon as it is complete, the wait for them,
// find_unused_parameters' usage exchange and late gradients, the plan
// rebuilt from the observed order, the buffers' broadcast and the step's
// metrics.
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "DdpStrategy.hpp"
#include "rh/cpp/torch.hpp"

namespace rh::ddp {

void DdpStrategy::before_backward(bool sync) {
  if (alone()) return;
  sync_ = sync;
  in_backward_ = true;
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(seen_.begin(), seen_.end(), 0);
  std::fill(predicted_unused_.begin(), predicted_unused_.end(), 0);
  std::fill(late_.begin(), late_.end(), 0);
  std::fill(bound_.begin(), bound_.end(), 0);
  twice_ = -1;
  next_launch_ = 0;
  launched_in_backward_ = 0;
  observed_.clear();
  if (!sync || !find_unused_) return;
  // Parameters that no rank had a gradient for in the last step are counted
  // ready up-front, so that their buckets go out as soon as their used
  // parameters are ready instead of at the end of backward. PyTorch's
  // reducer finds unused parameters by walking the autograd graph after
  // forward; the ABI shows a strategy no graph, so ddp predicts from the
  // last step and sync_gradients repairs a wrong guess (a gradient that
  // arrives after its bucket left). Only parameters without a gradient
  // are predicted: one left by accumulation steps must be in the sum.
  for (size_t i : trainable_)
    if (unused_everywhere_[i] && !grad_of(i).defined()) {
      predicted_unused_[i] = 1;
      ++ready_[plan_.bucket_of[i]];
    }
  launch_ready_buckets();
}

void DdpStrategy::sync_gradients(bool sync) {
  in_backward_ = false;
  if (!sync || alone()) return;
  if (twice_ >= 0) {
    rh_ParamInfo info{};
    info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
    rh::check(host_, api_->Model_GetParam(model_, static_cast<size_t>(twice_), &info));
    throw rh::Exception(
        RH_ERROR_FAILED_PRECONDITION,
        "strategy 'ddp': parameter '" + std::string(info.name.data, info.name.size) +
            "' received its gradient twice in one backward (a second backward, or reentrant "
            "checkpointing, before the optimizer step): its bucket was already being reduced; "
            "ddp reduces each gradient once per step (accumulate with accumulative_counts)");
  }
  if (!find_unused_ && !warned_unused_) warn_about_unused_parameters();
  // Buckets whose gradients never all arrived (unused parameters) go out
  // now, in order, so every rank issues the same collectives.
  while (next_launch_ < plan_.buckets.size()) launch(next_launch_++);
  if (find_unused_) start_usage_exchange();
  for (size_t b = 0; b < plan_.buckets.size(); ++b) wait_bucket(b);
  if (find_unused_) finish_usage_exchange();
  publish_gradients();
  // Overlap evidence: buckets whose all-reduce started before backward
  // ended, out of how many.
  static const std::string kLaunched = "ddp/buckets_launched_in_backward";
  static const std::string kBuckets = "ddp/buckets";
  rh::check(host_, host_->Metric_Put(context_, kLaunched.data(), kLaunched.size(),
                                     static_cast<double>(launched_in_backward_)));
  rh::check(host_, host_->Metric_Put(context_, kBuckets.data(), kBuckets.size(),
                                     static_cast<double>(plan_.buckets.size())));
  if (record_order_) rebuild_from_observed_order();
}

void DdpStrategy::broadcast_buffers() {
  if (!broadcast_buffers_) return;
  const size_t n = api_->Model_NumBuffers(model_);
  if (n == 0) return;
  RECORD_USER_SCOPE("ddp::broadcast_buffers");
  std::vector<at::Tensor> buffers;
  std::vector<std::string> names;
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    rh_ParamInfo info{};
    info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
    rh::check(host_, api_->Model_GetBuffer(model_, i, &info));
    buffers.push_back(rh::borrow_tensor(info.data));
    names.emplace_back(info.name.data, info.name.size);
    if (buffers.back().device() != buffers.front().device())
      throw rh::Exception(RH_ERROR_UNIMPLEMENTED,
                          "strategy 'ddp': broadcast_buffers needs every buffer on one device; '" +
                              names.front() + "' is on " + buffers.front().device().str() + ", '" +
                              names.back() + "' on " + buffers.back().device().str());
    total += buffers.back().numel() * static_cast<int64_t>(buffers.back().element_size());
  }
  if (!buffer_bytes_.defined() || buffer_bytes_.numel() != total ||
      buffer_bytes_.device() != buffers.front().device())
    buffer_bytes_ =
        at::empty({total}, at::TensorOptions().dtype(at::kByte).device(buffers.front().device()));
  const bool root = host_->Comm_Rank(world_) == 0;
  auto each_slice = [&](auto&& fn) {
    int64_t offset = 0;
    for (at::Tensor& b : buffers) {
      const int64_t bytes = b.numel() * static_cast<int64_t>(b.element_size());
      fn(b, buffer_bytes_.narrow(0, offset, bytes));
      offset += bytes;
    }
  };
  if (root)
    each_slice([](const at::Tensor& b, at::Tensor slice) {
      slice.copy_(b.contiguous().reshape({-1}).view(at::kByte));
    });
  DLManagedTensor* dl = rh::export_tensor(buffer_bytes_);
  rh_Error* err = nullptr;
  {
    CommTimer timer(comm_s_);
    err = host_->Comm_Broadcast(world_, dl, 0, nullptr);
  }
  comm_bytes_ += bytes_of(buffer_bytes_);
  dl->deleter(dl);
  rh::check(host_, err);
  if (!root)
    each_slice([](at::Tensor& b, const at::Tensor& slice) {
      b.copy_(slice.view(b.scalar_type()).view(b.sizes()));
    });
  // Evidence for the tests: collectives this step spent on buffers.
  static const std::string kMetric = "ddp/buffer_broadcasts";
  rh::check(host_, host_->Metric_Put(context_, kMetric.data(), kMetric.size(), 1.0));
}

// The step's communication (see the header), then counted afresh.
void DdpStrategy::put_comm_metrics() {
  static const std::string kBytes = "ddp/comm_bytes";
  static const std::string kMs = "ddp/comm_ms";
  rh::check(host_, host_->Metric_Put(context_, kBytes.data(), kBytes.size(),
                                     static_cast<double>(comm_bytes_)));
  rh::check(host_, host_->Metric_Put(context_, kMs.data(), kMs.size(), 1e3 * comm_s_));
  // The gradient memory: every gradient is its bucket slice.
  static const std::string kGradBytes = "ddp/grad_bytes";
  int64_t grad_bytes = 0;
  for (const at::Tensor& f : flats_) grad_bytes += f.defined() ? bytes_of(f) : 0;
  rh::check(host_, host_->Metric_Put(context_, kGradBytes.data(), kGradBytes.size(),
                                     static_cast<double>(grad_bytes)));
  comm_bytes_ = 0;
  comm_s_ = 0;
}

void DdpStrategy::on_grad_ready(void* self, size_t index) {
  static_cast<DdpStrategy*>(self)->grad_ready(index);
}

void DdpStrategy::grad_ready(size_t index) {
  if (!sync_) return;
  if (seen_[index]) {  // reported by sync_gradients: a C callback cannot throw
    if (twice_ < 0) twice_ = static_cast<int64_t>(index);
    return;
  }
  seen_[index] = 1;
  observed_.push_back(index);
  const int b = plan_.bucket_of[index];
  if (b < 0) return;
  if (predicted_unused_[index]) {
    // Counted ready up-front. If its bucket already left (with zeros for
    // it), sync_gradients adds this gradient afterwards.
    if (static_cast<size_t>(b) < next_launch_) late_[index] = 1;
    return;
  }
  if (++ready_[b] < plan_.buckets[b].size()) return;
  launch_ready_buckets();
}

// Launch in bucket order only: every rank must issue collectives in the
// same order.
void DdpStrategy::launch_ready_buckets() {
  while (next_launch_ < plan_.buckets.size() &&
         ready_[next_launch_] == plan_.buckets[next_launch_].size())
    launch(next_launch_++);
}

// Copies the bucket's gradients / world size into its flat buffer, makes
// each of them its slice of the buffer, and starts the sum without
// waiting. A parameter without a gradient (yet) contributes zeros; its
// slice becomes its gradient only in publish_gradients, after backward,
// so that a gradient arriving late is never accumulated into memory that
// is being reduced.
void DdpStrategy::launch(size_t b) {
  RECORD_USER_SCOPE("ddp::all_reduce");
  for (size_t i : plan_.buckets[b]) {
    at::Tensor slice = slice_of(i);
    at::Tensor g = grad_of(i);
    if (!g.defined()) {
      slice.zero_();
      continue;
    }
    at::div_out(slice, g.reshape({-1}), world_size_tensor_);
    if (can_bind_) {
      bind_grad(i, slice);
      bound_[i] = 1;
    }
  }
  dl_[b] = rh::export_tensor(flats_[b]);
  // Ended by wait_bucket, on the training thread (see the header).
  in_flight_[b] = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (in_flight_[b]->isActive())
    in_flight_[b]->before("async:ddp::all_reduce bucket " + std::to_string(b));
  {
    CommTimer timer(comm_s_);
    rh::check(host_, host_->Comm_AllReduce(world_, dl_[b], RH_REDUCE_SUM, &works_[b]));
  }
  comm_bytes_ += bytes_of(flats_[b]);
  if (in_backward_) ++launched_in_backward_;
}

void DdpStrategy::bind_grad(size_t i, const at::Tensor& slice) {
  // Release the gradient backward wrote before binding the slice in its
  // place: the view Model_GetGrad lent (valid until zero_grad) owns it, so
  // without the release the whole model's autograd gradients stayed alive
  // beside the buckets until the next step's GetGrad, through its forward
  // (issue 39: ddp's peak 4 bytes a parameter above PyTorch DDP's).
  if (can_release_) rh::check(host_, api_->Model_ReleaseGrad(model_, i));
  rh::hand_param_tensor(host_, api_->Model_BindGrad, model_, i, slice.view(shapes_[i]));
}

void DdpStrategy::wait_bucket(size_t b) {
  RECORD_USER_SCOPE("ddp::wait");
  rh_Error* err = nullptr;
  {
    CommTimer timer(comm_s_);
    err = host_->CommWork_Wait(works_[b]);
  }
  in_flight_[b].reset();  // ends its async range
  host_->CommWork_Destroy(works_[b]);
  works_[b] = nullptr;
  dl_[b]->deleter(dl_[b]);
  dl_[b] = nullptr;
  rh::check(host_, err);
}

// find_unused_parameters: one small all-reduce per step, after the buckets
// (PyTorch's reducer exchanges its used-parameter map the same way): per
// trainable parameter, how many ranks have a gradient for it, and on how
// many it arrived after its bucket had left.
void DdpStrategy::start_usage_exchange() {
  RECORD_USER_SCOPE("ddp::usage_exchange");
  const size_t t = trainable_.size();
  std::vector<float> counts(2 * t, 0.0f);
  for (size_t k = 0; k < t; ++k) {
    counts[k] = grad_of(trainable_[k]).defined() ? 1.0f : 0.0f;
    counts[t + k] = late_[trainable_[k]] ? 1.0f : 0.0f;
  }
  usage_ = at::from_blob(counts.data(), {static_cast<int64_t>(2 * t)}, at::kFloat)
               .to(device_of_params_, /*non_blocking=*/false, /*copy=*/true);
  usage_dl_ = rh::export_tensor(usage_);
  CommTimer timer(comm_s_);
  comm_bytes_ += bytes_of(usage_);
  rh::check(host_, host_->Comm_AllReduce(world_, usage_dl_, RH_REDUCE_SUM, &usage_work_));
}

void DdpStrategy::finish_usage_exchange() {
  RECORD_USER_SCOPE("ddp::usage_exchange_wait");
  rh_Error* err = nullptr;
  {
    CommTimer timer(comm_s_);
    err = host_->CommWork_Wait(usage_work_);
  }
  host_->CommWork_Destroy(usage_work_);
  usage_work_ = nullptr;
  usage_dl_->deleter(usage_dl_);
  usage_dl_ = nullptr;
  rh::check(host_, err);
  const at::Tensor counts = usage_.cpu();
  const float* c = counts.data_ptr<float>();
  const size_t t = trainable_.size();
  std::vector<size_t> late_somewhere;
  for (size_t k = 0; k < t; ++k) {
    unused_everywhere_[trainable_[k]] = c[k] == 0.0f ? 1 : 0;
    if (c[t + k] > 0.0f) late_somewhere.push_back(trainable_[k]);
  }
  if (!late_somewhere.empty()) add_late_gradients(late_somewhere);
  static const std::string kLate = "ddp/late_gradients";
  rh::check(host_, host_->Metric_Put(context_, kLate.data(), kLate.size(),
                                     static_cast<double>(late_somewhere.size())));
}

// A parameter predicted unused got its gradient on some rank after its
// bucket had left with zeros for it: every rank all-reduces what it left
// out (its late gradient / world size, or zeros) for those parameters and
// adds it to the summed slice. Correct, but rounded differently from a
// single sum; it only happens when the set of used parameters changes.
void DdpStrategy::add_late_gradients(const std::vector<size_t>& params) {
  RECORD_USER_SCOPE("ddp::late_gradients");
  int64_t total = 0;
  for (size_t i : params) total += numel_[i];
  at::Tensor missed =
      at::zeros({total}, at::TensorOptions().dtype(dtype_).device(device_of_params_));
  int64_t offset = 0;
  for (size_t i : params) {
    if (late_[i]) {
      at::Tensor part = missed.narrow(0, offset, numel_[i]);
      at::div_out(part, grad_of(i).reshape({-1}), world_size_tensor_);
    }
    offset += numel_[i];
  }
  DLManagedTensor* dl = rh::export_tensor(missed);
  rh_Error* err = nullptr;
  {
    CommTimer timer(comm_s_);
    err = host_->Comm_AllReduce(world_, dl, RH_REDUCE_SUM, nullptr);
  }
  comm_bytes_ += bytes_of(missed);
  dl->deleter(dl);
  rh::check(host_, err);
  offset = 0;
  for (size_t i : params) {
    slice_of(i).add_(missed.narrow(0, offset, numel_[i]));
    offset += numel_[i];
  }
}

// Once every sum is complete: a gradient that is not its bucket slice yet
// becomes it (a host older than ABI 1.2 cannot bind: the values are copied
// back). With find_unused_parameters a parameter no rank has a gradient
// for keeps none, as in a single process (the optimizer skips it).
void DdpStrategy::publish_gradients() {
  for (size_t i : trainable_) {
    if (bound_[i] || (find_unused_ && unused_everywhere_[i])) continue;
    at::Tensor slice = slice_of(i);
    if (can_bind_) {
      bind_grad(i, slice);
      continue;
    }
    at::Tensor g = grad_of(i);
    if (g.defined()) {
      g.copy_(slice.view_as(g));
    } else {
      DLManagedTensor* dl = rh::export_tensor(slice.view(shapes_[i]));
      rh_Error* set = api_->Model_SetGrad(model_, i, dl);
      dl->deleter(dl);
      rh::check(host_, set);
    }
  }
}

// Says what really happens to a parameter without a gradient when the job
// did not expect one (once per run).
void DdpStrategy::warn_about_unused_parameters() {
  size_t missing = 0, first = 0;
  for (size_t i : trainable_)
    if (!seen_[i] && missing++ == 0) first = i;
  if (missing == 0) return;
  warned_unused_ = true;
  log(RH_LOG_WARN,
      "strategy 'ddp': parameter '" + param_name(first) + "'" +
          (missing > 1 ? " and " + std::to_string(missing - 1) + " more" : std::string()) +
          " received no gradient in this backward. Its bucket and every later one were "
          "all-reduced only after backward ended (no overlap); where it has no gradient it "
          "counts as zero, so it gets the sum of the other ranks' gradients divided by the "
          "world size (zeros when no rank has one, and the optimizer still steps it). If "
          "parameters may go unused, set find_unused_parameters: true: ddp then keeps "
          "communication overlapping backward from the second step on and leaves a parameter "
          "that no rank used without a gradient, as a single process does");
}

// After the first iteration, buckets follow the order gradients actually
// arrived in — rank 0's order, so that all ranks agree.
void DdpStrategy::rebuild_from_observed_order() {
  RECORD_USER_SCOPE("ddp::rebuild_buckets");
  record_order_ = false;
  rebuilt_ = true;
  std::vector<int64_t> order(trainable_.size(), -1);
  std::vector<bool> seen(numel_.size(), false);
  size_t k = 0;
  for (size_t i : observed_)
    if (k < order.size() && !seen[i]) {
      order[k++] = static_cast<int64_t>(i);
      seen[i] = true;
    }
  for (auto it = trainable_.rbegin(); it != trainable_.rend(); ++it)
    if (!seen[*it]) order[k++] = static_cast<int64_t>(*it);
  // On the parameters' device: the nccl communicator takes CUDA tensors only.
  at::Tensor t = at::from_blob(order.data(), {static_cast<int64_t>(order.size())}, at::kLong)
                     .to(device_of_params_);
  DLManagedTensor* dl = rh::export_tensor(t);
  rh_Error* err = nullptr;
  {
    CommTimer timer(comm_s_);
    err = host_->Comm_Broadcast(world_, dl, 0, nullptr);
  }
  comm_bytes_ += bytes_of(t);
  dl->deleter(dl);
  rh::check(host_, err);
  t = t.cpu();
  std::copy(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel(), order.begin());
  std::vector<size_t> agreed(order.begin(), order.end());
  set_plan(rh::ddp::plan_buckets(agreed, bytes_, numel_.size(), first_cap_bytes_, cap_bytes_));
}

}  // namespace rh::ddp
