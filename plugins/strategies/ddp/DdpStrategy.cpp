// Strategy `ddp`: data parallel, every rank holds the whole model.
//
// The host has already verified that every rank built the same parameters
// and broadcast rank 0's weights (lifecycle step 3). This strategy groups
// gradients into buckets (GradBucket.hpp) and all-reduces each bucket
// asynchronously as soon as its last gradient is ready *during* backward, so
// communication overlaps the rest of backward; SyncGradients waits for them.
// Each gradient is copied into its bucket already divided by the world size
// (the average costs no pass of its own) and then *is* its slice of the
// bucket (Model_BindGrad, like PyTorch's gradient_as_bucket_view), so the
// summed values need no copy back. Gradient-accumulation steps
// (BeforeBackward(sync = 0)) do not communicate.
//
// clang-format off
//   strategy:
//     type: ddp
//     bucket_cap_mb: 25               # later buckets
//     first_bucket_mb: 1              # the first bucket, small so that communication starts early
//     find_unused_parameters: false   # true: parameters without a gradient are expected (no warning)
//     broadcast_buffers: true         # rank 0's buffers (batch-norm statistics) after every step
//     device: auto                    # auto (cuda:LOCAL_RANK when LibTorch sees GPUs, else cpu) | cpu | cuda
// clang-format on
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "GradBucket.hpp"
#include "rh/cpp/plugin.hpp"
#include "rh/cpp/torch.hpp"

namespace {

using rh::ddp::BucketPlan;

size_t megabytes(const rh::Config& cfg, const std::string& key, double fallback) {
  const double mb = cfg.get<double>(key, fallback);
  if (!(mb > 0)) cfg.child(key).throw_error("must be > 0, got " + std::to_string(mb));
  return static_cast<size_t>(mb * 1024 * 1024);
}

class DdpStrategy {
 public:
  explicit DdpStrategy(const rh_CreateArgs& args) : host_(args.host), context_(args.context) {
    rh::Config cfg(args.host, args.config);
    cap_bytes_ = megabytes(cfg, "bucket_cap_mb", 25);
    first_cap_bytes_ = megabytes(cfg, "first_bucket_mb", 1);
    find_unused_ = cfg.get<bool>("find_unused_parameters", false);
    broadcast_buffers_ = cfg.get<bool>("broadcast_buffers", true);
    device_ = cfg.get<std::string>("device", "auto");
    if (device_ != "auto" && device_ != "cpu" && device_ != "cuda")
      cfg.child("device").throw_error("expected auto, cpu or cuda, got '" + device_ + "'");
  }

  ~DdpStrategy() { release_works(); }

  void traits(rh_StrategyTraits& t) const { t.needs_comm = 1; }

