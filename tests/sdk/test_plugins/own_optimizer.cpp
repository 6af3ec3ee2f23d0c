// own_optimizer.cpp — a single-process strategy that hands the host its own
// optimizer tensors (OptimizerParams): each trainable parameter's values as
// the model holds them, and a gradient buffer of its own that SyncGradients
// fills from the model's gradient. Training with it must equal `single` bit
// for bit — the test of the host's OptimizerParams path. Its traits can be
// set from the config, to test what the host refuses.
//
//   strategy: {type: own_optimizer, plugin: .../librh_test_own_optimizer.so,
//              load_phase: before_wrap|after_wrap, sharded_checkpoint: false,
//              name_prefix: "",   # prepended to each tensor's name (a strategy
//                                 # that names its tensors its own way)
//              split_over_ranks: false,
//              perturb_step: 0, perturb_param: "",
//              tensor_parallel_from: 0}
//
// perturb_step: N adds 0.01 to the first element of parameter
// `perturb_param` after optimizer step N: an injected difference at a
// known step and tensor, for `runner-host parity` to find.
//
// split_over_ranks: true does what a third-party author can get wrong from
// the docs: it hands each rank's optimizer different whole parameters
// (trainable parameter i goes to rank i % world size, as a ZeRO-1 written
// per parameter would) without declaring the sharded_checkpoint trait.
// Before the host compared the ranks' optimizer tensors at set-up, such a
// run trained and saved, rank 0 wrote only its own optimizer state, and
// `runner-host ckpt inspect` called the checkpoint complete; the host must
// refuse it before training, naming the trait. (Its SyncGradients copies
// this rank's gradient only: a test of the refusal, not of training.)
//
// tensor_parallel_from: N > 0 declares a tensor-parallel plan (ABI 1.11;
// groups of 2 consecutive ranks, llama's feed-forward split: w1, w3
// colwise, w2 rowwise) and hands each parameter of more than N elements
// as its elements from N on (full_offset N): a shard of a rowwise block
// that is not whole rows of it, which a checkpoint cannot place in the
// whole tensor (N = 1), or, of whole rows, without sharded_checkpoint
// (N = 96); the host must refuse both before training.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rh/cpp/config.hpp"
#include "rh/cpp/plugin.hpp"

namespace {

// A DLManagedTensor that owns a copy of `src`'s shape and, when `own_data`,
// a zeroed buffer of the same size instead of src's data.
DLManagedTensor* make_tensor(const DLTensor& src, bool own_data, size_t bytes) {
  struct Holder {
    DLManagedTensor managed;
    std::vector<int64_t> shape;
    void* buffer = nullptr;
  };
  auto* h = new Holder;
  h->shape.assign(src.shape, src.shape + src.ndim);
  h->managed.dl_tensor = src;
  h->managed.dl_tensor.shape = h->shape.data();
  h->managed.dl_tensor.strides = nullptr;  // contiguous
  h->managed.dl_tensor.byte_offset = 0;
  if (own_data) {
    h->buffer = std::calloc(1, bytes);
    h->managed.dl_tensor.data = h->buffer;
  } else {
    h->managed.dl_tensor.data = static_cast<char*>(src.data) + src.byte_offset;
  }
  h->managed.manager_ctx = h;
  h->managed.deleter = [](DLManagedTensor* self) {
    auto* holder = static_cast<Holder*>(self->manager_ctx);
    std::free(holder->buffer);
    delete holder;
  };
  return &h->managed;
}

size_t bytes_of(const DLTensor& t) {
  size_t n = static_cast<size_t>(t.dtype.bits / 8) * t.dtype.lanes;
  for (int32_t d = 0; d < t.ndim; ++d) n *= static_cast<size_t>(t.shape[d]);
  return n;
}

class OwnOptimizer {
 public:
  explicit OwnOptimizer(const rh_CreateArgs& args) : host_(args.host) {
    rh::Config cfg(args.host, args.config);
    const std::string phase = cfg.get<std::string>("load_phase", "before_wrap");
    if (phase != "before_wrap" && phase != "after_wrap")
      cfg.child("load_phase").throw_error("expected before_wrap or after_wrap");
    after_wrap_ = phase == "after_wrap";
    sharded_ = cfg.get<bool>("sharded_checkpoint", false);
    prefix_ = cfg.get<std::string>("name_prefix", "");
    split_ = cfg.get<bool>("split_over_ranks", false);
    perturb_step_ = cfg.get<int64_t>("perturb_step", 0);
    perturb_param_ = cfg.get<std::string>("perturb_param", "");
    tp_from_ = cfg.get<int64_t>("tensor_parallel_from", 0);
  }
  void tensor_parallel_plan(rh_TensorParallelPlanArgs& args) const {
    if (tp_from_ == 0) return;
    args.size = 2;
    args.group = tp_group_;
    args.rules = tp_rules_;
    args.num_rules = sizeof(tp_rules_) / sizeof(tp_rules_[0]);
  }
  void traits(rh_StrategyTraits& t) const {
    t.load_phase = after_wrap_ ? RH_LOAD_AFTER_WRAP : RH_LOAD_BEFORE_WRAP;
    t.sharded_checkpoint = sharded_ ? 1 : 0;
    t.needs_comm = split_ || tp_from_ > 0 ? 1 : 0;
  }
  void setup_env(rh_SetupEnvArgs& args) {
    args.device = DLDevice{kDLCPU, 0};
    if (split_ && args.world != nullptr) {
      rank_ = host_->Comm_Rank(args.world);
      size_ = host_->Comm_Size(args.world);
    }
    if (tp_from_ > 0 && args.world != nullptr)
      for (int32_t g = 0; g < host_->Comm_Size(args.world) / 2; ++g) {  // every group
        const int32_t ranks[2] = {2 * g, 2 * g + 1};
        rh_Comm* group = nullptr;
        rh::check(host_, host_->Comm_NewGroup(args.world, ranks, 2, &group));
        if (group != nullptr) tp_group_ = group;
      }
  }
  void wrap(const rh_WrapArgs& args) {
    model_ = args.model;
    api_ = args.model_api;
    int32_t trainable = 0;
    for (size_t i = 0; i < api_->Model_NumParams(model_); ++i) {
      rh_ParamInfo info{};
      info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
      rh::check(host_, api_->Model_GetParam(model_, i, &info));
      if (!info.requires_grad) continue;
      if (split_ && trainable++ % size_ != rank_) continue;  // another rank's parameter
      params_.push_back({i, prefix_ + std::string(info.name.data, info.name.size),
                         info.data->dl_tensor, nullptr, bytes_of(info.data->dl_tensor)});
    }
  }
  void optimizer_params(const rh_OptimParamSink& sink) {
    for (Param& p : params_) {
      DLManagedTensor* value = make_tensor(p.view, false, p.bytes);
      DLManagedTensor* grad = make_tensor(p.view, true, p.bytes);
      p.grad = static_cast<char*>(grad->dl_tensor.data);
      rh_OptimParam op{
          RH_OPTIM_PARAM_STRUCT_SIZE, {p.name.data(), p.name.size()}, value, grad, nullptr, 0, 0};
      std::vector<int64_t> whole(p.view.shape, p.view.shape + p.view.ndim);
      const auto numel = static_cast<int64_t>(p.bytes / 4);
      if (tp_from_ > 0 && numel > tp_from_) {  // elements [from, numel) as a flat shard
        for (DLManagedTensor* t : {value, grad}) {
          t->dl_tensor.ndim = 1;
          t->dl_tensor.shape[0] = numel - tp_from_;
          t->dl_tensor.byte_offset += static_cast<uint64_t>(tp_from_) * 4;
        }
        op.full_shape = whole.data();
        op.full_ndim = static_cast<int32_t>(whole.size());
        op.full_offset = tp_from_;
      }
      rh::check(host_, sink.add(sink.user_data, &op));
    }
  }
  void sync_gradients(bool sync) {
    if (!sync) return;
    for (Param& p : params_) {
      DLManagedTensor* g = nullptr;
      rh::check(host_, api_->Model_GetGrad(model_, p.index, &g));
      if (g == nullptr)
        std::memset(p.grad, 0, p.bytes);
      else
        std::memcpy(p.grad, static_cast<const char*>(g->dl_tensor.data) + g->dl_tensor.byte_offset,
                    p.bytes);
    }
  }

