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
// A world of one rank communicates nothing: no gradient callbacks, no
// buckets (no copy, no memory), no buffer broadcast, no metrics; each
// gradient stays where backward wrote it, as under `single` (issue 30: ddp
// on 1 rank cost 1.06-1.30 x single on a GPU). The bucket plan is still
// made and saved, so a checkpoint moves to more ranks as any other.
//
// The bucket plan is rebuilt once, from the order gradients arrived in the
// first synchronised step, and saved with the checkpoint (StateExport): a
// resumed run sums in the same buckets, hence the same order, as the
// uninterrupted one (with 3+ ranks a ring all-reduce's result depends on the
// bucket layout).
//
// clang-format off
//   strategy:
//     type: ddp
//     bucket_cap_mb: 25               # later buckets
//     first_bucket_mb: 1              # the first bucket, small so that communication starts early
//     find_unused_parameters: false   # true: parameters may go unused (see before_backward):
//                                     # one small all-reduce per step finds them; they no longer
//                                     # hold back later buckets, and keep no gradient where no
//                                     # rank used them
//     broadcast_buffers: true         # rank 0's buffers (batch-norm statistics) after every step, one broadcast
//     device: auto                    # auto (cuda:LOCAL_RANK when LibTorch sees GPUs, else cpu) | cpu | cuda
// clang-format on
//
// Metrics of every step that synchronises: ddp/comm_bytes (bytes this rank
// handed to collectives: the gradient buckets, plus the buffers' broadcast,
// find_unused_parameters' usage exchange and late gradients, and the bucket
// order broadcast once after the first step) and ddp/comm_ms (time the
// training thread spent in communication calls: issuing buckets, waiting
// for them, blocking collectives; the communication *not* hidden behind
// compute), ddp/grad_bytes (the buckets, which hold every gradient).
// Profiler ranges (hook `profiler`): ddp::all_reduce where a
// bucket is copied in and issued, async:ddp::all_reduce bucket <b> from
// issue until its wait returns (an async track in the trace: the time in
// flight, which the communicator's own threads cannot show, since the
// profiler records only LibTorch's threads), ddp::wait, ddp::broadcast_buffers,
// ddp::usage_exchange, ddp::late_gradients, ddp::rebuild_buckets.
#include <ATen/record_function.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "GradBucket.hpp"
#include "rh/cpp/plugin.hpp"
#include "rh/cpp/torch.hpp"

namespace {

using rh::ddp::BucketPlan;

// State keys (the runner saves them as "strategy.<key>").
constexpr const char* kPlanParams = "bucket_plan.params";    // indices, bucket after bucket
constexpr const char* kPlanLengths = "bucket_plan.lengths";  // parameters per bucket
// first_bucket_mb and bucket_cap_mb in bytes, and 1 once rebuilt from the
// observed order (0: still the initial reverse-order plan)
constexpr const char* kPlanMeta = "bucket_plan.meta";
constexpr const char* kUnusedEverywhere = "unused_everywhere";  // per parameter, 0/1

using Clock = std::chrono::steady_clock;

// Adds the time of its scope to `total_s` (communication time of the step).
class CommTimer {
 public:
  explicit CommTimer(double& total_s) : total_s_(total_s), start_(Clock::now()) {}
  ~CommTimer() { total_s_ += std::chrono::duration<double>(Clock::now() - start_).count(); }
  CommTimer(const CommTimer&) = delete;
  CommTimer& operator=(const CommTimer&) = delete;

