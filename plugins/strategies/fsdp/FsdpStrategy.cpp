// Strategy `fsdp`: the instance's lifecycle (create, SetupEnv, Wrap,
// optimizer parameters, the step's bookkeeping and metrics), the layout of
// groups and units, and the plugin's vtable. The design: FsdpStrategy.hpp.
#include "FsdpStrategy.hpp"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/cuda.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "rh/cpp/plugin.hpp"
#include "rh/cpp/torch.hpp"
#include "rh/cpp/torch_bf16_speed.hpp"

namespace {

using rh::fsdp::Dtype;

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

}  // namespace

namespace rh::fsdp {

FsdpStrategy::FsdpStrategy(const rh_CreateArgs& args)
    : ShardingBase(args.host, args.context), node_(args.host, args.config) {
  cfg_ = FsdpConfig::from_config(node_);
  mesh_.read(node_);
  // hybrid_shard's groups are a node's ranks; beside tensor-parallel groups
  // they would make a 3-D mesh (replicate x shard x tensor), not built.
  if (mesh_.size() > 1 && cfg_.sharding == ShardingStrategy::HybridShard)
    node_.child("sharding_strategy")
        .throw_error(
            "hybrid_shard beside tensor_parallel (a 3-D mesh) is not supported; "
            "full_shard, shard_grad_op or no_shard shard over the data-parallel group");
  param_dtype_ = scalar_type(cfg_.param_dtype);
  reduce_dtype_ = scalar_type(cfg_.reduce_dtype);
  // float16 where it can only run on the CPU (a LibTorch without CUDA) and
  // LibTorch has no CPU float16 matrix multiply: refused at create, so that
  // --dry-run and every rank's step 1 say so before anything is launched
  // or created (at SetupEnv it came after the rendezvous, exit 1).
#if !defined(TORCH_VERSION_MAJOR) || TORCH_VERSION_MAJOR < 2
  if (param_dtype_ == at::kHalf && !torch::cuda::is_available())
    node_.child("mixed_precision")
        .child("param_dtype")
        .throw_error("float16 on the CPU: LibTorch " + std::string(TORCH_VERSION) +
                     " has no float16 matrix multiply on the CPU; use bfloat16 or run on a GPU");
#endif
  // What makes this fsdp compute or reduce in a precision of its own (the
  // precision_keys trait: the host's AmpOptimWrapper is refused beside it).
  if (cfg_.param_dtype != Dtype::Float32)
    precision_keys_ =
        std::string("mixed_precision.param_dtype: ") + rh::fsdp::dtype_name(cfg_.param_dtype);
  if (cfg_.reduce_dtype != Dtype::Float32)
    precision_keys_ += std::string(precision_keys_.empty() ? "" : ", ") +
                       "mixed_precision.reduce_dtype: " + rh::fsdp::dtype_name(cfg_.reduce_dtype);
}

FsdpStrategy::~FsdpStrategy() {
  for (Unit& u : units_)
    for (InFlight* f : {&u.reduce.f, &u.gather.f}) f->destroy(host_);
}

void FsdpStrategy::traits(rh_StrategyTraits& t) const {
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
    t.input_dtype =
        param_dtype_ == at::kBFloat16 ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 16, 1};
}

void FsdpStrategy::setup_env(rh_SetupEnvArgs& args) {
  // With tensor_parallel: the mesh's data-parallel group (every rank
  // makes every group, collectively); the world itself without.
  world_ = mesh_.make_groups(host_, args.world, "strategy 'fsdp'");
  if (world_ != nullptr && host_->Comm_ReduceScatter == nullptr)
    throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                        "strategy 'fsdp' needs the host's reduce-scatter (ABI 1.0 "
                        "communicator)");
  world_size_ = world_ ? host_->Comm_Size(world_) : 1;
  rank_ = world_ ? host_->Comm_Rank(world_) : 0;
  const int64_t launch_local = RH_STRUCT_HAS(&args, rh_SetupEnvArgs, local_world_size)
                                   ? std::max<int64_t>(1, args.local_world_size / mesh_.size())
                                   : world_size_;
  cfg_.resolve(node_, world_size_, launch_local);
  shards_ = cfg_.shard_group_size;
  reshard_ = cfg_.reshard_after_forward;
  shard_index_ = rank_ % shards_;
  const bool cuda = torch::cuda::is_available();
  const bool host_assigns =
      RH_STRUCT_HAS(&args, rh_SetupEnvArgs, rank_device) && args.rank_device.device_type == kDLCUDA;
  args.device = !cuda          ? DLDevice{kDLCPU, 0}
                : host_assigns ? args.rank_device
                               : DLDevice{kDLCUDA, args.local_rank};
  make_groups();
  alias_ = alone() && param_dtype_ == at::kFloat;
  world_size_tensor_ = at::scalar_tensor(static_cast<double>(world_size_), at::kDouble);
}

