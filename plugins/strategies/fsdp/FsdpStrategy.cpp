// Strategy `fsdp`: fully sharded data parallel, per parameter, as PyTorch's
// FSDP2 `fully_shard` does it (configuration keys: FsdpConfig.hpp).
//
// The layout. Every trainable parameter the strategy manages is sharded
// along dim 0 over the S ranks of its *shard group* (S = the world for
// full_shard and shard_grad_op, the node's ranks for hybrid_shard, 1 for
// no_shard): with c = ceil(rows / S), shard index i holds rows
// [i c, (i + 1) c) (the last ones zero-padded), as a float32 master the
// optimizer updates under the parameter's own name (rh_OptimParam
// full_shape / full_offset say where). Parameters are grouped by *unit*
// (the model's units; auto_wrap merges small neighbours): a unit's shards
// of every member lie one after the other in a rank *block*, so one
// all-gather makes the unit whole and one reduce-scatter reduces its
// gradients:
//   block of shard i = [member 0 rows of i | member 1 rows of i | ...]
//   all-gather output = [block 0 | block 1 | ... | block S-1]
//
// One step:
//   forward    before a unit's forward its block is all-gathered (in
//              param_dtype) into the parameters' storage (restored for it,
//              Model_RestoreParamStorage), the next forward_prefetch units'
//              gathers issued behind it; after its forward the unit is
//              resharded as reshard_after_forward says: true (full_shard,
//              hybrid_shard) frees the storage (resized to 0: what autograd
//              saved of it shows no memory until restored); false
//              (shard_grad_op) keeps it whole until after backward; N keeps
//              a 1/N piece of the gathered unit so that the backward
//              all-gather runs over N ranks only.
//   backward   before a unit's backward (a hook on its output's gradient) it
//              is gathered again, the next backward_prefetch units (in
//              backward order) behind it, never more than 1 + prefetch
//              units whole at once (a prefetch waits until a unit is freed);
//              after its backward the unit's gradients are copied (/ world)
//              into a flat buffer in reduce_dtype, released, and
//              reduce-scattered over the shard group (one in flight while
//              the next unit computes), then all-reduced across the
//              replicas (hybrid_shard, no_shard), into the float32 sharded
//              gradient the optimizer reads; its storage is freed.
//   accumulation (accumulative_counts) backward passes that do not end the
//              window do not communicate: the full gradients accumulate in
//              the parameters (FSDP2's set_requires_gradient_sync(False));
//              the last one reduces them.
//   after the optimizer step, units that are never freed (no_shard, and the
//              root unit of tied parameters) get their new values
//              (all-gathered, or copied when S = 1).
//
// Frozen parameters (model.frozen) and ignored_modules' parameters are in
// no unit: whole on every rank, never communicated, never in the optimizer
// (an ignored parameter's gradient is dropped with the others after each
// step). A unit mixing frozen and trainable parameters shards only the
// trainable ones. With param_dtype other than float32 every parameter,
// these too, is cast to it (the forward mixes them).
//
// One rank (Comm_Size(world) == 1), whatever the sharding_strategy: the
// shard group is that rank, every unit stays whole (no gather, no free, no
// unit callbacks) and nothing is communicated (no collective at all, no
// flat reduce buffer, no fsdp/* metric). With float32 param_dtype each
// parameter *is* its piece of its unit's master block (Model_SetParamData to
// a view of it at Wrap: the optimizer's in-place update is the parameter's
// update, nothing is copied back) and each gradient, when ready, is copied
// straight into its piece of the unit's grad (a memcpy; added there on
// later micro-batches of a window: the float32 sums autograd would make in
// the parameter, in the same order) and released: the arithmetic of the
// single strategy, bit for bit. With bf16 / fp16 the gradients accumulate
// in the parameters as on N ranks and are cast into the float32 grad at the
// window's end, and the masters are cast back into the parameters after the
// step (real work, not communication); reduce_dtype, the dtype of a
// reduction, has no effect. The layout (masters, optimizer state,
// checkpoint shards) is the same, so a checkpoint moves to and from N
// ranks as any other.
//
// Checkpoints: every rank writes its optimizer state and its masters
// (sharded_checkpoint). state_dict_type full: rank 0 writes the whole model,
// gathered one unit at a time through UnitParams (no rank holds more than
// one unit whole for it); sharded: the trainable parameters only as the
// ranks' shards (sharded_model_state), rebuilt from them at resume.
//
// Metrics of every optimizer step: fsdp/comm_bytes, fsdp/comm_ms (time the
// training thread spent issuing and waiting), fsdp/gather_wait_ms (of it,
// waiting for all-gathers: what prefetching did not hide),
// fsdp/peak_gathered_units and fsdp/peak_gathered_numel (units and
// elements of resharding units held whole at once), fsdp/param_bytes,
// fsdp/grad_bytes, fsdp/gather_buffer_bytes (what this rank held at the
// step's peak, see docs/fsdp.md "Memory").
#include <ATen/record_function.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "CommBuffers.hpp"
#include "FsdpConfig.hpp"
#include "rh/cpp/plugin.hpp"
#include "rh/cpp/torch.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using rh::fsdp::Dtype;
using rh::fsdp::FsdpConfig;
using rh::fsdp::ShardingStrategy;
using rh::sharding::BufferPool;
using rh::sharding::InFlight;

at::ScalarType scalar_type(Dtype d) {
  switch (d) {
    case Dtype::Float32:
      return at::kFloat;
    case Dtype::BFloat16:
      return at::kBFloat16;
    case Dtype::Float16:
      return at::kHalf;
  }
  return at::kFloat;
}

