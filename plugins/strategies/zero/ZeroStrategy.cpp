// Strategy `zero`: ZeRO stages 1, 2 and 3 (Rajbhandari et al., as DeepSpeed
// implements them), configured with DeepSpeed's keys (ZeroConfig.hpp).
//
// The layout. The trainable parameters are cut into *groups* (at most
// reduce_bucket_size elements each; at stage 3 a group never spans two
// units). A group is one flat vector, zero-padded to a multiple of the world
// size N and split into N equal chunks: rank r owns chunk r of every group.
// Per group and rank:
//   master  [chunk] float32  this rank's part of the parameters' values: the
//                            optimizer updates it (the fp32 master partition)
//   grad    [chunk] float32  this rank's part of the averaged gradient: what
//                            the optimizer reads
// The optimizer gets, per parameter, the piece of it that lies in this
// rank's chunk (a view into master and grad) under the parameter's own name,
// so paramwise_cfg works and checkpoints name their state naturally
// (rh_OptimParam.full_shape / full_offset say where the piece lies).
//
// One step:
//   backward       each gradient, when ready, is copied (/ N) into its
//                  group's flat float32 buffer and released; a group whose
//                  gradients are all in is reduce-scattered at once
//                  (asynchronously, in group order: every rank issues the
//                  same collectives in the same order) into `grad`, and its
//                  flat buffer is freed after. Stage 1 reduces only on the
//                  backward that ends an accumulation window (the full
//                  gradients accumulate in the parameters until then);
//                  stages 2 and 3 reduce every micro-batch and accumulate
//                  into `grad` (DeepSpeed's rule): no full gradient outlives
//                  its group's reduction.
//                  Group buffers come from a pool (reused from step to
//                  step); overlap_comm keeps one reduce-scatter in flight
//                  while the next group fills (off: each one finishes at
//                  once); reduce_scatter: false all-reduces the buffer and
//                  takes this rank's chunk (DeepSpeed's other path).
//   SyncGradients  reduce-scatters the groups not reduced yet (gradients
//                  that never arrived count as zeros) and waits for all.
//   ShouldStep     fp16: unscales and checks for inf/nan on every rank; an
//                  overflow anywhere skips the step everywhere and updates
//                  the loss scaler (DeepSpeed's rules, LossScaler.hpp).
//                  gradient_clipping: clips by the global norm.
//   the host's optimizer steps every rank's masters.
//   AfterOptimizerStep  stages 1 and 2: all-gathers every group's masters
//                  (in allgather_bucket_size pieces) into the parameters.
//                  Stage 3: only the persistent groups (below).
//
// Stage 3 frees the parameters' memory (Model_FreeParamStorage: the storage
// is resized to 0; the tensor and what autograd saved of it stay) and
// gathers a unit's groups before its forward and again before its backward
// (unit callbacks), the next units prefetched while their elements fit in
// stage3_prefetch_bucket_size (and the gathered total in
// stage3_max_live_parameters); it frees them after the unit's forward and
// after its backward. Parameters of at most
// stage3_param_persistence_threshold elements, and tied ones (gpt's
// tie_weights), stay whole on every rank (*persistent* groups, updated
// after each step like stage 1 and 2).
//
// Mixed precision: bf16 / fp16 working parameters (Model_SetParamData at
// Wrap), float32 masters, gradients reduced in float32. fp16 multiplies the
// loss by the scaler's scale (LossScale). LibTorch 1.13 has no fp16 matmul
// on the CPU: fp16 on the CPU is refused there.
//
// Frozen parameters (model.frozen) are in no group: whole everywhere, never
// communicated, never in the optimizer. Buffers are left as they are on
// each rank.
//
// One rank (Comm_Size(world) == 1) communicates nothing, at every stage:
// no collective at all (not even a 1-rank one), no flat gradient buffer,
// no all-gather after the step, no unit callbacks and nothing freed at
// stage 3 (every parameter stays resident), no zero/* metric but the fp16
// loss scale. The layout is the same (groups of one chunk each, the masters
// and gradients the optimizer reads, the checkpoint's shards), so a
// checkpoint moves to and from N ranks as any other. With float32 working
// parameters each parameter *is* its piece of the flat master
// (Model_SetParamData to a view of it at Wrap: the optimizer's in-place
// update is the parameter's update, nothing is copied back), and each
// gradient, when ready, is copied straight into its piece of `grad` (a
// memcpy; added there on later micro-batches of a window: the float32 sums
// autograd would make in the parameter, in the same order) and released.
// With bf16 / fp16 working parameters the gradients are cast into `grad`
// (at stages 2 and 3 as each becomes ready, at stage 1 at the window's end,
// as on N ranks) and the masters cast back into the parameters after the
// step: real work, no communication. The arithmetic is the single
// strategy's (no divide by the world size, no reduction), bit for bit in
// float32.
//
// Test-only environment variables (tests/strategies/zero):
//   RH_ZERO_TEST_FP16_COMPUTE=float32  fp16's loss scaling, overflow checks
//     and skipped steps with float32 working parameters (the CPU cannot run
//     fp16 here); RH_ZERO_TEST_INJECT_INF=<rank>:<step>[,...] puts an inf
//     into that rank's gradient before the overflow check of optimizer step
//     <step> (0-based).
//
// Metrics of every optimizer step: zero/comm_bytes, zero/comm_ms (time the
// training thread spent issuing and waiting), zero/peak_gathered_numel
// (stage 3: the most parameter elements held whole at once, persistent ones
// included), zero/param_bytes, zero/gather_buffer_bytes, zero/grad_bytes
// (what this rank held at the step's peak), zero/loss_scale (fp16).
#include <ATen/record_function.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "CommBuffers.hpp"
#include "ZeroConfig.hpp"
#include "rh/cpp/plugin.hpp"
#include "rh/cpp/torch.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using rh::zero::ZeroConfig;