void FsdpStrategy::wrap(const rh_WrapArgs& args) {
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
  // The parameters' float32 values, borrowed, not copied (a copy of the
  // whole model would raise every rank's peak by 4 bytes a parameter): valid
  // until the param_dtype cast replaces them, after the masters are made.
  std::vector<at::Tensor> initial(n);
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
    const bool ignored = in_ignored_module(cfg_.ignored_modules, names_[i], ignored_used);
    managed[i] = infos[i].requires_grad && !ignored;
    const bool tied = RH_STRUCT_HAS(&infos[i], rh_ParamInfo, tied) && infos[i].tied;
    slot_of_.push_back(slot_for(tied, infos[i].unit, model_units));
    if (managed[i])
      initial[i] = p.detach();
    else
      unmanaged_numel_ += p.numel();
  }
  check_ignored_used(cfg_.ignored_modules, ignored_used, names_.front());
  std::vector<ParamSpec> specs;
  for (size_t i = 0; i < n; ++i)
    if (managed[i]) {
      const at::Tensor p = rh::borrow_tensor(infos[i].data);
      specs.push_back({i, p.numel(), p.dim() == 0 ? 1 : p.size(0), slot_of_[i]});
    }
  build_units(specs);
  managed_ = managed;
  if (units_.empty())
    throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                        "strategy 'fsdp': the model has no trainable parameter to shard");
  device_ = param(units_.front().members.front().param).device();
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
  initial.clear();
  // Working precision for every parameter, before any callback exists.
  if (param_dtype_ != at::kFloat)
    for (size_t i = 0; i < n; ++i) {
      at::Tensor p = param(i);
      rh::hand_param_tensor(host_, api_->Model_SetParamData, model_, i,
                            p.to(param_dtype_).contiguous());
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
  // bfloat16 on a CPU whose LibTorch computes it slower than float32:
  // rank 0 measures it and says so, with the factor (rh/cpp/torch_bf16_speed.hpp).
  if (param_dtype_ == at::kBFloat16 && device_.is_cpu() && rank_ == 0) {
    const rh::Bf16Speed bf16 =
        rh::bf16_speed("strategy 'fsdp' (mixed_precision.param_dtype: bfloat16)");
    log(bf16.slower ? RH_LOG_WARN : RH_LOG_DEBUG, bf16.message);
  }
}

