// The optimizer as the runner drives it (MMEngine's OptimWrapper): builds a
// torch::optim optimizer over the strategy's parameters with paramwise_cfg
// parameter groups, clips gradients, counts accumulation steps, and exports /
// imports its state as named tensors for checkpoints.
//
// Optimizers: SGD (lr required), Adam, AdamW (lr 1e-3; AdamW weight_decay
// 0.01) with torch::optim's semantics. Adam/AdamW `fused: true` step with
// PyTorch's fused kernel (torch.optim's fused=True: one multi-tensor launch
// instead of ~10 per parameter; LibTorch 2.0+ on a GPU, 2.4+ on the CPU,
// refused elsewhere), on the same state (exp_avg, exp_avg_sq, step), so
// checkpoints do not change.
//
// paramwise_cfg (MMEngine's DefaultOptimWrapperConstructor): base = the
// optimizer's lr and weight_decay. For each trainable parameter (one that
// requires grad, or a strategy's shard of one: OptimParam::trainable):
//  - custom_keys: the first key (longest first, then alphabetical) that is a
//    substring of the name sets lr = base × lr_mult, wd = base × decay_mult
//    (both default 1) and no other rule applies;
//  - else bias_lr_mult scales the lr of `.bias` parameters that are not norm;
//  - and the first configured one of these scales the weight decay:
//    norm_decay_mult (is_norm), bias_decay_mult (`.bias`, norm biases too when
//    norm_decay_mult is unset), flat_decay_mult (any other 1-D parameter, and
//    1-D norm/bias parameters whose own multiplier is unset).
// Any decay multiplier needs an explicit optimizer.weight_decay (as MMEngine).
// constructor: LearningRateDecayOptimWrapperConstructor (MMPretrain's): the
// lr of every trainable parameter is lr x layer_decay_rate^(count - 1 - id)
// (OptimParam::layer_id / layer_count); custom_keys set only decay_mult
// there, then norm_decay_mult, bias_decay_mult, flat_decay_mult as above.
// Parameters with the same (lr, weight_decay) share a param group; groups come
// in the order of their first parameter.
//
// accumulative_counts = N is only reported here: the runner divides each
// iteration's loss by N and calls step() / zero_grad() every N iterations
// (MMEngine divides the loss of a shorter last run by its own length).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/Model.hpp"

namespace torch::optim {
class Optimizer;
class OptimizerParamGroup;
}  // namespace torch::optim
namespace rh::config {
class Node;
}

namespace rh::optim {

struct OptimParam {
  OptimParam(std::string name_, at::Tensor param_, bool is_norm_ = false)
      : name(std::move(name_)), param(std::move(param_)), is_norm(is_norm_) {}
  std::string name;      // parameter name: paramwise_cfg matches it
  at::Tensor param;      // updated in place; its grad() is set before step()
  bool is_norm = false;  // belongs to a normalisation layer (norm_decay_mult)
  // A shard (a sharding strategy's OptimizerParams): the whole parameter's
  // shape and the shard's first element in it, flattened; empty: whole.
  std::vector<int64_t> full_shape;
  int64_t full_offset = 0;
  // Whether paramwise_cfg applies to it (MMEngine: a parameter that does
  // not require grad keeps the optimizer's options); nullopt: the tensor's
  // requires_grad. A strategy's tensors (OptimizerParams) are the values of
  // trainable parameters, held without autograd: true.
  std::optional<bool> trainable;
  // LearningRateDecayOptimWrapperConstructor: the parameter's layer id and
  // the model's layer count (optim::layer_depths); -1 / 0 otherwise.
  int64_t layer_id = -1;
  int64_t layer_count = 0;
  // false: another rank counts this tensor in the gradient norm (a
  // tensor-parallel group's replicated parameters: its rank 0 counts them).
  bool norm_counted = true;

  bool is_trainable() const { return trainable.value_or(param.requires_grad()); }
  // The parameter's number of dimensions (flat_decay_mult's "1-D"): the
  // whole parameter's for a shard, which is a flat piece of it.
  int64_t dims() const {
    return full_shape.empty() ? param.dim() : static_cast<int64_t>(full_shape.size());
  }
};

class OptimWrapper {
 public:
  // `cfg` is the validated `optim_wrapper:` subtree; throws config::ConfigError
  // for what check_optim_wrapper() reports, std::invalid_argument for a
  // parameter given twice.
  OptimWrapper(const config::Node& cfg, std::vector<OptimParam> params);
  ~OptimWrapper();