  void after_optimizer_step() {
    if (++steps_ != perturb_step_) return;
    for (Param& p : params_) {
      if (p.name != prefix_ + perturb_param_ || p.view.dtype.code != kDLFloat ||
          p.view.dtype.bits != 32)
        continue;
      *reinterpret_cast<float*>(static_cast<char*>(p.view.data) + p.view.byte_offset) += 0.01f;
      return;
    }
    throw rh::Exception(RH_ERROR_INVALID_ARGUMENT,
                        "perturb_param: no float32 trainable parameter '" + perturb_param_ + "'");
  }

 private:
  struct Param {
    size_t index;
    std::string name;
    DLTensor view;  // the model's parameter (host-owned data)
    char* grad;     // our buffer (owned by the host's tensor once handed over)
    size_t bytes;
  };
  const rh_HostApi* host_;
  rh_Model* model_ = nullptr;
  const rh_ModelApi* api_ = nullptr;
  bool after_wrap_ = false;
  bool sharded_ = false;
  std::string prefix_;
  bool split_ = false;
  int64_t perturb_step_ = 0;
  std::string perturb_param_;
  int64_t steps_ = 0;
  int32_t rank_ = 0;
  int32_t size_ = 1;
  std::vector<Param> params_;
  int64_t tp_from_ = 0;
  rh_Comm* tp_group_ = nullptr;
  const rh_TensorParallelRule tp_rules_[3] = {
      {RH_TENSOR_PARALLEL_RULE_STRUCT_SIZE, RH_TP_COLWISE, RH_STR("layers.*.feed_forward.w1")},
      {RH_TENSOR_PARALLEL_RULE_STRUCT_SIZE, RH_TP_COLWISE, RH_STR("layers.*.feed_forward.w3")},
      {RH_TENSOR_PARALLEL_RULE_STRUCT_SIZE, RH_TP_ROWWISE, RH_STR("layers.*.feed_forward.w2")},
  };
};

const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_STRATEGY, RH_STR("own_optimizer"),
     RH_STR("hands the host its own optimizer tensors (OptimizerParams tests)"),
     &rh::StrategyAdapter<OwnOptimizer>::vtable},
};

const rh_PluginInfo kInfo = {
    RH_PLUGIN_INFO_STRUCT_SIZE,
    RH_ABI_VERSION_MAJOR,
    RH_ABI_VERSION_MINOR,
    RH_STR("rh_test_own_optimizer"),
    RH_STR("0.1.0"),
    RH_NATIVE_TAG_NONE,
    kComponents,
    1,
    nullptr,
    nullptr,
};

}  // namespace

extern "C" RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t, uint32_t) { return &kInfo; }