void FsdpStrategy::optimizer_params(const rh_OptimParamSink& sink) {
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

void FsdpStrategy::before_backward(bool sync) {
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

void FsdpStrategy::after_optimizer_step() {
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

void FsdpStrategy::teardown() {
  for (Unit& u : units_) {
    finish_reduce(u);
    if (u.gather.issued()) finish_gather(u);
  }
}

// ---- Groups and units ---------------------------------------------------------

// Every rank calls Comm_NewGroup for every group, in the same order.
void FsdpStrategy::make_groups() {
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

bool FsdpStrategy::in_ignored_module(const std::vector<std::string>& modules,
                                     const std::string& name, std::vector<char>& used) {
  bool ignored = false;
  for (size_t k = 0; k < modules.size(); ++k)
    if (name.rfind(modules[k] + ".", 0) == 0) {
      ignored = true;
      used[k] = 1;
    }
  return ignored;
}

void FsdpStrategy::check_ignored_used(const std::vector<std::string>& modules,
                                      const std::vector<char>& used,
                                      const std::string& example) const {
  for (size_t k = 0; k < modules.size(); ++k)
    if (!used[k])
      node_.child("ignored_modules")
          .at(k)
          .throw_error("no module '" + modules[k] + "' in the model (no parameter is named '" +
                       modules[k] + ".<...>'; e.g. '" + example + "')");
}

int32_t FsdpStrategy::slot_for(bool tied, int32_t unit, int32_t model_units) {
  return tied || unit < 0 || unit >= model_units ? -1 : unit;
}

std::vector<Unit> FsdpStrategy::plan_units(const std::vector<ParamSpec>& managed,
                                           int32_t model_units, int64_t min_params, int64_t shards,
                                           std::vector<int>& unit_of_model, int& root_unit) {
  std::vector<Unit> units;
  std::vector<std::vector<const ParamSpec*>> by_unit(static_cast<size_t>(model_units));
  std::vector<const ParamSpec*> root;  // tied, or in no unit
  for (const ParamSpec& p : managed) {
    if (p.slot < 0)
      root.push_back(&p);
    else
      by_unit[static_cast<size_t>(p.slot)].push_back(&p);
  }
  // auto_wrap: neighbouring model units merged until each holds
  // min_params elements (a short tail joins the unit before it).
  unit_of_model.assign(static_cast<size_t>(model_units), -1);
  root_unit = -1;
  Unit cur;
  int64_t cur_numel = 0;
  auto close = [&] {
    if (cur.model_units.empty()) return;
    for (int32_t m : cur.model_units)
      unit_of_model[static_cast<size_t>(m)] = static_cast<int>(units.size());
    units.push_back(std::move(cur));
    cur = Unit{};
    cur_numel = 0;
  };
  for (int32_t m = 0; m < model_units; ++m) {
    const auto& params = by_unit[static_cast<size_t>(m)];
    if (params.empty()) continue;
    cur.model_units.push_back(m);
    for (const ParamSpec* p : params) {
      add_member(cur, *p, shards);
      cur_numel += cur.members.back().numel;
    }
    if (cur_numel >= min_params) close();
  }
  if (!cur.model_units.empty()) {
    if (!units.empty() && cur_numel < min_params) {
      Unit& last = units.back();
      for (Member& mem : cur.members) {
        mem.offset += last.block;
        last.block += mem.len;
        last.numel += mem.numel;
        last.members.push_back(mem);
      }
      for (int32_t m : cur.model_units) {
        last.model_units.push_back(m);
        unit_of_model[static_cast<size_t>(m)] = static_cast<int>(units.size() - 1);
      }
      cur = Unit{};
    } else {
      close();
    }
  }
  if (!root.empty()) {
    Unit r;
    r.persistent = true;
    for (const ParamSpec* p : root) add_member(r, *p, shards);
    units.push_back(std::move(r));
    root_unit = static_cast<int>(units.size() - 1);
  }
  if (shards == 1)
    for (Unit& u : units) u.persistent = true;  // no_shard: always whole
  return units;
}

void FsdpStrategy::build_units(const std::vector<ParamSpec>& managed) {
  const auto model_units = static_cast<int32_t>(api_->Model_NumUnits(model_));
  units_ = plan_units(managed, model_units, cfg_.min_params, shards_, unit_of_model_, root_unit_);
  for (size_t k = 0; k < units_.size(); ++k) {
    Unit& u = units_[k];
    if (static_cast<int>(k) == root_unit_)
      u.name = "(root: tied parameters and parameters of no unit)";
    for (int32_t m : u.model_units) {
      const rh_StringView v = api_->Model_UnitName(model_, m);
      u.name += (u.name.empty() ? "" : "+") + std::string(v.data, v.size);
    }
    for (Member& mem : u.members) mem.shape = param(mem.param).sizes().vec();
  }
}

void FsdpStrategy::add_member(Unit& u, const ParamSpec& p, int64_t shards) {
  Member m;
  m.param = p.param;
  m.slot = p.slot;
  m.numel = p.numel;
  const int64_t rows = p.rows;
  m.row = rows == 0 ? 1 : m.numel / rows;
  m.len = (rows + shards - 1) / shards * (rows == 0 ? 0 : m.row);
  m.offset = u.block;
  u.block += m.len;
  u.numel += m.numel;
  u.members.push_back(std::move(m));
}

int FsdpStrategy::fsdp_unit_of(int32_t model_unit) const {
  if (model_unit < 0 || static_cast<size_t>(model_unit) >= unit_of_model_.size()) return -1;
  return unit_of_model_[static_cast<size_t>(model_unit)];
}

Unit* FsdpStrategy::unit_for(int32_t model_unit) {
  const int f = fsdp_unit_of(model_unit);
  return f < 0 ? nullptr : &units_[static_cast<size_t>(f)];
}

Unit* FsdpStrategy::root_unit() {
  return root_unit_ < 0 ? nullptr : &units_[static_cast<size_t>(root_unit_)];
}

// ---- One rank -------------------------------------------------------------------

// float32: each managed parameter becomes a view of its piece of its
// unit's master block (one rank: the piece is the whole parameter), so
// the optimizer's in-place update is the parameter's update; and its
// gradient, when ready, goes straight into its piece of the unit's grad.
void FsdpStrategy::share_masters() {
  place_.assign(names_.size(), {-1, -1});
  for (size_t k = 0; k < units_.size(); ++k)
    for (size_t j = 0; j < units_[k].members.size(); ++j) {
      const Member& m = units_[k].members[j];
      alias_to_master<Layout>(units_[k].master, m);
      place_[m.param] = {static_cast<int>(k), static_cast<int>(j)};
      rh::check(host_, api_->Model_AddGradReadyCallback(model_, m.param,
                                                        &FsdpStrategy::on_grad_ready, this));
    }
}

// ---- Small helpers -----------------------------------------------------------------

void FsdpStrategy::reset_peaks() {
  peak_units_ = live_units_;
  peak_numel_ = live_numel_;
  peak_full_grad_bytes_ = 0;
  peak_piece_numel_ = piece_numel_;
  comm_.reset();
  gather_wait_s_ = 0;
}

// What this rank held at the step's peak (docs/fsdp.md "Memory").
void FsdpStrategy::put_step_metrics() {
  const auto P = static_cast<int64_t>(c10::elementSize(param_dtype_));
  int64_t blocks = 0, persistent = 0, managed = 0;
  for (const Unit& u : units_) {
    blocks += u.block;
    managed += u.numel;
    if (u.persistent) persistent += u.numel;
  }
  const int64_t pieces = peak_piece_numel_;
  put_metric("fsdp/comm_bytes", static_cast<double>(comm_.bytes()));
  put_metric("fsdp/comm_ms", 1e3 * comm_.seconds());
  put_metric("fsdp/gather_wait_ms", 1e3 * gather_wait_s_);
  put_metric("fsdp/peak_gathered_units", static_cast<double>(peak_units_));
  put_metric("fsdp/peak_gathered_numel", static_cast<double>(peak_numel_));
  // Whole parameters (frozen, ignored, persistent and the most gathered
  // at once) in param_dtype, pieces kept after forward, float32 masters.
  put_metric(
      "fsdp/param_bytes",
      static_cast<double>(P * (unmanaged_numel_ + persistent + peak_numel_ + pieces) + 4 * blocks));
  put_metric("fsdp/gather_buffer_bytes", static_cast<double>(gather_pool_.held_bytes()));
  // float32 sharded gradients, the flat reduce buffers, and the full
  // gradients: one unit's while it is copied in, every managed
  // parameter's when a window accumulated them (no sync).
  const int64_t full = accumulated_window_ ? P * managed : peak_full_grad_bytes_;
  put_metric("fsdp/grad_bytes", static_cast<double>(4 * blocks + grad_pool_.held_bytes() + full));
  accumulated_window_ = false;
  reset_peaks();
}

}  // namespace rh::fsdp

namespace {

using rh::fsdp::FsdpStrategy;

const rh_Component kComponents[] = {
    rh::strategy_component<FsdpStrategy>(
        "fsdp",
        "fully sharded data parallel, per parameter (FSDP2): full_shard, shard_grad_op, no_shard, "
        "hybrid_shard; prefetch, mixed precision, full or sharded state dicts"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_strategy_fsdp", "0.1.0", RH_NATIVE_TAG_TORCH, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)
