// Strategy `ddp`: the instance's lifecycle (configuration, SetupEnv, Wrap,
// the bucket plan's memory) and the plugin's vtable. The design:
// DdpStrategy.hpp.
#include "DdpStrategy.hpp"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <algorithm>
#include <string>
#include <vector>

#include "rh/cpp/memory_estimate.hpp"
#include "rh/cpp/plugin.hpp"
#include "rh/cpp/torch.hpp"

namespace {

size_t megabytes(const rh::Config& cfg, const std::string& key, double fallback) {
  const double mb = cfg.get<double>(key, fallback);
  if (!(mb > 0)) cfg.child(key).throw_error("must be > 0, got " + std::to_string(mb));
  return static_cast<size_t>(mb * 1024 * 1024);
}

}  // namespace

namespace rh::ddp {

DdpStrategy::DdpStrategy(const rh_CreateArgs& args) : host_(args.host), context_(args.context) {
  rh::Config cfg(args.host, args.config);
  cap_bytes_ = megabytes(cfg, "bucket_cap_mb", 25);
  first_cap_bytes_ = megabytes(cfg, "first_bucket_mb", 1);
  find_unused_ = cfg.get<bool>("find_unused_parameters", false);
  broadcast_buffers_ = cfg.get<bool>("broadcast_buffers", true);
  device_ = cfg.get<std::string>("device", "auto");
  if (device_ != "auto" && device_ != "cpu" && device_ != "cuda")
    cfg.child("device").throw_error("expected auto, cpu or cuda, got '" + device_ + "'");
  mesh_.read(cfg);
}

void DdpStrategy::estimate_memory(const rh_MemoryEstimateArgs& args, rh_MemoryEstimate& out) const {
  if (mesh_.size() == 1) return estimate_data_parallel(args, out);
  std::vector<rh_ParamSize> blocks;
  estimate_data_parallel(mesh_.replica_of(args, blocks, "strategy 'ddp'"), out);
}

void DdpStrategy::estimate_data_parallel(const rh_MemoryEstimateArgs& args,
                                         rh_MemoryEstimate& out) const {
  rh::estimate_whole_model(args, out);  // one rank: autograd's gradients, as single
  if (args.world_size == 1) return;
  // The arena: one flat tensor of every trainable gradient, each parameter's
  // .grad a slice of it once its bucket is reduced (set_plan).
  const uint64_t trainable = rh::param_bytes_if(args, rh::is_trainable);
  out.grad_bytes = trainable;
  // Autograd's own gradients live from backward until their bucket launches
  // (launch: copied into the slice, released); buckets launch in order, so
  // at most the largest bucket's waits beside the arena, planned as
  // set_plan does at step 1 (reverse registration order). Inside an
  // accumulation window they all stay until the window's last backward.
  std::vector<size_t> order, bytes(args.num_params, 0);
  for (size_t i = args.num_params; i-- > 0;) {
    if (!rh::is_trainable(args.params[i])) continue;
    order.push_back(i);
    bytes[i] = static_cast<size_t>(args.params[i].numel) *
               static_cast<size_t>(args.params[i].element_size);
  }
  size_t pending = 0;
  for (const auto& bucket :
       plan_buckets(order, bytes, args.num_params, first_cap_bytes_, cap_bytes_).buckets) {
    size_t sum = 0;
    for (size_t i : bucket) sum += bytes[i];
    pending = std::max(pending, sum);
  }
  out.grad_bytes += args.accumulation > 1 ? trainable : pending;
  out.backward_grad_bytes = args.accumulation > 1 ? 0 : pending;
  // broadcast_buffers: a flat copy of the model's buffers, kept (broadcast).
  if (broadcast_buffers_) out.comm_bytes = args.buffer_bytes;
}

void DdpStrategy::setup_env(rh_SetupEnvArgs& args) {
  if (args.world == nullptr || host_->Comm_AllReduce == nullptr)
    throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                        "strategy 'ddp' needs the host's world communicator");
  world_ = mesh_.make_groups(host_, args.world, "strategy 'ddp'");
  world_size_ = host_->Comm_Size(world_);
  const bool cuda = device_ == "cuda" || (device_ == "auto" && torch::cuda::is_available());
  if (cuda && !torch::cuda::is_available())
    throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                        "strategy 'ddp': device cuda asked for, but no GPU is visible");
  // On CUDA: the device the host assigns this rank (its one rule, shared
  // with the nccl communicator); a 1.2 host did not say, cuda:<local rank>.
  const bool host_assigns =
      RH_STRUCT_HAS(&args, rh_SetupEnvArgs, rank_device) && args.rank_device.device_type == kDLCUDA;
  args.device = !cuda          ? DLDevice{kDLCPU, 0}
                : host_assigns ? args.rank_device
                               : DLDevice{kDLCUDA, args.local_rank};
}