// One parameter's place in its unit's rank blocks.
struct Member {
  size_t param = 0;
  int32_t slot = -1;  // the host's unit for it (UnitParams): its model unit, -1 tied or none
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t row = 1;     // elements of one dim-0 row
  int64_t len = 0;     // elements of each rank block that are this member's (rows per rank x row)
  int64_t offset = 0;  // where they start in a rank block
  bool taken = false;  // one rank, float32: its gradient is in `grad` for this backward
  // Elements of the whole parameter that shard `i` holds (the rest of its
  // `len` is padding).
  int64_t valid(int64_t i) const { return std::clamp<int64_t>(numel - i * len, 0, len); }
};

enum class UnitState { Sharded, Gathering, Whole };

struct Unit {
  std::string name;                  // model unit names, '+'-joined when merged
  std::vector<int32_t> model_units;  // the model's units it covers (none: the root unit)
  std::vector<Member> members;
  int64_t block = 0;  // elements of one rank block
  int64_t numel = 0;  // elements of its parameters, whole
  // Never freed: no_shard, and the root unit (tied parameters, parameters
  // of no unit); it gets its new values after each optimizer step.
  bool persistent = false;
  at::Tensor master;  // [block] float32: this rank's shards
  at::Tensor grad;    // [block] float32: their averaged gradient
  UnitState state = UnitState::Whole;
  at::Tensor piece;  // reshard_after_forward N: this rank's 1/N of the gathered unit
  bool keep_piece = false;
  at::Tensor send, gathered, gathered_buf;  // gathered: a view of gathered_buf
  InFlight gather;
  bool gather_from_piece = false;
  // This backward.
  int backward_done = 0;  // model units whose POST_BACKWARD came
  bool ready = false;     // its gradients are complete
  at::Tensor flat, flat_buf, reduced;
  InFlight reduce;
};

class FsdpStrategy {
 public:
  explicit FsdpStrategy(const rh_CreateArgs& args)
      : host_(args.host), context_(args.context), node_(args.host, args.config) {
    cfg_ = FsdpConfig::from_config(node_);
    param_dtype_ = scalar_type(cfg_.param_dtype);
    reduce_dtype_ = scalar_type(cfg_.reduce_dtype);
    // What makes this fsdp compute or reduce in a precision of its own (the
    // precision_keys trait: the host's AmpOptimWrapper is refused beside it).
    if (cfg_.param_dtype != Dtype::Float32)
      precision_keys_ =
          std::string("mixed_precision.param_dtype: ") + rh::fsdp::dtype_name(cfg_.param_dtype);
    if (cfg_.reduce_dtype != Dtype::Float32)
      precision_keys_ += std::string(precision_keys_.empty() ? "" : ", ") +
                         "mixed_precision.reduce_dtype: " + rh::fsdp::dtype_name(cfg_.reduce_dtype);
  }

  ~FsdpStrategy() {
    for (Unit& u : units_)
      for (InFlight* f : {&u.reduce, &u.gather}) f->destroy(host_);
  }

  void traits(rh_StrategyTraits& t) const {
    t.needs_comm = 1;
    t.load_phase = RH_LOAD_AFTER_WRAP;
    t.sharded_checkpoint = 1;
    if (RH_STRUCT_HAS(&t, rh_StrategyTraits, sharded_model_state))
      t.sharded_model_state = cfg_.sharded_state_dict ? 1 : 0;
    if (RH_STRUCT_HAS(&t, rh_StrategyTraits, load_from_root)) t.load_from_root = 1;
    if (RH_STRUCT_HAS(&t, rh_StrategyTraits, precision_keys))
      t.precision_keys = rh_StringView{precision_keys_.data(), precision_keys_.size()};
    if (RH_STRUCT_HAS(&t, rh_StrategyTraits, input_dtype) && cfg_.cast_forward_inputs &&
        param_dtype_ != at::kFloat)
      t.input_dtype = param_dtype_ == at::kBFloat16 ? DLDataType{kDLBfloat, 16, 1}
                                                    : DLDataType{kDLFloat, 16, 1};
  }