 private:
  double& total_s_;
  Clock::time_point start_;
};

int64_t bytes_of(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

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
    // On CUDA: the device the host assigns this rank (its one rule, shared
    // with the nccl communicator); a 1.2 host did not say, cuda:<local rank>.
    const bool host_assigns = RH_STRUCT_HAS(&args, rh_SetupEnvArgs, rank_device) &&
                              args.rank_device.device_type == kDLCUDA;
    args.device = !cuda          ? DLDevice{kDLCPU, 0}
                  : host_assigns ? args.rank_device
                                 : DLDevice{kDLCUDA, args.local_rank};
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

  void before_backward(bool sync) {
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

  void sync_gradients(bool sync) {
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

  // Rank 0's buffers to every rank, all in one broadcast: the buffers'
  // bytes side by side in one byte tensor (a broadcast copies bytes, so
  // buffers of any dtype share it).
  void after_optimizer_step() {
    if (alone()) return;
    broadcast_buffers();
    put_comm_metrics();
  }

  void broadcast_buffers() {
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
        throw rh::Exception(
            RH_ERROR_UNIMPLEMENTED,
            "strategy 'ddp': broadcast_buffers needs every buffer on one device; '" +
                names.front() + "' is on " + buffers.front().device().str() + ", '" + names.back() +
                "' on " + buffers.back().device().str());
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
  void put_comm_metrics() {
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

  // The bucket plan, once rebuilt from the observed order: a resumed run
  // must sum in the same buckets as the uninterrupted one. Also the caps it
  // was planned with and, with find_unused_parameters, which parameters no
  // rank had a gradient for in the last step (the next step's prediction).
  void state_export(rh_StateDict* dict) {
    std::vector<int64_t> flat, lengths;
    rh::ddp::flatten_plan(plan_, flat, lengths);
    put_longs(dict, kPlanParams, flat);
    put_longs(dict, kPlanLengths, lengths);
    put_longs(dict, kPlanMeta,
              {static_cast<int64_t>(first_cap_bytes_), static_cast<int64_t>(cap_bytes_),
               rebuilt_ ? 1 : 0});
    if (find_unused_)
      put_longs(dict, kUnusedEverywhere,
                std::vector<int64_t>(unused_everywhere_.begin(), unused_everywhere_.end()));
  }

  void state_import(const rh_StateDict* dict) {
    std::vector<int64_t> flat, lengths, meta;
    if (!get_longs(dict, kPlanParams, flat) || !get_longs(dict, kPlanLengths, lengths) ||
        !get_longs(dict, kPlanMeta, meta)) {
      log(RH_LOG_WARN,
          "strategy 'ddp': the checkpoint has no bucket plan (another strategy or an older "
          "runner-host wrote it): "
          "buckets are planned again after the first step, so gradients may be summed in another "
          "order than in the run that wrote it");
      return;
    }
    if (meta.size() != 3)
      throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                          "strategy 'ddp': checkpoint entry 'strategy." + std::string(kPlanMeta) +
                              "' has " + std::to_string(meta.size()) + " values, expected 3");
    BucketPlan plan;
    try {
      plan = rh::ddp::unflatten_plan(flat, lengths, trainable_, numel_.size());
    } catch (const std::invalid_argument& e) {
      throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                          "strategy 'ddp': the bucket plan in the checkpoint (strategy." +
                              std::string(kPlanParams) + ", strategy." + kPlanLengths +
                              ") does not fit this model: " + e.what());
    }
    const bool rebuilt = meta[2] != 0;
    if (meta[0] != static_cast<int64_t>(first_cap_bytes_) ||
        meta[1] != static_cast<int64_t>(cap_bytes_)) {
      log(RH_LOG_WARN,
          "strategy 'ddp': first_bucket_mb / bucket_cap_mb differ from the checkpoint's: buckets "
          "are planned again from its gradient order with the new sizes, so gradients are summed "
          "in another order than in the run that wrote it");
      std::vector<size_t> order(flat.begin(), flat.end());
      plan = rh::ddp::plan_buckets(order, bytes_, numel_.size(), first_cap_bytes_, cap_bytes_);
    }
    set_plan(std::move(plan));
    // No second rebuild: it would see another first step (alone: none).
    rebuilt_ = rebuilt;
    record_order_ = !rebuilt && !alone();
    std::vector<int64_t> unused;
    if (find_unused_ && get_longs(dict, kUnusedEverywhere, unused)) {
      if (unused.size() != unused_everywhere_.size())
        throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                            "strategy 'ddp': checkpoint entry 'strategy." +
                                std::string(kUnusedEverywhere) + "' has " +
                                std::to_string(unused.size()) + " values, this model has " +
                                std::to_string(unused_everywhere_.size()) + " parameters");
      for (size_t i = 0; i < unused.size(); ++i) unused_everywhere_[i] = unused[i] != 0 ? 1 : 0;
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
  void launch_ready_buckets() {
    while (next_launch_ < plan_.buckets.size() &&
           ready_[next_launch_] == plan_.buckets[next_launch_].size())
      launch(next_launch_++);
  }

  at::Tensor grad_of(size_t index) {
    DLManagedTensor* view = nullptr;
    rh::check(host_, api_->Model_GetGrad(model_, index, &view));
    return view == nullptr ? at::Tensor() : rh::borrow_tensor(view);
  }

  std::string param_name(size_t index) {
    rh_ParamInfo info{};
    info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
    rh::check(host_, api_->Model_GetParam(model_, index, &info));
    return std::string(info.name.data, info.name.size);
  }

  at::Tensor slice_of(size_t i) {
    return flats_[plan_.bucket_of[i]].narrow(0, offset_in_bucket_[i], numel_[i]);
  }

  // Copies the bucket's gradients / world size into its flat buffer, makes
  // each of them its slice of the buffer, and starts the sum without
  // waiting. A parameter without a gradient (yet) contributes zeros; its
  // slice becomes its gradient only in publish_gradients, after backward,
  // so that a gradient arriving late is never accumulated into memory that
  // is being reduced.
  void launch(size_t b) {
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

  void bind_grad(size_t i, const at::Tensor& slice) {
    at::Tensor shaped = slice.view(shapes_[i]);
    DLManagedTensor* dl = rh::export_tensor(shaped);
    rh_Error* err = api_->Model_BindGrad(model_, i, dl);
    if (err != nullptr) dl->deleter(dl);  // on error the tensor stays ours
    rh::check(host_, err);
  }

  void wait_bucket(size_t b) {
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
  void start_usage_exchange() {
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

  void finish_usage_exchange() {
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
  void add_late_gradients(const std::vector<size_t>& params) {
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
  void publish_gradients() {
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
  void warn_about_unused_parameters() {
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

  void put_longs(rh_StateDict* dict, const char* key, const std::vector<int64_t>& values) {
    rh::put_longs(host_, dict, key, values);
  }
  bool get_longs(const rh_StateDict* dict, const char* key, std::vector<int64_t>& out) {
    return rh::get_longs(host_, dict, key, out, "strategy 'ddp'");
  }

  // After the first iteration, buckets follow the order gradients actually
  // arrived in — rank 0's order, so that all ranks agree.
  void rebuild_from_observed_order() {
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

  bool alone() const { return world_size_ == 1; }

  void set_plan(BucketPlan plan) {
    release_works();
    plan_ = std::move(plan);
    ready_.assign(plan_.buckets.size(), 0);
    works_.assign(plan_.buckets.size(), nullptr);
    dl_.assign(plan_.buckets.size(), nullptr);
    in_flight_.resize(plan_.buckets.size());
    flats_.clear();
    offset_in_bucket_.assign(numel_.size(), 0);
    for (const auto& bucket : plan_.buckets) {
      int64_t total = 0;
      for (size_t i : bucket) {
        offset_in_bucket_[i] = total;
        total += numel_[i];
      }
      if (alone()) continue;  // the plan only, for checkpoints: no bucket memory
      flats_.push_back(
          at::empty({total}, at::TensorOptions().dtype(dtype_).device(device_of_params_)));
    }
  }

  void release_works() {
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
  // Per bucket: its profiler range while its all-reduce is in flight (empty
  // when no profiler is on).
  std::vector<std::unique_ptr<at::RecordFunction>> in_flight_;
  int64_t comm_bytes_ = 0;  // this step's communication (put_comm_metrics)
  double comm_s_ = 0;
  size_t next_launch_ = 0;
  bool sync_ = true;
  bool in_backward_ = false;
  size_t launched_in_backward_ = 0;
  bool record_order_ = false;  // rebuild the plan after this step (the first synchronised one)
  // The plan follows an observed gradient order (saved: a resumed run does
  // not rebuild it again). Never alone: one rank observes nothing, so more
  // ranks resuming its checkpoint still rebuild theirs.
  bool rebuilt_ = false;
  std::vector<size_t> observed_;
  std::vector<int64_t> offset_in_bucket_;  // parameter -> first element in its bucket
  std::vector<char> seen_;                 // this backward: parameter's gradient arrived
  std::vector<char> predicted_unused_;     // this backward: counted ready up-front
  std::vector<char> late_;                 // predicted unused, arrived after its bucket left
  std::vector<char> bound_;                // this step: its gradient is its bucket slice
  // find_unused_parameters: no rank had a gradient for it in the last
  // synchronised step (saved with the checkpoint: the next step's prediction).
  std::vector<char> unused_everywhere_;
  at::Tensor usage_;  // the usage exchange in flight
  DLManagedTensor* usage_dl_ = nullptr;
  rh_CommWork* usage_work_ = nullptr;
  at::Tensor buffer_bytes_;  // every buffer's bytes, broadcast from rank 0
  int64_t twice_ = -1;       // first parameter whose gradient arrived twice
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