constexpr const char* kScaler =
    "loss_scaler";  // scale, cur_iter, last_overflow_iter, cur_hysteresis

using rh::sharding::BufferPool;
using rh::sharding::InFlight;

// One parameter's place in its group's flat vector.
struct Member {
  size_t param = 0;
  int64_t offset = 0;  // first element in the group's flat vector
  int64_t numel = 0;
  std::vector<int64_t> shape;
};

struct Group {
  std::vector<Member> members;
  int64_t numel = 0;     // sum of the members' elements
  int64_t chunk = 0;     // ceil(numel / N): each rank's part
  int unit = -1;         // stage 3: the unit whose params it holds; -1: persistent
  bool sharded = false;  // stage 3 unit group: parameters freed between uses
  at::Tensor master;     // [chunk] float32
  at::Tensor grad;       // [chunk] float32
  at::Tensor
      flat_grad;        // [N * chunk] float32 (a view of flat_buf), while this backward collects it
  at::Tensor flat_buf;  // from the gradient pool
  std::vector<char> filled;  // per member: its gradient is in flat_grad
  // Stage 1 in bf16 / fp16 between optimizer steps: per member, flat_grad
  // already holds (float32) the sum of earlier micro-batches' gradients.
  std::vector<char> held;
  at::Tensor rs_out;  // [chunk] float32 when accumulating into grad
  int ready = 0;      // members whose gradient arrived this backward
  InFlight reduce;    // the reduce-scatter
  // Stage 3 gathering.
  bool whole = true;                        // the parameters hold their values
  at::Tensor send, gathered, gathered_buf;  // gathered: a view of gathered_buf (gather pool)
  InFlight gather;
};

class ZeroStrategy {
 public:
  explicit ZeroStrategy(const rh_CreateArgs& args) : host_(args.host), context_(args.context) {
    rh::Config cfg(args.host, args.config);
    const std::string job_dir = RH_STRUCT_HAS(&args, rh_CreateArgs, job_dir) && args.job_dir.data
                                    ? std::string(args.job_dir.data, args.job_dir.size)
                                    : std::string(".");
    cfg_ = ZeroConfig::from_config(cfg, job_dir);
    stage_ = cfg_.zero_optimization.stage;
    if (!cfg_.zero_optimization.contiguous_gradients)
      throw rh::Exception(RH_ERROR_INVALID_CONFIG,
                          "strategy.zero_optimization.contiguous_gradients: false is not "
                          "implemented: runner-host always copies gradients into contiguous group "
                          "buffers (what true means)");
    if (cfg_.fp16_enabled) scaler_ = std::make_unique<rh::zero::LossScaler>(cfg_.fp16);
    if (const char* v = std::getenv("RH_ZERO_TEST_FP16_COMPUTE"))
      fp16_compute_float_ = std::string(v) == "float32";
    working_ = cfg_.bf16_enabled                           ? at::kBFloat16
               : cfg_.fp16_enabled && !fp16_compute_float_ ? at::kHalf
                                                           : at::kFloat;
    // The precision_keys trait: the host's AmpOptimWrapper is refused beside
    // zero's own mixed precision.
    if (cfg_.bf16_enabled) precision_keys_ = "bf16.enabled: true";
    if (cfg_.fp16_enabled)
      precision_keys_ += std::string(precision_keys_.empty() ? "" : ", ") + "fp16.enabled: true";
  }

  ~ZeroStrategy() {
    for (Group& g : groups_)
      for (InFlight* f : {&g.reduce, &g.gather}) f->destroy(host_);
  }

  void traits(rh_StrategyTraits& t) const {
    t.needs_comm = 1;
    t.load_phase = RH_LOAD_AFTER_WRAP;
    t.sharded_checkpoint = 1;
    if (RH_STRUCT_HAS(&t, rh_StrategyTraits, input_dtype) && cfg_.inputs_to_half)
      t.input_dtype = working_ == at::kBFloat16 ? DLDataType{kDLBfloat, 16, 1}
                      : working_ == at::kHalf   ? DLDataType{kDLFloat, 16, 1}
                                                : DLDataType{kDLFloat, 32, 1};
    if (RH_STRUCT_HAS(&t, rh_StrategyTraits, precision_keys))
      t.precision_keys = rh_StringView{precision_keys_.data(), precision_keys_.size()};
  }