  void setup_env(rh_SetupEnvArgs& args) {
    world_ = args.world;
    if (world_ != nullptr && host_->Comm_ReduceScatter == nullptr)
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                          "strategy 'fsdp' needs the host's reduce-scatter (ABI 1.0 "
                          "communicator)");
    world_size_ = world_ ? host_->Comm_Size(world_) : 1;
    rank_ = world_ ? host_->Comm_Rank(world_) : 0;
    const int64_t launch_local = RH_STRUCT_HAS(&args, rh_SetupEnvArgs, local_world_size)
                                     ? args.local_world_size
                                     : world_size_;
    cfg_.resolve(node_, world_size_, launch_local);
    shards_ = cfg_.shard_group_size;
    reshard_ = cfg_.reshard_after_forward;
    shard_index_ = rank_ % shards_;
    const bool cuda = torch::cuda::is_available();
    const bool host_assigns = RH_STRUCT_HAS(&args, rh_SetupEnvArgs, rank_device) &&
                              args.rank_device.device_type == kDLCUDA;
    args.device = !cuda          ? DLDevice{kDLCPU, 0}
                  : host_assigns ? args.rank_device
                                 : DLDevice{kDLCUDA, args.local_rank};
#if !defined(TORCH_VERSION_MAJOR) || TORCH_VERSION_MAJOR < 2
    if (!cuda && param_dtype_ == at::kHalf)
      node_.child("mixed_precision")
          .child("param_dtype")
          .throw_error("float16 on the CPU: LibTorch " + std::string(TORCH_VERSION) +
                       " has no float16 matrix multiply on the CPU; use bfloat16 or run on a GPU");
#endif
    make_groups();
    alias_ = alone() && param_dtype_ == at::kFloat;
    world_size_tensor_ = at::scalar_tensor(static_cast<double>(world_size_), at::kDouble);
  }

  void wrap(const rh_WrapArgs& args) {
    model_ = args.model;
    api_ = args.model_api;
    if (!RH_STRUCT_HAS(api_, rh_ModelApi, Model_RestoreParamStorage) ||
        api_->Model_SetParamData == nullptr || api_->Model_ReleaseGrad == nullptr ||
        api_->Model_AddUnitCallback == nullptr || api_->Model_FreeParamStorage == nullptr)
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                          "strategy 'fsdp' needs a host of ABI 1.3 (Model_SetParamData, "
                          "Model_ReleaseGrad, unit callbacks, Model_FreeParamStorage)");
    const size_t n = api_->Model_NumParams(model_);
    const auto model_units = static_cast<int32_t>(api_->Model_NumUnits(model_));
    std::vector<rh_ParamInfo> infos(n);
    names_.resize(n);
    std::vector<at::Tensor> initial(n);  // float32 values before any cast
    std::vector<char> managed(n, 0), ignored_used(cfg_.ignored_modules.size(), 0);
    for (size_t i = 0; i < n; ++i) {
      infos[i] = param_info(i);
      names_[i].assign(infos[i].name.data, infos[i].name.size);
      at::Tensor p = rh::borrow_tensor(infos[i].data);
      if (p.scalar_type() != at::kFloat)
        throw rh::Exception(RH_ERROR_UNIMPLEMENTED,
                            "strategy 'fsdp': parameter '" + names_[i] + "' is " +
                                std::string(c10::toString(p.scalar_type())) +
                                "; the model must be built in float32 (lower precision comes "
                                "from strategy.mixed_precision)");
      bool ignored = false;
      for (size_t k = 0; k < cfg_.ignored_modules.size(); ++k)
        if (names_[i].rfind(cfg_.ignored_modules[k] + ".", 0) == 0) {
          ignored = true;
          ignored_used[k] = 1;
        }
      managed[i] = infos[i].requires_grad && !ignored;
      const bool tied = RH_STRUCT_HAS(&infos[i], rh_ParamInfo, tied) && infos[i].tied;
      slot_of_.push_back(tied || infos[i].unit < 0 || infos[i].unit >= model_units ? -1
                                                                                   : infos[i].unit);
      if (managed[i])
        initial[i] = p.detach().clone();
      else
        unmanaged_numel_ += p.numel();
    }
    for (size_t k = 0; k < cfg_.ignored_modules.size(); ++k)
      if (!ignored_used[k])
        node_.child("ignored_modules")
            .at(k)
            .throw_error("no module '" + cfg_.ignored_modules[k] +
                         "' in the model (no parameter is named '" + cfg_.ignored_modules[k] +
                         ".<...>'; e.g. '" + names_.front() + "')");
    build_units(managed);
    managed_ = managed;
    if (units_.empty())
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                          "strategy 'fsdp': the model has no trainable parameter to shard");
    // Working precision for every parameter, before any callback exists.
    if (param_dtype_ != at::kFloat)
      for (size_t i = 0; i < n; ++i) {
        at::Tensor p = rh::borrow_tensor(param_info(i).data);
        DLManagedTensor* dl = rh::export_tensor(p.to(param_dtype_).contiguous());
        rh_Error* err = api_->Model_SetParamData(model_, i, dl);
        if (err) dl->deleter(dl);
        rh::check(host_, err);
      }
    device_ = rh::borrow_tensor(param_info(units_.front().members.front().param).data).device();
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device_);
    int64_t largest = 0;
    for (Unit& u : units_) {
      largest = std::max(largest, shards_ * u.block);
      u.master = at::zeros({u.block}, f32);
      u.grad = at::zeros({u.block}, f32);
      master_from(u, [&](const Member& m) { return initial[m.param]; });
      largest_unit_numel_ =
          u.persistent ? largest_unit_numel_ : std::max(largest_unit_numel_, u.numel);
    }
    grad_pool_.configure(largest, f32.dtype(reduce_dtype_));
    gather_pool_.configure(largest, f32.dtype(param_dtype_));
    if (alias_) share_masters();  // and each gradient taken as it is ready
    // One rank: every unit stays whole, nothing to do around a unit.
    for (int32_t m = 0; m < model_units && !alone(); ++m) {
      if (fsdp_unit_of(m) < 0) continue;
      for (rh_UnitPhase ph :
           {RH_UNIT_PRE_FORWARD, RH_UNIT_POST_FORWARD, RH_UNIT_PRE_BACKWARD, RH_UNIT_POST_BACKWARD})
        rh::check(host_, api_->Model_AddUnitCallback(model_, m, ph, &FsdpStrategy::on_unit, this));
    }
    for (Unit& u : units_) {
      u.state = UnitState::Whole;
      if (!u.persistent) {
        ++live_units_;
        live_numel_ += u.numel;
        free_params(u);
      }
    }
    reset_peaks();
    std::ostringstream msg;
    int64_t total = 0;
    for (const Unit& u : units_) total += u.numel;
    msg << "strategy 'fsdp': " << cfg_.sharding_name << ", " << units_.size() << " unit(s) of "
        << total << " trainable elements sharded over " << shards_ << " of " << world_size_
        << " rank(s), reshard_after_forward " << reshard_ << ", param_dtype "
        << c10::toString(param_dtype_) << ", reduce_dtype " << c10::toString(reduce_dtype_)
        << ", state_dict_type " << (cfg_.sharded_state_dict ? "sharded" : "full");
    if (alone())
      msg << "; one rank: no communication"
          << (alias_ ? ", the parameters are the float32 masters" : "");
    log(RH_LOG_INFO, msg.str());
  }

  void optimizer_params(const rh_OptimParamSink& sink) {
    for (Unit& u : units_)
      for (const Member& m : u.members) {
        const int64_t valid = m.valid(shard_index_);
        if (valid == 0) continue;
        std::vector<int64_t> shape = m.shape;
        if (!shape.empty()) shape[0] = valid / m.row;
        rh_OptimParam p{};
        p.struct_size = RH_OPTIM_PARAM_STRUCT_SIZE;
        p.name = {names_[m.param].data(), names_[m.param].size()};
        p.param = rh::export_tensor(u.master.narrow(0, m.offset, valid).view(shape));
        p.grad = rh::export_tensor(u.grad.narrow(0, m.offset, valid).view(shape));
        p.full_shape = m.shape.data();
        p.full_ndim = static_cast<int32_t>(m.shape.size());
        p.full_offset = shard_index_ * m.len;
        rh::check(host_, sink.add(sink.user_data, &p));
      }
  }

  void before_backward(bool sync) {
    sync_ = sync;
    for (Unit& u : units_) {
      u.ready = false;
      u.backward_done = 0;
    }
    next_launch_ = 0;
    backward_unit_ = -1;
    if (!sync) accumulated_window_ = true;
    if (alias_)
      for (Unit& u : units_)
        for (Member& m : u.members) m.taken = false;
  }

  void sync_gradients(bool sync) {
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

  double reduce_grad_norm(double norm_type, double local) {
    if (shard_comm_ == nullptr) return local;  // every rank holds every gradient
    at::Tensor t = at::scalar_tensor(local, at::kDouble).reshape({1}).to(device_);
    collective_sync(shard_comm_, t, std::isinf(norm_type) ? RH_REDUCE_MAX : RH_REDUCE_SUM);
    return t.cpu().item<double>();
  }

  void after_optimizer_step() {
    if (alone()) {
      // float32: the optimizer updated the parameters themselves. bf16 /
      // fp16: the new masters cast into the parameters.
      for (Unit& u : units_) params_from_masters(u);
      return;
    }
    RECORD_USER_SCOPE("fsdp::persistent_units");
    for (Unit& u : units_) {
      set_piece(u, at::Tensor());  // pieces of the old values
      if (u.persistent) params_from_masters(u);
    }
    put_step_metrics();
  }

  void unit_params(int32_t model_unit, rh_UnitParamsOp op) {
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
        if (!alias_)
          master_from(*u, [&](const Member& m) {
            return rh::borrow_tensor(param_info(m.param).data).to(at::kFloat);
          });
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
  void state_export(rh_StateDict*) {
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
  void state_import(const rh_StateDict*) {
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

  void teardown() {
    for (Unit& u : units_) {
      finish_reduce(u);
      if (u.gather.work) finish_gather(u);
    }
  }

 private:
  // ---- Groups and units ---------------------------------------------------------

  // Every rank calls Comm_NewGroup for every group, in the same order.
  void make_groups() {
    if (world_ == nullptr) return;
    const auto S = static_cast<int32_t>(shards_), W = static_cast<int32_t>(world_size_);
    auto group = [&](const std::vector<int32_t>& ranks) {
      rh_Comm* out = nullptr;
      rh::check(host_, host_->Comm_NewGroup(world_, ranks.data(), ranks.size(), &out));
      return out;
    };
    if (S == W) {
      shard_comm_ = W > 1 ? world_ : nullptr;
    } else if (S > 1) {
      for (int32_t g = 0; g < W / S; ++g) {
        std::vector<int32_t> ranks;
        for (int32_t i = 0; i < S; ++i) ranks.push_back(g * S + i);
        if (rh_Comm* c = group(ranks)) shard_comm_ = c;
      }
    }
    if (S == 1) {
      replicate_comm_ = W > 1 ? world_ : nullptr;
    } else if (S < W) {
      for (int32_t i = 0; i < S; ++i) {
        std::vector<int32_t> ranks;
        for (int32_t g = 0; g < W / S; ++g) ranks.push_back(g * S + i);
        if (rh_Comm* c = group(ranks)) replicate_comm_ = c;
      }
    }
    if (reshard_ > 1 && reshard_ < S) {
      const auto N = static_cast<int32_t>(reshard_);
      for (int32_t first = 0; first < W; first += N) {
        std::vector<int32_t> ranks;
        for (int32_t j = 0; j < N; ++j) ranks.push_back(first + j);
        if (rh_Comm* c = group(ranks)) piece_comm_ = c;
      }
    }
  }

  void build_units(const std::vector<char>& managed) {
    const auto model_units = static_cast<int32_t>(api_->Model_NumUnits(model_));
    std::vector<std::vector<size_t>> by_unit(static_cast<size_t>(model_units));
    std::vector<size_t> root;  // tied, or in no unit
    for (size_t i = 0; i < managed.size(); ++i) {
      if (!managed[i]) continue;
      if (slot_of_[i] < 0)
        root.push_back(i);
      else
        by_unit[static_cast<size_t>(slot_of_[i])].push_back(i);
    }
    // auto_wrap: neighbouring model units merged until each holds
    // min_params elements (a short tail joins the unit before it).
    unit_of_model_.assign(static_cast<size_t>(model_units), -1);
    Unit cur;
    int64_t cur_numel = 0;
    auto close = [&] {
      if (cur.model_units.empty()) return;
      for (int32_t m : cur.model_units)
        unit_of_model_[static_cast<size_t>(m)] = static_cast<int>(units_.size());
      units_.push_back(std::move(cur));
      cur = Unit{};
      cur_numel = 0;
    };
    for (int32_t m = 0; m < model_units; ++m) {
      const auto& params = by_unit[static_cast<size_t>(m)];
      if (params.empty()) continue;
      rh_StringView v = api_->Model_UnitName(model_, m);
      cur.name += (cur.name.empty() ? "" : "+") + std::string(v.data, v.size);
      cur.model_units.push_back(m);
      for (size_t i : params) {
        add_member(cur, i);
        cur_numel += cur.members.back().numel;
      }
      if (cur_numel >= cfg_.min_params) close();
    }
    if (!cur.model_units.empty()) {
      if (!units_.empty() && cur_numel < cfg_.min_params) {
        Unit& last = units_.back();
        for (Member& mem : cur.members) {
          mem.offset += last.block;
          last.block += mem.len;
          last.numel += mem.numel;
          last.members.push_back(mem);
        }
        last.name += "+" + cur.name;
        for (int32_t m : cur.model_units) {
          last.model_units.push_back(m);
          unit_of_model_[static_cast<size_t>(m)] = static_cast<int>(units_.size() - 1);
        }
        cur = Unit{};
      } else {
        close();
      }
    }
    if (!root.empty()) {
      Unit r;
      r.name = "(root: tied parameters and parameters of no unit)";
      r.persistent = true;
      for (size_t i : root) add_member(r, i);
      units_.push_back(std::move(r));
      root_unit_ = static_cast<int>(units_.size() - 1);
    }
    if (shards_ == 1)
      for (Unit& u : units_) u.persistent = true;  // no_shard: always whole
  }

  void add_member(Unit& u, size_t i) {
    Member m;
    m.param = i;
    m.slot = slot_of_[i];
    at::Tensor p = rh::borrow_tensor(param_info(i).data);
    m.shape = p.sizes().vec();
    m.numel = p.numel();
    const int64_t rows = m.shape.empty() ? 1 : m.shape[0];
    m.row = rows == 0 ? 1 : m.numel / rows;
    m.len = (rows + shards_ - 1) / shards_ * (rows == 0 ? 0 : m.row);
    m.offset = u.block;
    u.block += m.len;
    u.numel += m.numel;
    u.members.push_back(std::move(m));
  }

  int fsdp_unit_of(int32_t model_unit) const {
    if (model_unit < 0 || static_cast<size_t>(model_unit) >= unit_of_model_.size()) return -1;
    return unit_of_model_[static_cast<size_t>(model_unit)];
  }
  Unit* unit_for(int32_t model_unit) {
    const int f = fsdp_unit_of(model_unit);
    return f < 0 ? nullptr : &units_[static_cast<size_t>(f)];
  }
  Unit* root_unit() { return root_unit_ < 0 ? nullptr : &units_[static_cast<size_t>(root_unit_)]; }

  // ---- Copies between whole parameters, blocks and masters -------------------------

  // Whole values (per member, any dtype) into this rank's shards.
  template <class Fn>
  void master_from(Unit& u, Fn whole) {
    torch::NoGradGuard no_grad;
    u.master.zero_();
    for (const Member& m : u.members) {
      const int64_t v = m.valid(shard_index_);
      if (v > 0)
        u.master.narrow(0, m.offset, v)
            .copy_(whole(m).reshape({-1}).narrow(0, shard_index_ * m.len, v));
    }
  }

  // The gathered blocks [S * block] into the parameters.
  void scatter_to_params(Unit& u, const at::Tensor& flat) {
    torch::NoGradGuard no_grad;
    const at::Tensor blocks = flat.view({shards_, u.block});
    for (const Member& m : u.members) {
      at::Tensor p = rh::borrow_tensor(param_info(m.param).data).view({-1});
      for (int64_t r = 0; r < shards_; ++r) {
        const int64_t v = m.valid(r);
        if (v == 0) break;
        p.narrow(0, r * m.len, v).copy_(blocks[r].narrow(0, m.offset, v));
      }
    }
  }

  // The parameters' whole values as blocks [S * block] (padding zeroed);
  // with `only_slot`, only the members of that model unit (the rest of
  // `flat` untouched).
  static constexpr int32_t kEverySlot = std::numeric_limits<int32_t>::min();
  void blocks_from_params(Unit& u, const at::Tensor& flat, int32_t only_slot = kEverySlot) {
    torch::NoGradGuard no_grad;
    const at::Tensor blocks = flat.view({shards_, u.block});
    for (const Member& m : u.members) {
      if (only_slot != kEverySlot && m.slot != only_slot) continue;
      at::Tensor p = rh::borrow_tensor(param_info(m.param).data).view({-1});
      for (int64_t r = 0; r < shards_; ++r) {
        const int64_t v = m.valid(r);
        at::Tensor dst = blocks[r].narrow(0, m.offset, m.len);
        if (v > 0) dst.narrow(0, 0, v).copy_(p.narrow(0, r * m.len, v));
        if (v < m.len) dst.narrow(0, v, m.len - v).zero_();
      }
    }
  }

  // Persistent units after a step (and at resume): the masters into the
  // whole parameters.
  void params_from_masters(Unit& u) {
    if (alias_) return;  // one rank in float32: the parameters are the masters
    at::Tensor send = u.master.to(param_dtype_);
    if (shard_comm_ == nullptr) {
      scatter_to_params(u, send);
      return;
    }
    RECORD_USER_SCOPE("fsdp::all_gather");
    at::Tensor buf = gather_pool_.take();
    at::Tensor out = buf.narrow(0, 0, shards_ * u.block);
    InFlight f;
    f.in = rh::export_tensor(send);
    f.out = rh::export_tensor(out);
    const auto t0 = Clock::now();
    rh::check(host_, host_->Comm_AllGather(shard_comm_, f.in, f.out, &f.work));
    comm_s_ += seconds_since(t0);
    comm_bytes_ += out.numel() * static_cast<int64_t>(out.element_size());
    wait(f);
    scatter_to_params(u, out);
    gather_pool_.give(std::move(buf));
  }

  // ---- Loading from rank 0 -----------------------------------------------------------

  // ROOT_ADOPT: rank 0 wrote whole values into the members of model unit
  // `slot`; every rank takes its shards of them. Shard groups of S > 1: a
  // reduce-scatter with MAX of rank 0's blocks against -inf from every
  // other rank (exact, -0.0 included), so each rank receives only its
  // block; then, across the replicas (hybrid_shard), a broadcast from the
  // shard group of rank 0. S = 1: a broadcast of the block.
  void adopt_from_root(Unit& u, int32_t slot) {
    RECORD_USER_SCOPE("fsdp::adopt_from_root");
    torch::NoGradGuard no_grad;
    const auto f32 = u.master.options();
    at::Tensor mine = at::empty({u.block}, f32);
    const bool in_root_group = rank_ < shards_;  // the shard group rank 0 belongs to
    if (shard_comm_ != nullptr && in_root_group) {
      at::Tensor flat = at::full({shards_ * u.block}, -std::numeric_limits<float>::infinity(), f32);
      if (rank_ == 0) blocks_from_params(u, flat, slot);
      InFlight f;
      f.in = rh::export_tensor(flat);
      f.out = rh::export_tensor(mine);
      rh::check(host_, host_->Comm_ReduceScatter(shard_comm_, f.in, f.out, RH_REDUCE_MAX, &f.work));
      comm_bytes_ += flat.numel() * 4;
      wait(f);
    } else if (shard_comm_ == nullptr && rank_ == 0) {
      blocks_from_params(u, mine, slot);
    }
    if (replicate_comm_ != nullptr) {
      collective_broadcast(replicate_comm_, mine);
      comm_bytes_ += mine.numel() * 4;
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
  void broadcast_whole(int32_t slot) {
    if (world_ == nullptr || alone()) return;
    for (size_t i = 0; i < managed_.size(); ++i) {
      if (managed_[i] || slot_of_[i] != slot) continue;
      at::Tensor p = rh::borrow_tensor(param_info(i).data);
      collective_broadcast(world_, p);
      comm_bytes_ += p.numel() * static_cast<int64_t>(p.element_size());
    }
  }

  // ---- Gathering -------------------------------------------------------------------

  // Issues the all-gather that makes `u` whole: of the shards over the shard
  // group, or of the pieces kept after forward over the piece group.
  void start_gather(Unit& u, bool for_forward) {
    if (u.persistent || u.state != UnitState::Sharded) return;
    RECORD_USER_SCOPE("fsdp::all_gather");
    for (const Member& m : u.members)
      rh::check(host_, api_->Model_RestoreParamStorage(model_, m.param));
    u.gather_from_piece = u.piece.defined();
    u.send = u.gather_from_piece ? u.piece : u.master.to(param_dtype_);
    u.gathered_buf = gather_pool_.take();
    u.gathered = u.gathered_buf.narrow(0, 0, shards_ * u.block);
    u.keep_piece = for_forward && reshard_ > 1 && reshard_ < shards_;
    u.gather.in = rh::export_tensor(u.send);
    u.gather.out = rh::export_tensor(u.gathered);
    rh_Comm* comm = u.gather_from_piece ? piece_comm_ : shard_comm_;
    const auto t0 = Clock::now();
    rh::check(host_, host_->Comm_AllGather(comm, u.gather.in, u.gather.out, &u.gather.work));
    comm_s_ += seconds_since(t0);
    comm_bytes_ += u.gathered.numel() * static_cast<int64_t>(u.gathered.element_size());
    u.state = UnitState::Gathering;
    ++live_units_;
    live_numel_ += u.numel;
    peak_units_ = std::max(peak_units_, live_units_);
    peak_numel_ = std::max(peak_numel_, live_numel_);
  }

  void finish_gather(Unit& u) {
    if (u.persistent || u.state == UnitState::Whole) return;
    if (u.state == UnitState::Sharded) start_gather(u, false);
    RECORD_USER_SCOPE("fsdp::wait_gather");
    const auto t0 = Clock::now();
    wait(u.gather);
    gather_wait_s_ += seconds_since(t0);
    scatter_to_params(u, u.gathered);
    if (u.keep_piece) {
      keep_piece_of(u, u.gathered);
    } else if (u.gather_from_piece) {
      set_piece(u, at::Tensor());
    }
    u.send = u.gathered = at::Tensor();
    gather_pool_.give(std::move(u.gathered_buf));
    u.gathered_buf = at::Tensor();
    u.state = UnitState::Whole;
  }

  // reshard_after_forward N: of the whole unit's blocks [S * block], rank j
  // of its piece group keeps piece j, so that the piece group's all-gather
  // rebuilds them.
  void keep_piece_of(Unit& u, const at::Tensor& flat) {
    const int64_t piece = shards_ * u.block / reshard_;
    set_piece(u, flat.narrow(0, (shard_index_ % reshard_) * piece, piece).clone());
  }

  // Keeps (or, undefined, drops) the piece of `u` kept after forward,
  // counting what the pieces hold.
  void set_piece(Unit& u, at::Tensor piece) {
    if (u.piece.defined()) piece_numel_ -= u.piece.numel();
    u.piece = std::move(piece);
    if (u.piece.defined()) piece_numel_ += u.piece.numel();
    peak_piece_numel_ = std::max(peak_piece_numel_, piece_numel_);
  }

  void free_params(Unit& u) {
    if (u.persistent) return;
    if (u.state == UnitState::Gathering) finish_gather(u);
    if (u.state != UnitState::Whole) return;
    for (const Member& m : u.members)
      rh::check(host_, api_->Model_FreeParamStorage(model_, m.param));
    u.state = UnitState::Sharded;
    --live_units_;
    live_numel_ -= u.numel;
  }

  // After a unit's forward, as reshard_after_forward says.
  void reshard_after_forward(Unit& u) {
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
  void prefetch(int from, int direction) {
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

  static rh_Error* on_unit(void* self, int32_t unit, rh_UnitPhase phase) {
    auto* s = static_cast<FsdpStrategy*>(self);
    return rh::guard(s->host_, [&] { s->unit_event(unit, phase); });
  }

  void unit_event(int32_t model_unit, rh_UnitPhase phase) {
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

  // ---- Reducing --------------------------------------------------------------------

  // Launches the reductions of ready units in one fixed order (the units
  // backwards, the root unit last: it is ready only when backward is done):
  // every rank issues the same collectives in the same order.
  void launch_ready() {
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

  void launch_reduce(Unit& u) {
    RECORD_USER_SCOPE("fsdp::reduce_scatter");
    u.flat_buf = grad_pool_.take();
    u.flat = u.flat_buf.narrow(0, 0, shards_ * u.block);
    const at::Tensor blocks = u.flat.view({shards_, u.block});
    int64_t full_grad_bytes = 0;
    {
      torch::NoGradGuard no_grad;
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
    const auto t0 = Clock::now();
    if (shard_comm_ != nullptr) {
      u.reduced = reduce_dtype_ == at::kFloat ? u.grad : at::empty({u.block}, u.flat.options());
      u.reduce.in = rh::export_tensor(u.flat);
      u.reduce.out = rh::export_tensor(u.reduced);
      rh::check(host_, host_->Comm_ReduceScatter(shard_comm_, u.reduce.in, u.reduce.out,
                                                 RH_REDUCE_SUM, &u.reduce.work));
      comm_bytes_ += u.flat.numel() * static_cast<int64_t>(u.flat.element_size());
    } else if (replicate_comm_ != nullptr) {  // no_shard: an all-reduce, as ddp
      u.reduced = u.flat;
      u.reduce.in = rh::export_tensor(u.flat);
      u.reduce.out = rh::export_tensor(u.flat);
      rh::check(host_, host_->Comm_AllReduce(replicate_comm_, u.reduce.out, RH_REDUCE_SUM,
                                             &u.reduce.work));
      comm_bytes_ += u.flat.numel() * static_cast<int64_t>(u.flat.element_size());
    } else {
      u.reduced = u.flat;  // one rank
    }
    comm_s_ += seconds_since(t0);
    in_flight_.push_back(static_cast<size_t>(&u - units_.data()));
    // One reduction in flight while the next unit computes: its buffer
    // goes back to the pool as soon as it is done.
    while (in_flight_.size() > 1) finish_reduce(units_[in_flight_.front()]);
  }

  void finish_reduce(Unit& u) {
    const auto it =
        std::find(in_flight_.begin(), in_flight_.end(), static_cast<size_t>(&u - units_.data()));
    if (it == in_flight_.end()) return;
    in_flight_.erase(it);
    RECORD_USER_SCOPE("fsdp::wait_reduce");
    if (u.reduce.work != nullptr) wait(u.reduce);
    if (shard_comm_ != nullptr && replicate_comm_ != nullptr) {
      // hybrid_shard: the shard group's sums, summed across the replicas.
      collective_sync(replicate_comm_, u.reduced, RH_REDUCE_SUM);
      comm_bytes_ += u.reduced.numel() * static_cast<int64_t>(u.reduced.element_size());
    }
    if (!u.reduced.is_same(u.grad)) u.grad.copy_(u.reduced);
    u.reduced = u.flat = at::Tensor();
    grad_pool_.give(std::move(u.flat_buf));
    u.flat_buf = at::Tensor();
  }

  // ---- One rank -------------------------------------------------------------------

  bool alone() const { return world_size_ == 1; }

  // float32: each managed parameter becomes a view of its piece of its
  // unit's master block (one rank: the piece is the whole parameter), so
  // the optimizer's in-place update is the parameter's update; and its
  // gradient, when ready, goes straight into its piece of the unit's grad.
  void share_masters() {
    place_.assign(names_.size(), {-1, -1});
    for (size_t k = 0; k < units_.size(); ++k)
      for (size_t j = 0; j < units_[k].members.size(); ++j) {
        const Member& m = units_[k].members[j];
        DLManagedTensor* dl =
            rh::export_tensor(units_[k].master.narrow(0, m.offset, m.numel).view(m.shape));
        rh_Error* err = api_->Model_SetParamData(model_, m.param, dl);
        if (err) dl->deleter(dl);
        rh::check(host_, err);
        place_[m.param] = {static_cast<int>(k), static_cast<int>(j)};
        rh::check(host_, api_->Model_AddGradReadyCallback(model_, m.param,
                                                          &FsdpStrategy::on_grad_ready, this));
      }
  }

  static void on_grad_ready(void* self, size_t index) {
    static_cast<FsdpStrategy*>(self)->grad_ready(index);
  }

  // float32: the gradient copied into (or, later in a window, added to) its
  // piece of `grad` and released: every micro-batch's float32 sums in the
  // order autograd would make them in the parameter, without holding it.
  void grad_ready(size_t index) {
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
  void sync_alone(bool sync) {
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
    torch::NoGradGuard no_grad;
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

  // ---- Small helpers -----------------------------------------------------------------

  void wait(InFlight& f) { f.wait(host_, comm_s_); }

  void collective_sync(rh_Comm* comm, at::Tensor& t, rh_ReduceOp op) {
    RECORD_USER_SCOPE("fsdp::all_reduce");
    DLManagedTensor* dl = rh::export_tensor(t);
    const auto t0 = Clock::now();
    rh_Error* err = host_->Comm_AllReduce(comm, dl, op, nullptr);
    comm_s_ += seconds_since(t0);
    dl->deleter(dl);
    rh::check(host_, err);
  }

  void collective_broadcast(rh_Comm* comm, at::Tensor& t) {
    RECORD_USER_SCOPE("fsdp::broadcast");
    DLManagedTensor* dl = rh::export_tensor(t);
    const auto t0 = Clock::now();
    rh_Error* err = host_->Comm_Broadcast(comm, dl, 0, nullptr);
    comm_s_ += seconds_since(t0);
    dl->deleter(dl);
    rh::check(host_, err);
  }

  rh_ParamInfo param_info(size_t i) {
    rh_ParamInfo info{};
    info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
    rh::check(host_, api_->Model_GetParam(model_, i, &info));
    return info;
  }

  static int64_t elem(at::ScalarType t) { return static_cast<int64_t>(c10::elementSize(t)); }

  static double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

  void put_metric(const std::string& name, double value) {
    rh::check(host_, host_->Metric_Put(context_, name.data(), name.size(), value));
  }

  void reset_peaks() {
    peak_units_ = live_units_;
    peak_numel_ = live_numel_;
    peak_full_grad_bytes_ = 0;
    peak_piece_numel_ = piece_numel_;
    comm_bytes_ = 0;
    comm_s_ = gather_wait_s_ = 0;
  }

  // What this rank held at the step's peak (docs/fsdp.md "Memory").
  void put_step_metrics() {
    const auto P = static_cast<int64_t>(c10::elementSize(param_dtype_));
    int64_t blocks = 0, persistent = 0, managed = 0;
    for (const Unit& u : units_) {
      blocks += u.block;
      managed += u.numel;
      if (u.persistent) persistent += u.numel;
    }
    const int64_t pieces = peak_piece_numel_;
    put_metric("fsdp/comm_bytes", static_cast<double>(comm_bytes_));
    put_metric("fsdp/comm_ms", 1e3 * comm_s_);
    put_metric("fsdp/gather_wait_ms", 1e3 * gather_wait_s_);
    put_metric("fsdp/peak_gathered_units", static_cast<double>(peak_units_));
    put_metric("fsdp/peak_gathered_numel", static_cast<double>(peak_numel_));
    // Whole parameters (frozen, ignored, persistent and the most gathered
    // at once) in param_dtype, pieces kept after forward, float32 masters.
    put_metric("fsdp/param_bytes",
               static_cast<double>(P * (unmanaged_numel_ + persistent + peak_numel_ + pieces) +
                                   4 * blocks));
    put_metric("fsdp/gather_buffer_bytes", static_cast<double>(gather_pool_.held_bytes()));
    // float32 sharded gradients, the flat reduce buffers, and the full
    // gradients: one unit's while it is copied in, every managed
    // parameter's when a window accumulated them (no sync).
    const int64_t full = accumulated_window_ ? P * managed : peak_full_grad_bytes_;
    put_metric("fsdp/grad_bytes", static_cast<double>(4 * blocks + grad_pool_.held_bytes() + full));
    accumulated_window_ = false;
    reset_peaks();
  }

  void log(rh_LogLevel level, const std::string& message) {
    host_->Log(context_, level, message.data(), message.size());
  }

  const rh_HostApi* host_;
  rh_Context* context_;
  rh::Config node_;  // the `strategy:` map (valid until the instance is destroyed)
  FsdpConfig cfg_;
  at::ScalarType param_dtype_ = at::kFloat, reduce_dtype_ = at::kFloat;
  // One rank with float32 param_dtype: the parameters are views of the
  // masters, their gradients taken into `grad` as they are ready (place_:
  // per parameter, its unit and member; accumulating_: `grad` holds earlier
  // micro-batches of this window).
  bool alias_ = false, accumulating_ = false;
  std::vector<std::pair<int, int>> place_;
  std::string precision_keys_;  // the precision_keys trait ("" in float32)
  rh_Comm* world_ = nullptr;
  rh_Comm* shard_comm_ = nullptr;      // this rank's shard group (NULL: S = 1)
  rh_Comm* replicate_comm_ = nullptr;  // the ranks holding the same shards (NULL: none)
  rh_Comm* piece_comm_ = nullptr;      // reshard_after_forward N: this rank's group of N
  int64_t world_size_ = 1, rank_ = 0;
  int64_t shards_ = 1;       // S
  int64_t shard_index_ = 0;  // this rank's place in its shard group
  int64_t reshard_ = 1;      // reshard_after_forward, resolved to a group size
  at::Tensor world_size_tensor_;
  at::Device device_ = at::kCPU;
  rh_Model* model_ = nullptr;
  const rh_ModelApi* api_ = nullptr;
  std::vector<std::string> names_;
  std::vector<char> managed_;     // per parameter: in a unit (sharded or persistent)
  std::vector<int32_t> slot_of_;  // per parameter: the host's unit for it (-1: tied or none)
  std::vector<Unit> units_;
  std::vector<int> unit_of_model_;  // model unit -> index in units_ (-1: nothing managed)
  int root_unit_ = -1;
  bool sync_ = true;                 // this backward reduces
  bool accumulated_window_ = false;  // a backward of this window kept its full gradients
  size_t next_launch_ = 0;
  int backward_unit_ = -1;        // the unit whose backward runs (prefetches are retried from it)
  std::deque<size_t> in_flight_;  // units whose reduction is issued, oldest first
  int64_t live_units_ = 0, live_numel_ = 0;  // resharding units whole or being gathered
  int64_t peak_units_ = 0, peak_numel_ = 0;
  int64_t save_peak_numel_ = -1;
  int64_t largest_unit_numel_ = 0;
  int64_t unmanaged_numel_ = 0;  // frozen and ignored parameters (always whole)
  int64_t peak_full_grad_bytes_ = 0;
  int64_t piece_numel_ = 0, peak_piece_numel_ = 0;  // reshard_after_forward N: pieces kept
  int64_t comm_bytes_ = 0;
  double comm_s_ = 0, gather_wait_s_ = 0;
  BufferPool grad_pool_;    // flat reduce_dtype gradient buffers
  BufferPool gather_pool_;  // flat param_dtype all-gather outputs
};

const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_STRATEGY, RH_STR("fsdp"),
     RH_STR("fully sharded data parallel, per parameter (FSDP2): full_shard, shard_grad_op, "
            "no_shard, hybrid_shard; prefetch, mixed precision, full or sharded state dicts"),
     &rh::StrategyAdapter<FsdpStrategy>::vtable},
};

const rh_PluginInfo kInfo = {
    RH_PLUGIN_INFO_STRUCT_SIZE,
    RH_ABI_VERSION_MAJOR,
    RH_ABI_VERSION_MINOR,
    RH_STR("rh_strategy_fsdp"),
    RH_STR("0.1.0"),
    RH_NATIVE_TAG_TORCH,
    kComponents,
    1,
    nullptr,
    nullptr,
};

}  // namespace

extern "C" RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t, uint32_t) { return &kInfo; }
