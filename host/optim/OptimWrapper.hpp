// The optimizer as the runner drives it (MMEngine's OptimWrapper): builds a
// torch::optim optimizer over the strategy's parameters with paramwise_cfg
// parameter groups, clips gradients, counts accumulation steps, and exports /
// imports its state as named tensors for checkpoints.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "model/Model.hpp"

namespace torch::optim {
class Optimizer;
}
namespace rh::config {
class Node;
}

namespace rh::optim {

struct OptimParam {
  std::string name;      // parameter name: paramwise_cfg matches it
  at::Tensor param;      // updated in place; its grad() is set before step()
  bool is_norm = false;  // belongs to a normalisation layer (norm_decay_mult)
};

class OptimWrapper {
 public:
  // `cfg` is the validated `optim_wrapper:` subtree.
  OptimWrapper(const config::Node& cfg, std::vector<OptimParam> params);
  ~OptimWrapper();

  // Multiplies every group's lr (auto_scale_lr; before schedulers exist).
  void scale_lr(double factor);
  // lr of each param group, and the base lr the schedulers scale.
  std::vector<double> lrs() const;
  std::vector<double> base_lrs() const;
  void set_lrs(const std::vector<double>& lrs);

  int accumulative_counts() const { return accumulative_counts_; }
  // Clips (when clip_grad is set) and steps. Returns the total gradient norm
  // before clipping, or -1 when clipping is off.
  double step();
  void zero_grad();

  // Checkpoint state: "<param name>.<state>" -> tensor (exp_avg, exp_avg_sq,
  // momentum_buffer, step as a 0-d int64 tensor...). CPU copies.
  std::vector<model::NamedTensor> state_tensors() const;
  // Restores what state_tensors() produced; throws naming missing or
  // mismatched entries.
  void load_state_tensors(const std::vector<model::NamedTensor>& tensors);

  torch::optim::Optimizer& optimizer() { return *optimizer_; }

 private:
  std::vector<OptimParam> params_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<double> base_lrs_;
  int accumulative_counts_ = 1;
  double clip_max_norm_ = -1;
  double clip_norm_type_ = 2;
};

}  // namespace rh::optim