void DdpStrategy::wrap(const rh_WrapArgs& args) {
  model_ = args.model;
  api_ = args.model_api;
  can_bind_ = RH_STRUCT_HAS(api_, rh_ModelApi, Model_BindGrad) && api_->Model_BindGrad != nullptr;
  can_release_ =
      RH_STRUCT_HAS(api_, rh_ModelApi, Model_ReleaseGrad) && api_->Model_ReleaseGrad != nullptr;
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
    if (!alone())
      rh::check(host_,
                api_->Model_AddGradReadyCallback(model_, i, &DdpStrategy::on_grad_ready, this));
  }
  numel_.resize(n, 0);
  shapes_.resize(n);
  seen_.assign(n, 0);
  predicted_unused_.assign(n, 0);
  late_.assign(n, 0);
  bound_.assign(n, 0);
  unused_everywhere_.assign(n, 0);
  bytes_ = bytes;
  world_size_tensor_ = at::scalar_tensor(static_cast<double>(world_size_), at::kDouble);
  // Gradients become ready roughly in reverse registration order.
  std::vector<size_t> order(trainable_.rbegin(), trainable_.rend());
  set_plan(rh::ddp::plan_buckets(order, bytes_, n, first_cap_bytes_, cap_bytes_));
  record_order_ = !alone();  // alone, no gradient order is observed
}

// Rank 0's buffers to every rank, all in one broadcast: the buffers'
// bytes side by side in one byte tensor (a broadcast copies bytes, so
// buffers of any dtype share it).
void DdpStrategy::after_optimizer_step() {
  if (alone()) return;
  broadcast_buffers();
  put_comm_metrics();
}

at::Tensor DdpStrategy::grad_of(size_t index) {
  DLManagedTensor* view = nullptr;
  rh::check(host_, api_->Model_GetGrad(model_, index, &view));
  return view == nullptr ? at::Tensor() : rh::borrow_tensor(view);
}

std::string DdpStrategy::param_name(size_t index) {
  rh_ParamInfo info{};
  info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
  rh::check(host_, api_->Model_GetParam(model_, index, &info));
  return std::string(info.name.data, info.name.size);
}

at::Tensor DdpStrategy::slice_of(size_t i) {
  return flats_[plan_.bucket_of[i]].narrow(0, offset_in_bucket_[i], numel_[i]);
}

void DdpStrategy::set_plan(BucketPlan plan) {
  release_works();
  plan_ = std::move(plan);
  ready_.assign(plan_.buckets.size(), 0);
  works_.assign(plan_.buckets.size(), nullptr);
  dl_.assign(plan_.buckets.size(), nullptr);
  in_flight_.resize(plan_.buckets.size());
  flats_.clear();
  offset_in_bucket_.assign(numel_.size(), 0);
  std::vector<int64_t> totals;
  int64_t all = 0;
  for (const auto& bucket : plan_.buckets) {
    int64_t total = 0;
    for (size_t i : bucket) {
      offset_in_bucket_[i] = total;
      total += numel_[i];
    }
    totals.push_back(total);
    all += total;
  }
  if (alone()) return;  // the plan only, for checkpoints: no bucket memory
  // The buckets are slices of one arena of every trainable element, made
  // once: a new plan (the rebuild after the first step, a resumed plan)
  // only cuts it anew. Allocating new buckets there left the old ones
  // alive beside them (bound as the gradients the step is about to read),
  // 4 bytes a parameter more at the second iteration (issue 39). The old
  // bindings read the arena in the old cut until zero_grad drops them,
  // before the next backward writes the new one.
  if (!arena_.defined() || arena_.numel() != all)
    arena_ = at::empty({all}, at::TensorOptions().dtype(dtype_).device(device_of_params_));
  int64_t offset = 0;
  for (int64_t total : totals) {
    flats_.push_back(arena_.narrow(0, offset, total));
    offset += total;
  }
}

void DdpStrategy::release_works() {
  for (auto& range : in_flight_) range.reset();
  for (rh_CommWork*& w : works_) {
    if (w != nullptr) host_->CommWork_Destroy(w);
    w = nullptr;
  }
  for (DLManagedTensor*& d : dl_) {
    if (d != nullptr) d->deleter(d);
    d = nullptr;
  }
  if (usage_work_ != nullptr) host_->CommWork_Destroy(usage_work_);
  usage_work_ = nullptr;
  if (usage_dl_ != nullptr) usage_dl_->deleter(usage_dl_);
  usage_dl_ = nullptr;
}

void DdpStrategy::log(rh_LogLevel level, const std::string& message) {
  rh::log(host_, context_, level, message);
}

}  // namespace rh::ddp

namespace {

using rh::ddp::DdpStrategy;

const rh_Component kComponents[] = {
    rh::strategy_component<DdpStrategy>(
        "ddp", "data parallel: gradient buckets all-reduced during backward"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_strategy_ddp", "0.1.0", RH_NATIVE_TAG_TORCH, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)
