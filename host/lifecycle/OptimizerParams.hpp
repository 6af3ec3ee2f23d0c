// The optimizer's parameters: the model's trainable ones, or the tensors a
// strategy hands over (OptimizerParams: its shards), checked; the layer ids
// of layer-wise lr decay; --print-param-groups.
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <iosfwd>
#include <vector>

#include "optim/OptimWrapper.hpp"

namespace rh::config {
class Node;
}
namespace rh::host {
class StrategyInstance;
}
namespace rh::model {
class Model;
}

namespace rh::lifecycle {

// The model's trainable parameters, as the optimizer takes them without a
// strategy's own tensors.
std::vector<optim::OptimParam> trainable_params(model::Model& model);

// MMPretrain's layer-wise lr decay (optim_wrapper.constructor:
// LearningRateDecayOptimWrapperConstructor): each parameter's layer, from
// the model's parameters in registration order.
void set_layer_depths(const config::Node& job, model::Model& model,
                      std::vector<optim::OptimParam>& params);

// What a strategy's OptimizerParams gave: the tensors the optimizer updates
// and, for each, the tensor where the strategy leaves its gradient.
struct StrategyOptimizerParams {
  std::vector<optim::OptimParam> params;
  std::vector<at::Tensor> grads;
};

// Calls the strategy's OptimizerParams and checks what it hands over (each
// record sized, named once, its grad like its param, a shard inside its full
// shape); refuses clip_grad without ReduceGradNorm and a paramwise_cfg the
// tensors' names and full shapes cannot match. Throws HostError or
// ConfigError.
StrategyOptimizerParams strategy_optimizer_params(const config::Node& job,
                                                  host::StrategyInstance& strategy,
                                                  model::Model& model);

// --print-param-groups: builds the model (on the CPU, from the job's seed)
// and writes, per trainable parameter, the lr and weight decay its
// optimizer group gets from optim_wrapper (paramwise_cfg, constructor) and
// its layer id under LearningRateDecayOptimWrapperConstructor ("-"
// otherwise), tab-separated after a header line. Throws ConfigError.
void print_param_groups(const config::Node& job, const std::filesystem::path& job_dir,
                        std::ostream& out);

}  // namespace rh::lifecycle