  void setup_env(rh_SetupEnvArgs& args) {
    if (args.world == nullptr || host_->Comm_ReduceScatter == nullptr)
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                          "strategy 'zero' needs the host's world communicator");
    world_ = args.world;
    world_size_ = host_->Comm_Size(world_);
    rank_ = host_->Comm_Rank(world_);
    const bool cuda = torch::cuda::is_available();
    const bool host_assigns = RH_STRUCT_HAS(&args, rh_SetupEnvArgs, rank_device) &&
                              args.rank_device.device_type == kDLCUDA;
    args.device = !cuda          ? DLDevice{kDLCPU, 0}
                  : host_assigns ? args.rank_device
                                 : DLDevice{kDLCUDA, args.local_rank};
#if !defined(TORCH_VERSION_MAJOR) || TORCH_VERSION_MAJOR < 2
    if (!cuda && working_ == at::kHalf)
      throw rh::Exception(RH_ERROR_UNIMPLEMENTED,
                          "strategy 'zero': fp16.enabled on the CPU: LibTorch " +
                              std::string(TORCH_VERSION) +
                              " has no fp16 matrix multiply on the CPU; use bf16: {enabled: true}"
                              " (no loss scaling needed) or run on a GPU");
#endif
    world_size_tensor_ = at::scalar_tensor(static_cast<double>(world_size_), at::kDouble);
    alias_ = alone() && working_ == at::kFloat;
    if (const char* v = std::getenv("RH_ZERO_TEST_INJECT_INF")) parse_injections(v);
  }

  void wrap(const rh_WrapArgs& args) {
    model_ = args.model;
    api_ = args.model_api;
    const bool has_13 = RH_STRUCT_HAS(api_, rh_ModelApi, Model_RestoreParamStorage);
    if (!has_13 || api_->Model_SetParamData == nullptr || api_->Model_ReleaseGrad == nullptr ||
        (stage_ == 3 &&
         (api_->Model_AddUnitCallback == nullptr || api_->Model_FreeParamStorage == nullptr)))
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                          "strategy 'zero' needs a host of ABI 1.3 (Model_SetParamData, "
                          "Model_ReleaseGrad, unit callbacks, Model_FreeParamStorage)");
    const size_t n = api_->Model_NumParams(model_);
    names_.resize(n);
    unit_of_.assign(n, 0);
    std::vector<size_t> trainable;
    std::vector<char> tied(n, 0);
    std::vector<at::Tensor> initial(n);  // float32 values before any cast
    for (size_t i = 0; i < n; ++i) {
      rh_ParamInfo info = param_info(i);
      names_[i].assign(info.name.data, info.name.size);
      unit_of_[i] = info.unit;
      tied[i] = RH_STRUCT_HAS(&info, rh_ParamInfo, tied) && info.tied;
      at::Tensor p = rh::borrow_tensor(info.data);
      if (p.scalar_type() != at::kFloat)
        throw rh::Exception(RH_ERROR_UNIMPLEMENTED,
                            "strategy 'zero': parameter '" + names_[i] + "' is " +
                                std::string(c10::toString(p.scalar_type())) +
                                "; the model must be built in float32 (bf16/fp16 come from the "
                                "strategy's bf16 / fp16 sections)");
      all_param_numel_ += p.numel();
      if (info.requires_grad) {
        trainable.push_back(i);
        initial[i] = p.detach().clone();
      } else {
        untracked_numel_ += p.numel();
      }
    }
    if (trainable.empty())
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                          "strategy 'zero': the model has no trainable "
                          "parameter");
    build_groups(trainable, tied);
    // Working precision: every parameter (frozen ones too: the forward
    // mixes them) in bf16 / fp16, before any callback is registered.
    if (working_ != at::kFloat)
      for (size_t i = 0; i < n; ++i) {
        at::Tensor p = rh::borrow_tensor(param_info(i).data);
        DLManagedTensor* dl = rh::export_tensor(p.to(working_).contiguous());
        rh_Error* err = api_->Model_SetParamData(model_, i, dl);
        if (err) dl->deleter(dl);
        rh::check(host_, err);
      }
    const at::Device device = rh::borrow_tensor(param_info(trainable.front()).data).device();
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
    int64_t largest = 0;
    for (const Group& g : groups_) largest = std::max(largest, g.chunk * world_size_);
    grad_pool_.configure(largest, f32);
    gather_pool_.configure(largest, f32.dtype(working_));
    for (Group& g : groups_) {
      g.filled.assign(g.members.size(), 0);
      g.held.assign(g.members.size(), 0);
      g.master = at::zeros({g.chunk}, f32);
      g.grad = at::zeros({g.chunk}, f32);
      master_from(g, [&](const Member& m) { return initial[m.param].reshape({-1}); });
    }
    if (alias_) share_masters();
    for (size_t i : trainable)
      rh::check(host_,
                api_->Model_AddGradReadyCallback(model_, i, &ZeroStrategy::on_grad_ready, this));
    // Stage 3 on one rank: every parameter stays resident (nothing to free,
    // gather or prefetch; no unit callbacks).
    if (stage_ == 3 && !alone()) {
      const int32_t units = static_cast<int32_t>(api_->Model_NumUnits(model_));
      unit_groups_.assign(static_cast<size_t>(units), {});
      for (size_t k = 0; k < groups_.size(); ++k)
        if (groups_[k].sharded) unit_groups_[static_cast<size_t>(groups_[k].unit)].push_back(k);
      for (int32_t u = 0; u < units; ++u)
        for (rh_UnitPhase ph : {RH_UNIT_PRE_FORWARD, RH_UNIT_POST_FORWARD, RH_UNIT_PRE_BACKWARD,
                                RH_UNIT_POST_BACKWARD})
          rh::check(host_,
                    api_->Model_AddUnitCallback(model_, u, ph, &ZeroStrategy::on_unit, this));
      for (Group& g : groups_)  // whole until now
        if (g.sharded) live_ += g.numel;
      for (Group& g : groups_)
        if (g.sharded) free_params(g);
      peak_live_ = live_ + persistent_numel();
      for (size_t u = 0; u < unit_groups_.size(); ++u) {
        int64_t numel = 0;
        for (size_t k : unit_groups_[u]) numel += groups_[k].numel;
        if (numel > cfg_.zero_optimization.stage3_max_live_parameters)
          throw rh::Exception(
              RH_ERROR_INVALID_CONFIG,
              "strategy.zero_optimization.stage3_max_live_parameters: unit '" + unit_name(u) +
                  "' alone has " + std::to_string(numel) + " trainable elements, more than " +
                  std::to_string(cfg_.zero_optimization.stage3_max_live_parameters) +
                  " may be gathered at once");
      }
    }
    std::ostringstream msg;
    int64_t total = 0;
    for (const Group& g : groups_) total += g.numel;
    msg << "strategy 'zero': stage " << stage_ << ", " << groups_.size() << " group(s) of " << total
        << " trainable elements, " << world_size_ << " rank(s), working dtype "
        << c10::toString(working_);
    if (alone())
      msg << "; one rank: no communication"
          << (alias_ ? ", the parameters are the float32 masters" : "");
    log(RH_LOG_INFO, msg.str());
  }

  void optimizer_params(const rh_OptimParamSink& sink) {
    for (Group& g : groups_) {
      const int64_t lo = rank_ * g.chunk, hi = lo + g.chunk;
      for (const Member& m : g.members) {
        const int64_t a = std::max(lo, m.offset), b = std::min(hi, m.offset + m.numel);
        if (a >= b) continue;
        rh_OptimParam p{};
        p.struct_size = RH_OPTIM_PARAM_STRUCT_SIZE;
        p.name = {names_[m.param].data(), names_[m.param].size()};
        p.param = rh::export_tensor(g.master.narrow(0, a - lo, b - a));
        p.grad = rh::export_tensor(g.grad.narrow(0, a - lo, b - a));
        p.full_shape = m.shape.data();
        p.full_ndim = static_cast<int32_t>(m.shape.size());
        p.full_offset = a - m.offset;
        rh::check(host_, sink.add(sink.user_data, &p));
      }
    }
  }

  double loss_scale() { return scaler_ ? scaler_->scale() : 1.0; }

  void before_backward(bool sync) {
    // One rank in float32: every micro-batch's gradients go straight into
    // `grad` (what stage 1 accumulates in the parameters is added there in
    // the same order, the same float32 sums, without holding them).
    // (One rank with bf16 / fp16 working parameters: `grad` is float32 and
    // every micro-batch goes into it at once, as at stage 2: no sum in bf16.)
    reduce_now_ = sync || stage_ >= 2 || alias_ || (alone() && working_ != at::kFloat);
    // Stage 1 with bf16 / fp16 working parameters accumulates the
    // micro-batches of a window in float32, as DeepSpeed does: each
    // gradient is added (cast) to the flat float32 gradient as it arrives
    // and released; the window's last backward reduces the sums.
    hold_ = !sync && stage_ == 1 && working_ != at::kFloat && !alone();
    for (Group& g : groups_) {
      g.ready = 0;
      if (alone() || g.flat_grad.defined()) std::fill(g.filled.begin(), g.filled.end(), 0);
    }
    next_launch_ = 0;
  }

  void sync_gradients(bool sync) {
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

  bool should_step() {
    accumulating_ = false;
    bool step = true;
    if (scaler_) {
      const double inv = 1.0 / scaler_->scale();
      for (Group& g : groups_) g.grad.mul_(inv);
      if (injections_.count(steps_)) {
        log(RH_LOG_WARN, "strategy 'zero': RH_ZERO_TEST_INJECT_INF: an inf in rank " +
                             std::to_string(rank_) + "'s gradient at step " +
                             std::to_string(steps_));
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
                             std::to_string(steps_) + " (loss scale " +
                             std::to_string(scale_before) + ", now " +
                             std::to_string(scaler_->scale()) + "): step skipped on every rank");
      step = !overflow;
    }
    if (step && cfg_.gradient_clipping > 0) {
      const double norm = std::sqrt(reduce_grad_norm(2.0, local_square_sum()));
      const double coef = cfg_.gradient_clipping / (norm + 1e-6);
      if (coef < 1)
        for (Group& g : groups_) g.grad.mul_(coef);
    }
    ++steps_;
    if (!step) put_comm_metrics();
    return step;
  }

  double reduce_grad_norm(double norm_type, double local) {
    if (alone()) return local;
    at::Tensor t = at::scalar_tensor(local, at::kDouble).reshape({1});
    t = t.to(groups_.front().grad.device());
    all_reduce(t, std::isinf(norm_type) ? RH_REDUCE_MAX : RH_REDUCE_SUM);
    return t.cpu().item<double>();
  }

  void after_optimizer_step() {
    if (alone()) {
      // float32: the optimizer updated the parameters themselves. bf16 /
      // fp16: the new masters cast into the working parameters.
      if (!alias_) {
        torch::NoGradGuard no_grad;
        for (Group& g : groups_) scatter_to_params(g, g.master.to(working_));
      }
      return;
    }
    RECORD_USER_SCOPE("zero::all_gather_params");
    for (Group& g : groups_)
      if (!g.sharded) gather_into_params(g, cfg_.zero_optimization.allgather_bucket_size);
    put_comm_metrics();
  }

  void unit_params(int32_t unit, rh_UnitParamsOp op) {
    if (op == RH_UNIT_PARAMS_ADOPT) {
      // The host wrote whole values: every group built from the parameters
      // that hold them now (stages 1/2 and persistent groups: all of them;
      // stage 3: this unit's, which the host gathered first).
      // One rank in float32: the parameters are the masters, nothing to take.
      for (Group& g : groups_) {
        if (alias_ || (g.sharded && (g.unit != unit || !g.whole))) continue;
        master_from(g, [&](const Member& m) {
          return rh::borrow_tensor(param_info(m.param).data).reshape({-1}).to(at::kFloat);
        });
      }
      if (stage_ < 3) return;
    }
    // One rank: every parameter is always whole.
    if (stage_ < 3 || unit < 0 || alone()) return;
    const auto& list = unit_groups_.at(static_cast<size_t>(unit));
    if (op == RH_UNIT_PARAMS_GATHER) {
      for (size_t k : list) start_gather(groups_[k]);
      for (size_t k : list) finish_gather(groups_[k]);
    } else {
      for (size_t k : list) free_params(groups_[k]);
    }
  }

  // The loss scaler's state and the step count. The shards themselves are
  // the host's: it saves them as slices of logical tensors and reshards them
  // for any stage and world size at resume (docs/checkpoint-format.md).
  void state_export(rh_StateDict* dict) {
    if (scaler_) {
      const rh::zero::LossScalerState s = scaler_->state();
      at::Tensor t = at::tensor(
          {s.scale, static_cast<double>(s.cur_iter), static_cast<double>(s.last_overflow_iter),
           static_cast<double>(s.cur_hysteresis)},
          at::kDouble);
      DLManagedTensor* dl = rh::export_tensor(t);
      rh_Error* err = host_->StateDict_PutTensor(dict, kScaler, std::strlen(kScaler), dl);
      dl->deleter(dl);
      rh::check(host_, err);
    }
    put_longs(dict, "steps", {steps_});
  }

  // An empty dict: another strategy wrote the checkpoint (nothing of ours).
  void state_import(const rh_StateDict* dict) {
    std::vector<int64_t> steps;
    if (get_longs(dict, "steps", steps) && steps.size() == 1) steps_ = steps[0];
    if (!scaler_) return;
    const DLManagedTensor* dl = nullptr;
    rh_Error* err = host_->StateDict_GetTensor(dict, kScaler, std::strlen(kScaler), &dl);
    if (err != nullptr && host_->Error_Code(err) == RH_ERROR_NOT_FOUND) {
      host_->Error_Destroy(err);
      log(RH_LOG_WARN,
          "strategy 'zero': the checkpoint has no loss scaler state (fp16 was off "
          "when it was written); the scaler starts afresh");
      return;
    }
    rh::check(host_, err);
    at::Tensor t = rh::borrow_tensor(dl).to(at::kDouble).contiguous();
    if (t.numel() != 4)
      throw rh::Exception(RH_ERROR_INVALID_ARGUMENT, "strategy 'zero': strategy.loss_scaler has " +
                                                         std::to_string(t.numel()) +
                                                         " values, expected 4");
    const double* v = t.data_ptr<double>();
    rh::zero::LossScalerState s;
    s.scale = v[0];
    s.cur_iter = static_cast<int64_t>(v[1]);
    s.last_overflow_iter = static_cast<int64_t>(v[2]);
    s.cur_hysteresis = static_cast<int>(v[3]);
    try {
      scaler_->load_state(s);
    } catch (const std::invalid_argument& e) {
      throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                          std::string("strategy 'zero': strategy.loss_scaler: ") + e.what());
    }
  }

  void teardown() {
    for (Group& g : groups_) {
      finish_reduce(g);
      if (g.gather.work) finish_gather(g);
    }
  }

 private:
  // ---- Layout -----------------------------------------------------------------

  void build_groups(const std::vector<size_t>& trainable, const std::vector<char>& tied) {
    const int64_t cap = cfg_.zero_optimization.reduce_bucket_size;
    const int64_t persist = cfg_.zero_optimization.stage3_param_persistence_threshold;
    // Gradients arrive roughly in reverse registration order: groups are cut
    // in that order, so the first group fills first.
    std::vector<size_t> order(trainable.rbegin(), trainable.rend());
    auto numel_of = [&](size_t i) { return rh::borrow_tensor(param_info(i).data).numel(); };
    auto cut = [&](const std::vector<size_t>& params, int unit, bool sharded) {
      Group g;
      auto close = [&] {
        if (g.members.empty()) return;
        g.unit = unit;
        g.sharded = sharded;
        g.chunk = (g.numel + world_size_ - 1) / world_size_;
        groups_.push_back(std::move(g));
        g = Group{};
      };
      for (size_t i : params) {
        const int64_t n = numel_of(i);
        if (!g.members.empty() && g.numel + n > cap) close();
        Member m;
        m.param = i;
        m.offset = g.numel;
        m.numel = n;
        m.shape = rh::borrow_tensor(param_info(i).data).sizes().vec();
        g.members.push_back(std::move(m));
        g.numel += n;
      }
      close();
    };
    if (stage_ < 3) {
      cut(order, -1, false);
    } else {
      std::map<int, std::vector<size_t>, std::greater<int>> by_unit;  // backward order
      std::vector<size_t> persistent;
      for (size_t i : order) {
        // Tied, small, or in no unit (unit -1: used outside every unit,
        // so no unit's gather would cover it): kept whole on every rank.
        if (tied[i] || numel_of(i) <= persist || unit_of_[i] < 0)
          persistent.push_back(i);
        else
          by_unit[unit_of_[i]].push_back(i);
      }
      for (auto& [unit, params] : by_unit) cut(params, unit, true);
      cut(persistent, -1, false);
    }
    group_of_.assign(names_.size(), -1);
    member_of_.assign(names_.size(), -1);
    for (size_t k = 0; k < groups_.size(); ++k)
      for (size_t j = 0; j < groups_[k].members.size(); ++j) {
        group_of_[groups_[k].members[j].param] = static_cast<int>(k);
        member_of_[groups_[k].members[j].param] = static_cast<int>(j);
      }
  }

  // master = this rank's chunk of the group's flat values (`value(m)`: the
  // member's flattened float32 values).
  template <class F>
  void master_from(Group& g, F value) {
    torch::NoGradGuard no_grad;
    const int64_t lo = rank_ * g.chunk, hi = lo + g.chunk;
    g.master.zero_();
    for (const Member& m : g.members) {
      const int64_t a = std::max(lo, m.offset), b = std::min(hi, m.offset + m.numel);
      if (a >= b) continue;
      g.master.narrow(0, a - lo, b - a).copy_(value(m).narrow(0, a - m.offset, b - a));
    }
  }

  // ---- Gradients ----------------------------------------------------------------

  static void on_grad_ready(void* self, size_t index) {
    static_cast<ZeroStrategy*>(self)->grad_ready(index);
  }

  void grad_ready(size_t index) {
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
    if (!g.flat_grad.defined()) allocate_flat_grad(g);
    take_grad(g, static_cast<size_t>(member_of_[index]));
    if (hold_) return;  // reduced at the window's last backward
    if (++g.ready < static_cast<int>(g.members.size())) return;
    while (next_launch_ < groups_.size() &&
           groups_[next_launch_].ready == static_cast<int>(groups_[next_launch_].members.size()))
      launch(next_launch_++);
  }

  // Reduce-scatters a group's flat gradient: rank r gets the sum of chunk r.
  void launch(size_t k) {
    RECORD_USER_SCOPE("zero::reduce_scatter");
    Group& g = groups_[k];
    if (!g.flat_grad.defined()) allocate_flat_grad(g);
    // A gradient still in its parameter (accumulated before this reducing
    // backward and not produced again) is taken now; one that never arrived
    // (an unused parameter) counts as zeros.
    for (size_t j = 0; j < g.members.size(); ++j)
      if (!g.filled[j] && !take_grad(g, j) && !g.held[j])
        g.flat_grad.narrow(0, g.members[j].offset, g.members[j].numel).zero_();
    g.reduce.in = rh::export_tensor(g.flat_grad);
    const auto t0 = Clock::now();
    if (cfg_.zero_optimization.reduce_scatter) {
      // Accumulating: into a temporary that finish_reduce adds to grad.
      if (accumulating_) g.rs_out = at::empty_like(g.grad);
      g.reduce.out = rh::export_tensor(accumulating_ ? g.rs_out : g.grad);
      rh::check(host_, host_->Comm_ReduceScatter(world_, g.reduce.in, g.reduce.out, RH_REDUCE_SUM,
                                                 &g.reduce.work));
    } else {
      // reduce_scatter: false (DeepSpeed's all-reduce path): the whole flat
      // buffer summed in place, this rank's chunk taken in finish_reduce.
      g.reduce.out = rh::export_tensor(g.flat_grad);
      rh::check(host_, host_->Comm_AllReduce(world_, g.reduce.out, RH_REDUCE_SUM, &g.reduce.work));
    }
    comm_s_ += seconds_since(t0);
    comm_bytes_ += g.flat_grad.numel() * 4;
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
  bool take_grad(Group& g, size_t j) {
    const Member& m = g.members[j];
    DLManagedTensor* view = nullptr;
    rh::check(host_, api_->Model_GetGrad(model_, m.param, &view));
    if (view == nullptr) return false;
    at::Tensor slice = g.flat_grad.narrow(0, m.offset, m.numel);
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

  void wait(InFlight& f) { f.wait(host_, comm_s_); }

  // ---- One rank -------------------------------------------------------------------

  bool alone() const { return world_size_ == 1; }

  // float32: each trainable parameter becomes a view of its piece of its
  // group's flat master (one rank: the piece is the whole parameter), so the
  // optimizer's in-place update is the parameter's update.
  void share_masters() {
    for (Group& g : groups_)
      for (const Member& m : g.members) {
        DLManagedTensor* dl =
            rh::export_tensor(g.master.narrow(0, m.offset, m.numel).view(m.shape));
        rh_Error* err = api_->Model_SetParamData(model_, m.param, dl);
        if (err) dl->deleter(dl);
        rh::check(host_, err);
      }
  }

  // What N ranks' reduce-scatter leaves in `grad`, without one.
  void sync_alone(bool sync) {
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
  bool take_local(Group& g, size_t j) {
    const Member& m = g.members[j];
    DLManagedTensor* view = nullptr;
    rh::check(host_, api_->Model_GetGrad(model_, m.param, &view));
    if (view == nullptr) return false;
    rh::sharding::take_into(g.grad, m.offset, m.numel, view, accumulating_);
    rh::check(host_, api_->Model_ReleaseGrad(model_, m.param));
    g.filled[j] = 1;
    return true;
  }

  void finish_reduce(Group& g) {
    if (g.reduce.work == nullptr) return;
    RECORD_USER_SCOPE("zero::wait");
    wait(g.reduce);
    if (!cfg_.zero_optimization.reduce_scatter) {  // all-reduced: take this rank's chunk
      const at::Tensor mine = g.flat_grad.narrow(0, rank_ * g.chunk, g.chunk);
      if (accumulating_)
        g.grad.add_(mine);
      else
        g.grad.copy_(mine);
    } else if (g.rs_out.defined()) {
      g.grad.add_(g.rs_out);
      g.rs_out = at::Tensor();
    }
    g.flat_grad = at::Tensor();  // the full gradient is gone
    grad_pool_.give(std::move(g.flat_buf));
    g.flat_buf = at::Tensor();
    for (auto it = in_flight_.begin(); it != in_flight_.end(); ++it)
      if (&groups_[*it] == &g) {
        in_flight_.erase(it);
        break;
      }
  }

  void allocate_flat_grad(Group& g) {
    g.flat_buf = grad_pool_.take();
    g.flat_grad = g.flat_buf.narrow(0, 0, g.chunk * world_size_);
    g.flat_grad.narrow(0, g.numel, g.chunk * world_size_ - g.numel).zero_();  // the padding
    std::fill(g.filled.begin(), g.filled.end(), 0);
    std::fill(g.held.begin(), g.held.end(), 0);
  }

  double local_square_sum() {
    double s = 0;
    for (Group& g : groups_) {
      const double n = g.grad.norm().item<double>();
      s += n * n;
    }
    return s;
  }

  // ---- Parameters ------------------------------------------------------------------

  // All-gathers the masters (in the working dtype) into the parameters, in
  // pieces of at most `piece_elements` gathered elements.
  void gather_into_params(Group& g, int64_t piece_elements) {
    torch::NoGradGuard no_grad;
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
      p.f.in = rh::export_tensor(send.narrow(0, p.at, p.len));
      p.f.out = rh::export_tensor(p.out);
      const auto t0 = Clock::now();
      rh::check(host_, host_->Comm_AllGather(world_, p.f.in, p.f.out, &p.f.work));
      comm_s_ += seconds_since(t0);
      comm_bytes_ += p.out.numel() * static_cast<int64_t>(p.out.element_size());
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

  void scatter_to_params(Group& g, const at::Tensor& flat) {
    for (const Member& m : g.members) {
      at::Tensor p = rh::borrow_tensor(param_info(m.param).data);
      p.view({-1}).copy_(flat.narrow(0, m.offset, m.numel));
    }
  }

  // Stage 3: a unit group's parameters whole, asynchronously.
  void start_gather(Group& g) {
    if (g.whole || g.gather.work != nullptr) return;
    RECORD_USER_SCOPE("zero::all_gather");
    for (const Member& m : g.members)
      rh::check(host_, api_->Model_RestoreParamStorage(model_, m.param));
    g.send = g.master.to(working_);
    g.gathered_buf = gather_pool_.take();
    g.gathered = g.gathered_buf.narrow(0, 0, world_size_ * g.chunk);
    g.gather.in = rh::export_tensor(g.send);
    g.gather.out = rh::export_tensor(g.gathered);
    const auto t0 = Clock::now();
    rh::check(host_, host_->Comm_AllGather(world_, g.gather.in, g.gather.out, &g.gather.work));
    comm_s_ += seconds_since(t0);
    comm_bytes_ += g.gathered.numel() * static_cast<int64_t>(g.gathered.element_size());
    live_ += g.numel;
    peak_live_ = std::max(peak_live_, live_ + persistent_numel());
  }

  void finish_gather(Group& g) {
    if (g.whole) return;
    if (g.gather.work == nullptr) start_gather(g);
    RECORD_USER_SCOPE("zero::wait_gather");
    wait(g.gather);
    {
      torch::NoGradGuard no_grad;
      scatter_to_params(g, g.gathered);
    }
    g.send = g.gathered = at::Tensor();
    gather_pool_.give(std::move(g.gathered_buf));
    g.gathered_buf = at::Tensor();
    g.whole = true;
  }

  void free_params(Group& g) {
    if (g.gather.work != nullptr) finish_gather(g);
    if (!g.whole) return;
    for (const Member& m : g.members)
      rh::check(host_, api_->Model_FreeParamStorage(model_, m.param));
    g.whole = false;
    live_ -= g.numel;
  }

  int64_t persistent_numel() const {
    int64_t n = 0;
    for (const Group& g : groups_)
      if (!g.sharded) n += g.numel;
    return n;
  }

  static rh_Error* on_unit(void* self, int32_t unit, rh_UnitPhase phase) {
    auto* s = static_cast<ZeroStrategy*>(self);
    return rh::guard(s->host_, [&] { s->unit_event(unit, phase); });
  }

  // Stage 3 around each unit: gather (and prefetch the next units) before
  // its forward and its backward, free after each.
  void unit_event(int32_t unit, rh_UnitPhase phase) {
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
  void prefetch(int32_t unit, int direction) {
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
      if (numel > budget || live_ + numel > cfg_.zero_optimization.stage3_max_live_parameters)
        return;
      budget -= numel;
      if (pending)
        for (size_t k : unit_groups_[static_cast<size_t>(v)]) start_gather(groups_[k]);
    }
  }

  // ---- Small helpers -----------------------------------------------------------------

  rh_ParamInfo param_info(size_t i) {
    rh_ParamInfo info{};
    info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
    rh::check(host_, api_->Model_GetParam(model_, i, &info));
    return info;
  }

  std::string unit_name(size_t u) {
    rh_StringView v = api_->Model_UnitName(model_, static_cast<int32_t>(u));
    return std::string(v.data, v.size);
  }

  void all_reduce(at::Tensor& t, rh_ReduceOp op) {
    RECORD_USER_SCOPE("zero::all_reduce");
    DLManagedTensor* dl = rh::export_tensor(t);
    const auto t0 = Clock::now();
    rh_Error* err = host_->Comm_AllReduce(world_, dl, op, nullptr);
    comm_s_ += seconds_since(t0);
    dl->deleter(dl);
    rh::check(host_, err);
  }

  static double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

  void put_metric(const std::string& name, double value) {
    rh::check(host_, host_->Metric_Put(context_, name.data(), name.size(), value));
  }

  void put_comm_metrics() {
    if (alone()) return;  // nothing communicated, nothing gathered, nothing to report
    put_metric("zero/comm_bytes", static_cast<double>(comm_bytes_));
    put_metric("zero/comm_ms", 1e3 * comm_s_);
    if (stage_ == 3) put_metric("zero/peak_gathered_numel", static_cast<double>(peak_live_));
    // What this rank held at the step's peak (docs/zero.md, "Memory"):
    // parameters whole in the working dtype (all of them below stage 3;
    // the frozen, persistent and most-gathered at stage 3) and the float32
    // masters; beside them the all-gather buffers (the pool's, each the
    // size of the largest group); gradients: this rank's chunks plus
    // the flat group buffers (a full gradient lives only until it is copied
    // into one; the pool keeps as many as were ever in use at once).
    int64_t chunks = 0;
    for (const Group& g : groups_) chunks += g.chunk;
    const int64_t working = static_cast<int64_t>(c10::elementSize(working_));
    const int64_t whole = stage_ < 3 ? all_param_numel_ : untracked_numel_ + peak_live_;
    put_metric("zero/param_bytes", static_cast<double>(working * whole + 4 * chunks));
    put_metric("zero/gather_buffer_bytes", static_cast<double>(gather_pool_.held_bytes()));
    put_metric("zero/grad_bytes", static_cast<double>(4 * chunks + grad_pool_.held_bytes()));
    comm_bytes_ = 0;
    comm_s_ = 0;
    peak_live_ = live_ + persistent_numel();
  }

  void log(rh_LogLevel level, const std::string& message) {
    host_->Log(context_, level, message.data(), message.size());
  }

  void parse_injections(const std::string& spec) {
    std::stringstream in(spec);
    std::string item;
    while (std::getline(in, item, ',')) {
      const size_t colon = item.find(':');
      if (colon == std::string::npos) continue;
      if (std::stoi(item.substr(0, colon)) == rank_)
        injections_.insert(std::stoll(item.substr(colon + 1)));
    }
  }

  void put_longs(rh_StateDict* dict, const char* key, const std::vector<int64_t>& values) {
    rh::put_longs(host_, dict, key, values);
  }
  bool get_longs(const rh_StateDict* dict, const char* key, std::vector<int64_t>& out) {
    return rh::get_longs(host_, dict, key, out, "strategy 'zero'");
  }

  const rh_HostApi* host_;
  rh_Context* context_;
  ZeroConfig cfg_;
  int stage_ = 1;
  std::unique_ptr<rh::zero::LossScaler> scaler_;
  // One rank with float32 working parameters: the parameters are views of
  // the masters.
  bool alias_ = false;
  std::string precision_keys_;  // the precision_keys trait ("" in float32)
  bool fp16_compute_float_ = false;
  at::ScalarType working_ = at::kFloat;
  rh_Comm* world_ = nullptr;
  int64_t world_size_ = 1;
  int64_t rank_ = 0;
  at::Tensor world_size_tensor_;
  rh_Model* model_ = nullptr;
  const rh_ModelApi* api_ = nullptr;
  std::vector<std::string> names_;
  std::vector<int32_t> unit_of_;
  std::vector<Group> groups_;
  std::vector<int> group_of_, member_of_;         // parameter -> group, member (-1: frozen)
  std::vector<std::vector<size_t>> unit_groups_;  // stage 3: unit -> its groups
  bool reduce_now_ = false;                       // this backward reduce-scatters
  bool hold_ = false;  // this backward adds into the float32 flat gradients (stage 1, bf16/fp16)
  bool accumulating_ = false;  // grad holds earlier micro-batches of this window
  size_t next_launch_ = 0;
  int64_t steps_ = 0;  // optimizer steps taken or skipped
  std::set<int64_t> injections_;
  int64_t comm_bytes_ = 0;
  double comm_s_ = 0;
  int64_t live_ = 0, peak_live_ = 0;  // stage 3: gathered elements of unit groups (+ persistent)
  int64_t all_param_numel_ = 0;       // every parameter, frozen ones too
  int64_t untracked_numel_ = 0;       // stage 3: frozen parameters (always whole)
  BufferPool grad_pool_;              // flat float32 gradient buffers
  BufferPool gather_pool_;            // flat working-dtype buffers of all-gathers
  std::deque<size_t> in_flight_;      // groups whose reduce-scatter is issued, oldest first
};

const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_STRATEGY, RH_STR("zero"),
     RH_STR("ZeRO stages 1-3 (DeepSpeed's keys): optimizer state, gradients and parameters "
            "partitioned across ranks; fp16 loss scaling, bf16"),
     &rh::StrategyAdapter<ZeroStrategy>::vtable},
};

const rh_PluginInfo kInfo = {
    RH_PLUGIN_INFO_STRUCT_SIZE,
    RH_ABI_VERSION_MAJOR,
    RH_ABI_VERSION_MINOR,
    RH_STR("rh_strategy_zero"),
    RH_STR("0.1.0"),
    RH_NATIVE_TAG_TORCH,
    kComponents,
    1,
    nullptr,
    nullptr,
};

}  // namespace

extern "C" RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t, uint32_t) { return &kInfo; }