  void setup_env(rh_SetupEnvArgs& args) {
    if (args.world == nullptr || host_->Comm_AllReduce == nullptr)
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                          "strategy 'ddp' needs the host's world communicator");
    world_ = args.world;
    world_size_ = host_->Comm_Size(world_);
    const bool cuda = device_ == "cuda" || (device_ == "auto" && torch::cuda::is_available());
    if (cuda && !torch::cuda::is_available())
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                          "strategy 'ddp': device cuda asked for, but no GPU is visible");
    args.device = cuda ? DLDevice{kDLCUDA, args.local_rank} : DLDevice{kDLCPU, 0};
  }

  void wrap(const rh_WrapArgs& args) {
    model_ = args.model;
    api_ = args.model_api;
    can_bind_ = RH_STRUCT_HAS(api_, rh_ModelApi, Model_BindGrad) && api_->Model_BindGrad != nullptr;
    const size_t n = api_->Model_NumParams(model_);
    std::vector<size_t> bytes(n, 0);
    trainable_.clear();
    for (size_t i = 0; i < n; ++i) {
      rh_ParamInfo info{};
      info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
      rh::check(host_, api_->Model_GetParam(model_, i, &info));
      at::Tensor p = rh::borrow_tensor(info.data);
      if (!info.requires_grad) continue;
      if (!trainable_.empty() && p.scalar_type() != dtype_)
        throw rh::Exception(RH_ERROR_UNIMPLEMENTED,
                            "strategy 'ddp': parameters of different dtypes are not supported");
      dtype_ = p.scalar_type();
      device_of_params_ = p.device();
      numel_.resize(n, 0);
      numel_[i] = p.numel();
      shapes_.resize(n);
      shapes_[i] = p.sizes().vec();
      bytes[i] = static_cast<size_t>(p.numel()) * p.element_size();
      trainable_.push_back(i);
      rh::check(host_,
                api_->Model_AddGradReadyCallback(model_, i, &DdpStrategy::on_grad_ready, this));
    }
    numel_.resize(n, 0);
    shapes_.resize(n);
    seen_.assign(n, 0);
    bytes_ = bytes;
    world_size_tensor_ = at::scalar_tensor(static_cast<double>(world_size_), at::kDouble);
    // Gradients become ready roughly in reverse registration order.
    std::vector<size_t> order(trainable_.rbegin(), trainable_.rend());
    set_plan(rh::ddp::plan_buckets(order, bytes_, n, first_cap_bytes_, cap_bytes_));
    record_order_ = true;
  }

  void before_backward(bool sync) {
    sync_ = sync;
    in_backward_ = true;
    std::fill(ready_.begin(), ready_.end(), 0);
    std::fill(seen_.begin(), seen_.end(), 0);
    twice_ = -1;
    next_launch_ = 0;
    launched_in_backward_ = 0;
    observed_.clear();
  }

  void sync_gradients(bool sync) {
    in_backward_ = false;
    if (!sync) return;
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
    // Buckets whose gradients never all arrived (unused parameters) are
    // reduced too, in order, so every rank issues the same collectives.
    for (size_t b = next_launch_; b < plan_.buckets.size(); ++b) {
      if (ready_[b] < plan_.buckets[b].size() && !find_unused_ && !warned_unused_) {
        warned_unused_ = true;
        log(RH_LOG_WARN,
            "some parameters received no gradient in this backward; their gradient is the average "
            "of the other ranks' (set find_unused_parameters: true to silence this)");
      }
    }
    while (next_launch_ < plan_.buckets.size()) launch(next_launch_++);
    for (size_t b = 0; b < plan_.buckets.size(); ++b) finish(b);
    // Overlap evidence: buckets whose all-reduce started before backward ended.
    static const std::string kMetric = "ddp/buckets_launched_in_backward";
    rh::check(host_, host_->Metric_Put(context_, kMetric.data(), kMetric.size(),
                                       static_cast<double>(launched_in_backward_)));
    if (record_order_) rebuild_from_observed_order();
  }

  void after_optimizer_step() {
    if (!broadcast_buffers_) return;
    const size_t n = api_->Model_NumBuffers(model_);
    for (size_t i = 0; i < n; ++i) {
      rh_ParamInfo info{};
      info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
      rh::check(host_, api_->Model_GetBuffer(model_, i, &info));
      rh::check(host_, host_->Comm_Broadcast(world_, info.data, 0, nullptr));
    }
  }

 private:
  static void on_grad_ready(void* self, size_t index) {
    static_cast<DdpStrategy*>(self)->grad_ready(index);
  }

  void grad_ready(size_t index) {
    if (!sync_) return;
    if (seen_[index]) {  // reported by sync_gradients: a C callback cannot throw
      if (twice_ < 0) twice_ = static_cast<int64_t>(index);
      return;
    }
    seen_[index] = 1;
    observed_.push_back(index);
    const int b = plan_.bucket_of[index];
    if (b < 0) return;
    if (++ready_[b] < plan_.buckets[b].size()) return;
    // Launch in bucket order only: every rank must issue collectives in the
    // same order.
    while (next_launch_ < plan_.buckets.size() &&
           ready_[next_launch_] == plan_.buckets[next_launch_].size())
      launch(next_launch_++);
  }

  at::Tensor grad_of(size_t index) {
    DLManagedTensor* view = nullptr;
    rh::check(host_, api_->Model_GetGrad(model_, index, &view));
    return view == nullptr ? at::Tensor() : rh::borrow_tensor(view);
  }

  // Copies the bucket's gradients / world size into its flat buffer, makes
  // each gradient its slice of the buffer, and starts the sum without
  // waiting. A parameter without a gradient contributes zeros (and gets the
  // other ranks' average).
  void launch(size_t b) {
    at::Tensor& flat = flats_[b];
    int64_t offset = 0;
    for (size_t i : plan_.buckets[b]) {
      at::Tensor slice = flat.narrow(0, offset, numel_[i]);
      offset += numel_[i];
      at::Tensor g = grad_of(i);
      if (!g.defined()) {
        slice.zero_();
      } else if (g.data_ptr() == slice.data_ptr()) {
        slice.div_(world_size_);  // still bound: the optimizer zeroed in place
        continue;
      } else {
        at::div_out(slice, g.reshape({-1}), world_size_tensor_);
      }
      if (can_bind_) bind_grad(i, slice);
    }
    dl_[b] = rh::export_tensor(flat);
    rh::check(host_, host_->Comm_AllReduce(world_, dl_[b], RH_REDUCE_SUM, &works_[b]));
    if (in_backward_) ++launched_in_backward_;
  }

  void bind_grad(size_t i, const at::Tensor& slice) {
    at::Tensor shaped = slice.view(shapes_[i]);
    DLManagedTensor* dl = rh::export_tensor(shaped);
    rh_Error* err = api_->Model_BindGrad(model_, i, dl);
    if (err != nullptr) dl->deleter(dl);  // on error the tensor stays ours
    rh::check(host_, err);
  }

  // Waits for bucket b. A host older than ABI 1.2 cannot bind gradients to
  // the bucket: the summed values are copied back.
  void finish(size_t b) {
    rh_Error* err = host_->CommWork_Wait(works_[b]);
    host_->CommWork_Destroy(works_[b]);
    works_[b] = nullptr;
    dl_[b]->deleter(dl_[b]);
    dl_[b] = nullptr;
    rh::check(host_, err);
    if (can_bind_) return;
    int64_t offset = 0;
    for (size_t i : plan_.buckets[b]) {
      at::Tensor slice = flats_[b].narrow(0, offset, numel_[i]);
      at::Tensor g = grad_of(i);
      if (g.defined()) {
        g.copy_(slice.view_as(g));
      } else {
        DLManagedTensor* dl = rh::export_tensor(slice);
        rh_Error* set = api_->Model_SetGrad(model_, i, dl);
        dl->deleter(dl);
        rh::check(host_, set);
      }
      offset += numel_[i];
    }
  }

  // After the first iteration, buckets follow the order gradients actually
  // arrived in — rank 0's order, so that all ranks agree.
  void rebuild_from_observed_order() {
    record_order_ = false;
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
    rh_Error* err = host_->Comm_Broadcast(world_, dl, 0, nullptr);
    dl->deleter(dl);
    rh::check(host_, err);
    t = t.cpu();
    std::copy(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel(), order.begin());
    std::vector<size_t> agreed(order.begin(), order.end());
    set_plan(rh::ddp::plan_buckets(agreed, bytes_, numel_.size(), first_cap_bytes_, cap_bytes_));
  }

  void set_plan(BucketPlan plan) {
    release_works();
    plan_ = std::move(plan);
    ready_.assign(plan_.buckets.size(), 0);
    works_.assign(plan_.buckets.size(), nullptr);
    dl_.assign(plan_.buckets.size(), nullptr);
    flats_.clear();
    for (const auto& bucket : plan_.buckets) {
      int64_t total = 0;
      for (size_t i : bucket) total += numel_[i];
      flats_.push_back(
          at::empty({total}, at::TensorOptions().dtype(dtype_).device(device_of_params_)));
    }
  }

  void release_works() {
    for (rh_CommWork*& w : works_) {
      if (w != nullptr) host_->CommWork_Destroy(w);
      w = nullptr;
    }
    for (DLManagedTensor*& d : dl_) {
      if (d != nullptr) d->deleter(d);
      d = nullptr;
    }
  }

  void log(rh_LogLevel level, const std::string& message) {
    rh::log(host_, context_, level, message);
  }

  const rh_HostApi* host_;
  rh_Context* context_;
  size_t cap_bytes_ = 0;
  size_t first_cap_bytes_ = 0;
  bool find_unused_ = false;
  bool broadcast_buffers_ = true;
  std::string device_;

  rh_Comm* world_ = nullptr;
  rh_Model* model_ = nullptr;
  const rh_ModelApi* api_ = nullptr;
  std::vector<size_t> trainable_;
  std::vector<int64_t> numel_;
  std::vector<std::vector<int64_t>> shapes_;
  int world_size_ = 1;
  at::Tensor world_size_tensor_;  // 0-dim divisor of the average
  bool can_bind_ = false;         // the host has Model_BindGrad (ABI >= 1.2)
  std::vector<size_t> bytes_;
  at::ScalarType dtype_ = at::kFloat;
  at::Device device_of_params_ = at::kCPU;

  BucketPlan plan_;
  std::vector<at::Tensor> flats_;
  std::vector<size_t> ready_;
  std::vector<rh_CommWork*> works_;
  std::vector<DLManagedTensor*> dl_;
  size_t next_launch_ = 0;
  bool sync_ = true;
  bool in_backward_ = false;
  size_t launched_in_backward_ = 0;
  bool record_order_ = false;
  std::vector<size_t> observed_;
  std::vector<char> seen_;  // this backward: parameter's gradient arrived
  int64_t twice_ = -1;      // first parameter whose gradient arrived twice
  bool warned_unused_ = false;
};

const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_STRATEGY, RH_STR("ddp"),
     RH_STR("data parallel: gradient buckets all-reduced during backward"),
     &rh::StrategyAdapter<DdpStrategy>::vtable},
};

const rh_PluginInfo kInfo = {
    RH_PLUGIN_INFO_STRUCT_SIZE,
    RH_ABI_VERSION_MAJOR,
    RH_ABI_VERSION_MINOR,
    RH_STR("rh_strategy_ddp"),
    RH_STR("0.1.0"),
    RH_NATIVE_TAG_TORCH,
    kComponents,
    1,
    nullptr,
    nullptr,
};

}  // namespace

extern "C" RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t, uint32_t) { return &kInfo; }
