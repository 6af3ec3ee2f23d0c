// Strategy `zero`: the instance's lifecycle (create, SetupEnv, Wrap,
// optimizer parameters, the step's bookkeeping and metrics), the layout of
// groups, and the plugin's vtable. The design: ZeroStrategy.hpp.
#include "ZeroStrategy.hpp"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "rh/cpp/plugin.hpp"
#include "rh/cpp/torch.hpp"
#include "rh/cpp/torch_bf16_speed.hpp"

namespace rh::zero {

ZeroStrategy::ZeroStrategy(const rh_CreateArgs& args) : ShardingBase(args.host, args.context) {
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

ZeroStrategy::~ZeroStrategy() {
  for (Group& g : groups_)
    for (InFlight* f : {&g.reduce.f, &g.gather.f}) f->destroy(host_);
}

void ZeroStrategy::traits(rh_StrategyTraits& t) const {
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

void ZeroStrategy::setup_env(rh_SetupEnvArgs& args) {
  if (args.world == nullptr || host_->Comm_ReduceScatter == nullptr)
    throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                        "strategy 'zero' needs the host's world communicator");
  world_ = args.world;
  world_size_ = host_->Comm_Size(world_);
  rank_ = host_->Comm_Rank(world_);
  const bool cuda = torch::cuda::is_available();
  const bool host_assigns =
      RH_STRUCT_HAS(&args, rh_SetupEnvArgs, rank_device) && args.rank_device.device_type == kDLCUDA;
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

void ZeroStrategy::wrap(const rh_WrapArgs& args) {
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
  std::vector<ParamSpec> specs;
  // The parameters' float32 values, borrowed (no copy: a copy of the whole
  // model, freed after, would raise the peak of every rank by 4 bytes a
  // parameter): valid until the working-precision cast replaces them, after
  // the masters are made from them.
  std::vector<at::Tensor> initial(n);
  for (size_t i = 0; i < n; ++i) {
    rh_ParamInfo info = param_info(i);
    names_[i].assign(info.name.data, info.name.size);
    unit_of_[i] = info.unit;
    const bool tied = RH_STRUCT_HAS(&info, rh_ParamInfo, tied) && info.tied;
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
      specs.push_back({i, p.numel(), info.unit, tied});
      initial[i] = p.detach();
    } else {
      untracked_numel_ += p.numel();
    }
  }
  if (trainable.empty())
    throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                        "strategy 'zero': the model has no trainable "
                        "parameter");
  const UnitSizes sizes = resolve_sizes(specs, cfg_.zero_optimization);
  build_groups(specs);
  warn_about_written_sizes(sizes);
  const at::Device device = param(trainable.front()).device();
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
  initial.clear();
  // Working precision: every parameter (frozen ones too: the forward
  // mixes them) in bf16 / fp16, before any callback is registered.
  if (working_ != at::kFloat)
    for (size_t i = 0; i < n; ++i) {
      at::Tensor p = param(i);
      rh::hand_param_tensor(host_, api_->Model_SetParamData, model_, i,
                            p.to(working_).contiguous());
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
      for (rh_UnitPhase ph :
           {RH_UNIT_PRE_FORWARD, RH_UNIT_POST_FORWARD, RH_UNIT_PRE_BACKWARD, RH_UNIT_POST_BACKWARD})
        rh::check(host_, api_->Model_AddUnitCallback(model_, u, ph, &ZeroStrategy::on_unit, this));
    for (Group& g : groups_)  // whole until now
      if (g.sharded) live_ += g.numel;
    for (Group& g : groups_)
      if (g.sharded) free_params(g);
    peak_live_ = live_ + persistent_numel();
    for (size_t u = 0; u < unit_groups_.size(); ++u) {
      int64_t numel = 0;
      for (size_t k : unit_groups_[u]) numel += groups_[k].numel;
      if (numel > cfg_.zero_optimization.stage3_max_live_parameters)
        throw rh::Exception(RH_ERROR_INVALID_CONFIG,
                            "strategy.zero_optimization.stage3_max_live_parameters: unit '" +
                                unit_name(u) + "' alone has " + std::to_string(numel) +
                                " trainable elements, more than " +
                                std::to_string(cfg_.zero_optimization.stage3_max_live_parameters) +
                                " may be gathered at once");
    }
  }
  std::ostringstream msg;
  int64_t total = 0;
  for (const Group& g : groups_) total += g.numel;
  msg << "strategy 'zero': stage " << stage_ << ", " << groups_.size() << " group(s) of " << total
      << " trainable elements (reduce_bucket_size " << cfg_.zero_optimization.reduce_bucket_size
      << (cfg_.zero_optimization.reduce_bucket_size_where.empty() ? ", one unit" : "");
  if (stage_ == 3)
    msg << ", stage3_prefetch_bucket_size " << cfg_.zero_optimization.stage3_prefetch_bucket_size
        << (cfg_.zero_optimization.stage3_prefetch_bucket_size_where.empty() ? ", one unit" : "");
  msg << "), " << world_size_ << " rank(s), working dtype " << c10::toString(working_);
  if (alone())
    msg << "; one rank: no communication"
        << (alias_ ? ", the parameters are the float32 masters" : "");
  log(RH_LOG_INFO, msg.str());
  // bfloat16 on a CPU whose LibTorch computes it slower than float32:
  // rank 0 measures it and says so, with the factor (rh/cpp/torch_bf16_speed.hpp).
  if (working_ == at::kBFloat16 && device.is_cpu() && rank_ == 0) {
    const rh::Bf16Speed bf16 = rh::bf16_speed("strategy 'zero' (bf16.enabled)");
    log(bf16.slower ? RH_LOG_WARN : RH_LOG_DEBUG, bf16.message);
  }
}

void ZeroStrategy::optimizer_params(const rh_OptimParamSink& sink) {
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

void ZeroStrategy::before_backward(bool sync) {
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
    if (alone() || g.reduce.taken()) std::fill(g.filled.begin(), g.filled.end(), 0);
  }
  next_launch_ = 0;
}

void ZeroStrategy::after_optimizer_step() {
  if (alone()) {
    // float32: the optimizer updated the parameters themselves. bf16 /
    // fp16: the new masters cast into the working parameters.
    if (!alias_) {
      at::NoGradGuard no_grad;
      for (Group& g : groups_) scatter_to_params(g, g.master.to(working_));
    }
    return;
  }
  RECORD_USER_SCOPE("zero::all_gather_params");
  for (Group& g : groups_)
    if (!g.sharded) gather_into_params(g, cfg_.zero_optimization.allgather_bucket_size);
  put_comm_metrics();
}

void ZeroStrategy::teardown() {
  for (Group& g : groups_) {
    finish_reduce(g);
    if (g.gather.issued()) finish_gather(g);
  }
}

// ---- Layout -----------------------------------------------------------------

// The sizes the job did not write, from the model's units (ZeroStrategy.hpp).
ZeroStrategy::UnitSizes ZeroStrategy::resolve_sizes(const std::vector<ParamSpec>& trainable,
                                                    ZeroOptimizationConfig& z) {
  int64_t total = 0, largest_param = 0;
  std::map<int32_t, int64_t> unit_numel;
  for (const ParamSpec& p : trainable) {
    total += p.numel;
    largest_param = std::max(largest_param, p.numel);
    if (p.unit >= 0) unit_numel[p.unit] += p.numel;
  }
  UnitSizes sizes;
  for (const auto& [u, n] : unit_numel) sizes.unit = std::max(sizes.unit, n);
  sizes.one = std::max(largest_param, sizes.unit > 0 ? sizes.unit : (total + 7) / 8);
  if (z.reduce_bucket_size == kFromUnits) z.reduce_bucket_size = sizes.one;
  if (z.allgather_bucket_size == kFromUnits) z.allgather_bucket_size = z.reduce_bucket_size;
  if (z.stage3_prefetch_bucket_size == kFromUnits) z.stage3_prefetch_bucket_size = sizes.one;
  return sizes;
}

// Rank 0 warns when a written size cancels the stage's saving, judged on the
// groups build_groups made (which of them stage 3 shards).
void ZeroStrategy::warn_about_written_sizes(const UnitSizes& sizes) {
  if (rank_ != 0 || alone()) return;
  const ZeroOptimizationConfig& z = cfg_.zero_optimization;
  int64_t total = 0, sharded = 0;
  for (const Group& g : groups_) {
    total += g.numel;
    if (g.sharded) sharded += g.numel;
  }
  auto mib = [](int64_t elements) { return std::to_string(elements * 4 / (1 << 20)) + " MiB"; };
  if (stage_ < 3 && !z.reduce_bucket_size_where.empty() && z.reduce_bucket_size >= total)
    log(RH_LOG_WARN, z.reduce_bucket_size_where + " = " + std::to_string(z.reduce_bucket_size) +
                         " puts the model's " + std::to_string(total) +
                         " trainable elements in one group: its flat float32 gradient (" +
                         mib(total) + ") is the whole gradient, so stage " +
                         std::to_string(stage_) +
                         " holds as much gradient memory as ddp's buckets (stage 2 saves "
                         "nothing over stage 1). Remove the key for groups of one unit (" +
                         std::to_string(sizes.one) + " elements)");
  if (stage_ == 3 && !z.stage3_prefetch_bucket_size_where.empty() && sharded > 0 &&
      z.stage3_prefetch_bucket_size + sizes.unit >= sharded)
    log(RH_LOG_WARN, z.stage3_prefetch_bucket_size_where + " = " +
                         std::to_string(z.stage3_prefetch_bucket_size) +
                         " prefetches every unit at the first one: the sharded parameters (" +
                         mib(sharded) +
                         ") are all gathered at once on every rank, so stage 3 saves no "
                         "parameter memory. Remove the key to prefetch one unit (" +
                         std::to_string(sizes.one) + " elements)");
}

std::vector<Group> ZeroStrategy::plan_groups(const std::vector<ParamSpec>& trainable, int stage,
                                             const ZeroOptimizationConfig& z, int64_t world) {
  const int64_t cap = z.reduce_bucket_size;
  const int64_t persist = z.stage3_param_persistence_threshold;
  std::vector<Group> groups;
  // Gradients arrive roughly in reverse registration order: groups are cut
  // in that order, so the first group fills first.
  std::vector<ParamSpec> order(trainable.rbegin(), trainable.rend());
  auto cut = [&](const std::vector<ParamSpec>& params, int unit, bool sharded) {
    Group g;
    auto close = [&] {
      if (g.members.empty()) return;
      g.unit = unit;
      g.sharded = sharded;
      g.chunk = (g.numel + world - 1) / world;
      groups.push_back(std::move(g));
      g = Group{};
    };
    for (const ParamSpec& p : params) {
      if (!g.members.empty() && g.numel + p.numel > cap) close();
      Member m;
      m.param = p.param;
      m.offset = g.numel;
      m.numel = p.numel;
      g.members.push_back(std::move(m));
      g.numel += p.numel;
    }
    close();
  };
  if (stage < 3) {
    cut(order, -1, false);
  } else {
    std::map<int, std::vector<ParamSpec>, std::greater<int>> by_unit;  // backward order
    std::vector<ParamSpec> persistent;
    for (const ParamSpec& p : order) {
      // Tied, small, or in no unit (unit -1: used outside every unit,
      // so no unit's gather would cover it): kept whole on every rank.
      if (p.tied || p.numel <= persist || p.unit < 0)
        persistent.push_back(p);
      else
        by_unit[p.unit].push_back(p);
    }
    for (auto& [unit, params] : by_unit) cut(params, unit, true);
    cut(persistent, -1, false);
  }
  return groups;
}

void ZeroStrategy::build_groups(const std::vector<ParamSpec>& trainable) {
  groups_ = plan_groups(trainable, stage_, cfg_.zero_optimization, world_size_);
  for (Group& g : groups_)
    for (Member& m : g.members) m.shape = param(m.param).sizes().vec();
  group_of_.assign(names_.size(), -1);
  member_of_.assign(names_.size(), -1);
  for (size_t k = 0; k < groups_.size(); ++k)
    for (size_t j = 0; j < groups_[k].members.size(); ++j) {
      group_of_[groups_[k].members[j].param] = static_cast<int>(k);
      member_of_[groups_[k].members[j].param] = static_cast<int>(j);
    }
}

// float32: each trainable parameter becomes a view of its piece of its
// group's flat master (one rank: the piece is the whole parameter), so the
// optimizer's in-place update is the parameter's update.
void ZeroStrategy::share_masters() {
  for (Group& g : groups_)
    for (const Member& m : g.members) alias_to_master<Layout>(g.master, m);
}

// ---- Small helpers -----------------------------------------------------------------

std::string ZeroStrategy::unit_name(size_t u) {
  rh_StringView v = api_->Model_UnitName(model_, static_cast<int32_t>(u));
  return std::string(v.data, v.size);
}

void ZeroStrategy::put_comm_metrics() {
  if (alone()) return;  // nothing communicated, nothing gathered, nothing to report
  put_metric("zero/comm_bytes", static_cast<double>(comm_.bytes()));
  put_metric("zero/comm_ms", 1e3 * comm_.seconds());
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
  comm_.reset();
  peak_live_ = live_ + persistent_numel();
}

void ZeroStrategy::parse_injections(const std::string& spec) {
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) continue;
    if (std::stoi(item.substr(0, colon)) == rank_)
      injections_.insert(std::stoll(item.substr(colon + 1)));
  }
}

}  // namespace rh::zero

namespace {

using rh::zero::ZeroStrategy;

const rh_Component kComponents[] = {
    rh::strategy_component<ZeroStrategy>(
        "zero",
        "ZeRO stages 1-3 (DeepSpeed's keys): optimizer state, gradients and parameters partitioned "
        "across ranks; fp16 loss scaling, bf16"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_strategy_zero", "0.1.0", RH_NATIVE_TAG_TORCH, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)
