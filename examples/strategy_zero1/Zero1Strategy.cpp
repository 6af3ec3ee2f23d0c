// zero1 — the optimizer state sharded over the ranks (ZeRO stage 1, by whole
// parameters), written against the installed SDK alone: the second example
// of docs/writing-a-strategy.md.
//
// Every rank holds the whole model and computes whole gradients, as ddp.
// Each trainable parameter has one owner rank (parameters dealt out by
// size, the same way on every rank); a rank's optimizer holds only what it
// owns (OptimizerParams), so Adam's moments take 1/N of the memory each.
//   SyncGradients       every gradient averaged (RH_REDUCE_AVG rounds as
//                       ddp does); the owner copies it into its optimizer's
//                       gradient buffer
//   the host's step     updates the owned parameters in place (the
//                       optimizer tensor IS the model parameter)
//   AfterOptimizerStep  each parameter broadcast from its owner
//   ReduceGradNorm      clip_grad over the owners' shares
//   UnitParams          required by sharded_checkpoint; the model is whole
//                       on every rank, so there is nothing to gather
//
//   strategy: {plugin: /path/librh_strategy_zero1.so, type: zero1}
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "rh/cpp/plugin.hpp"
#include "rh/cpp/torch.hpp"

namespace {

class Zero1 {
 public:
  // No keys of its own: the host refuses any key under `strategy:` that
  // Create never looked up, naming it.
  explicit Zero1(const rh_CreateArgs& args) : host_(args.host) {}

  void traits(rh_StrategyTraits& t) const {
    t.needs_comm = 1;
    // Each rank's optimizer holds other parameters: every rank saves its own
    // optimizer.rank<r> (the host needs OptimizerParams and UnitParams).
    t.sharded_checkpoint = 1;
  }

  void setup_env(rh_SetupEnvArgs& args) {
    if (args.world == nullptr)
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION, "zero1 needs a communicator");
    world_ = args.world;
    rank_ = host_->Comm_Rank(world_);
    size_ = host_->Comm_Size(world_);
    args.device = args.rank_device;  // a GPU when the host assigns one, else the CPU
  }

  // Deals the trainable parameters out: each to the rank holding the fewest
  // elements so far, in registration order (the same on every rank).
  void wrap(const rh_WrapArgs& args) {
    model_ = args.model;
    api_ = args.model_api;
    std::vector<int64_t> load(static_cast<size_t>(size_), 0);
    for (size_t i = 0; i < api_->Model_NumParams(model_); ++i) {
      const rh_ParamInfo info = param_info(i);
      if (!info.requires_grad) continue;
      const auto least = std::min_element(load.begin(), load.end()) - load.begin();
      load[static_cast<size_t>(least)] += rh::borrow_tensor(info.data).numel();
      params_.push_back({i, static_cast<int32_t>(least), at::Tensor()});
    }
  }

  // The owned parameters themselves (aliasing the model's: the step updates
  // the model in place) and a gradient buffer of this strategy's own.
  void optimizer_params(const rh_OptimParamSink& sink) {
    for (Param& p : params_) {
      if (p.owner != rank_) continue;
      const rh_ParamInfo info = param_info(p.index);
      const at::Tensor value = rh::borrow_tensor(info.data);
      p.grad = at::zeros_like(value);
      rh_OptimParam o{};
      o.struct_size = RH_OPTIM_PARAM_STRUCT_SIZE;
      o.name = info.name;
      o.param = rh::export_tensor(value);  // a new reference: the host owns it
      o.grad = rh::export_tensor(p.grad);
      rh::check(host_, sink.add(sink.user_data, &o));
    }
  }

  // Accumulation steps (sync false) keep adding into the model's gradients.
  void sync_gradients(bool sync) {
    if (!sync) return;
    for (Param& p : params_) {
      at::Tensor g = gradient(p.index);
      rh::check(host_, host_->Comm_AllReduce(world_, dlpack(View(g)), RH_REDUCE_AVG, nullptr));
      if (p.owner == rank_) p.grad.copy_(g);
    }
  }

  // clip_grad: `local` is this rank's share over the gradients it owns.
  double reduce_grad_norm(double norm_type, double local) {
    at::Tensor t = at::full({1}, local, at::TensorOptions().dtype(at::kDouble).device(device()));
    const rh_ReduceOp op = std::isinf(norm_type) ? RH_REDUCE_MAX : RH_REDUCE_SUM;
    rh::check(host_, host_->Comm_AllReduce(world_, dlpack(View(t)), op, nullptr));
    return t.cpu().item<double>();
  }

  void after_optimizer_step() {
    for (const Param& p : params_) {
      at::Tensor value = rh::borrow_tensor(param_info(p.index).data);
      rh::check(host_, host_->Comm_Broadcast(world_, dlpack(View(value)), p.owner, nullptr));
    }
  }

  // The model is whole on every rank: GATHER and RELEASE have nothing to do,
  // and after ADOPT the new values are already in the parameters (which the
  // owners' optimizer tensors alias).
  void unit_params(int32_t, rh_UnitParamsOp) {}

 private:
  struct Param {
    size_t index;     // in the model's registration order
    int32_t owner;    // the rank whose optimizer updates it
    at::Tensor grad;  // owner only: the optimizer's gradient buffer
  };

  rh_ParamInfo param_info(size_t i) const {
    rh_ParamInfo info{};
    info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
    rh::check(host_, api_->Model_GetParam(model_, i, &info));
    return info;
  }

  // The model's gradient of parameter i; zeros in place when backward gave
  // it none (an unused parameter), so that every rank reduces the same.
  at::Tensor gradient(size_t i) {
    DLManagedTensor* g = nullptr;
    rh::check(host_, api_->Model_GetGrad(model_, i, &g));
    if (g != nullptr) return rh::borrow_tensor(g);
    const at::Tensor zeros = at::zeros_like(rh::borrow_tensor(param_info(i).data));
    rh::check(host_, api_->Model_SetGrad(model_, i, dlpack(View(zeros))));
    rh::check(host_, api_->Model_GetGrad(model_, i, &g));
    return rh::borrow_tensor(g);
  }

  at::Device device() const {
    return params_.empty() ? at::Device(at::kCPU)
                           : rh::borrow_tensor(param_info(params_.front().index).data).device();
  }

  // A DLPack view of a tensor for one synchronous call (the collectives and
  // Model_SetGrad borrow their tensors): a temporary, released at the end of
  // the statement that makes it.
  struct View {
    explicit View(const at::Tensor& t) : d(rh::export_tensor(t)) {}
    ~View() { d->deleter(d); }
    View(const View&) = delete;
    View& operator=(const View&) = delete;
    DLManagedTensor* d;
  };
  static DLManagedTensor* dlpack(View&& v) { return v.d; }

  const rh_HostApi* host_;
  rh_Comm* world_ = nullptr;
  int32_t rank_ = 0, size_ = 1;
  rh_Model* model_ = nullptr;
  const rh_ModelApi* api_ = nullptr;
  std::vector<Param> params_;
};

const rh_Component kComponents[] = {
    rh::strategy_component<Zero1>(
        "zero1", "ZeRO stage 1 by whole parameters: each rank's optimizer holds the ones it owns"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_example_zero1", "0.1.0", RH_NATIVE_TAG_TORCH, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)