  // Multiplies every group's lr (auto_scale_lr; before schedulers exist).
  void scale_lr(double factor);
  // lr of each param group, and the base lr the schedulers scale.
  std::vector<double> lrs() const;
  std::vector<double> base_lrs() const;
  void set_lrs(const std::vector<double>& lrs);

  int accumulative_counts() const { return accumulative_counts_; }
  // Clips (when clip_grad is set: the norm of the gradients of the
  // parameters that have one, as torch::nn::utils::clip_grad_norm_, but
  // summed exactly for norm types 2 and 1: grad_norm) and steps. Returns the
  // total gradient norm before clipping, or -1 when clipping is off.
  // `reduce_norm` (sharded gradients, the strategy's ReduceGradNorm): takes
  // a share of the norm on this rank (a part of the exact sum of |g|^p, or
  // max |g| for p = inf) and returns the whole job's; the clip follows
  // clip_grad_norm_'s rule (coefficient max_norm / (norm + 1e-6), applied
  // when below 1).
  double step(const std::function<double(double norm_type, double local)>& reduce_norm = {});
  // Resets every grad to undefined (set_to_none, as PyTorch 2 and MMEngine),
  // on every LibTorch version.
  void zero_grad();
  // Makes grads[i] the gradient of parameter i (constructor order), without
  // a copy: a strategy's gradient memory (OptimizerParams).
  void bind_grads(const std::vector<at::Tensor>& grads);

  // Checkpoint state: "<param name>.<field>" -> CPU contiguous copies.
  //   Adam/AdamW: step (0-d int64), exp_avg, exp_avg_sq, and max_exp_avg_sq
  //     with amsgrad, for every parameter (one that never stepped gives step 0
  //     and zeros: exactly what Adam starts from).
  //   SGD with momentum: momentum_buffer, for the parameters that have one
  //     (a parameter without it has had no gradient yet). SGD without: nothing.
  // `copy` false: CPU tensors as they are (no copy), for a save that ends
  // before the next step.
  std::vector<model::NamedTensor> state_tensors(bool copy = true) const;
  // The state tensors there are now (moments, momentum buffers), as they
  // are, on their device: what the optimizer's memory is (memory/optimizer_mb).
  std::vector<at::Tensor> state_in_memory() const;
  // The tensors it updates, in the order it was given them.
  const std::vector<OptimParam>& params() const { return params_; }
  // Restores what state_tensors() produced, onto each parameter's device, so
  // that training continues bitwise as if uninterrupted. Throws
  // std::invalid_argument naming every missing or unexpected entry, and each
  // entry whose shape (both shapes given) or dtype does not fit.
  // `adopt`: the tensors are the caller's to give away (nothing else uses
  // them); one already as its state must be (the parameter's device, dtype,
  // shape, contiguous) becomes the state without a copy.
  // `fresh`: parameters whose state the tensors do not hold and that start
  // afresh (none of their entries is required; any given is refused).
  void load_state_tensors(const std::vector<model::NamedTensor>& tensors, bool adopt = false,
                          const std::set<std::string>& fresh = {});

  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  bool fused() const { return fused_; }
  // Each parameter's lr and weight decay as its group sets them, in the
  // order it was given them (the table --print-param-groups shows).
  struct ParamOptions {
    std::string name;
    double lr = 0;
    double weight_decay = 0;
  };
  std::vector<ParamOptions> param_options() const;

 private:
  // `fused: true`: the step through PyTorch's fused Adam(W) kernel.
  void fused_step();
  double grad_norm(const std::function<double(double, double)>& reduce_norm) const;
  template <typename State, typename Options>
  void fused_group_step(torch::optim::OptimizerParamGroup& group, bool decoupled);

  std::vector<OptimParam> params_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<double> base_lrs_;
  int accumulative_counts_ = 1;
  double clip_max_norm_ = -1;
  double clip_norm_type_ = 2;
  bool fused_ = false;
  // fused: each parameter's step count as the kernel reads it (a float32
  // scalar on its device), beside the integer torch::optim's state keeps
  // (`count`: the value it holds, to notice a state restored by resume).
  struct DeviceStep {
    at::Tensor value;
    int64_t count = -1;
  };
  std::map<const void*, DeviceStep> device_steps_;
};

}  // namespace rh::optim
