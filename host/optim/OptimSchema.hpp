// Schemas of `optim_wrapper:` and `param_scheduler:` (no LibTorch here), and
// the rules between keys that a schema cannot express.
//
//   optim_wrapper:
//     optimizer: {type: AdamW, lr: 3.0e-4, betas: [0.9, 0.95], weight_decay: 0.05}
//     paramwise_cfg:
//       norm_decay_mult: 0.0
//       custom_keys: {head: {lr_mult: 10.0}}
//     clip_grad: {max_norm: 1.0}
//     accumulative_counts: 4
//   param_scheduler:
//     - {type: LinearLR, start_factor: 0.001, by_epoch: false, begin: 0, end: 500}
//     - {type: CosineAnnealingLR, begin: 0, end: 100, eta_min_ratio: 0.01}
//
//   optim_wrapper:                     # MMEngine's AmpOptimWrapper
//     type: AmpOptimWrapper
//     dtype: bfloat16                  # float16 (the default on a GPU) | bfloat16 (on the CPU)
//     loss_scale: dynamic              # | 512.0 (static) | {init_scale, growth_factor, ...}
//     optimizer: {type: AdamW, lr: 1.0e-3}
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/Schema.hpp"
#include "optim/GradScaler.hpp"

namespace rh::optim {

// AmpOptimWrapper's settings, read from a validated optim_wrapper subtree
// (nullopt for type OptimWrapper), with where they were written for the
// refusals that come later (the device, the strategy).
enum class AmpDtype { Default, BFloat16, Float16 };
struct AmpSettings {
  AmpDtype dtype = AmpDtype::Default;  // Default: float16 on a GPU, bfloat16 on the CPU
  GradScalerOptions scaler;
  config::Location type_location, dtype_location;
  std::string type_path, dtype_path;
};
std::optional<AmpSettings> read_amp_settings(const config::Node& optim_wrapper);

// MMPretrain's layer depth (LearningRateDecayOptimWrapperConstructor, as its
// VisionTransformer.get_layer_depth): with L numbered blocks ("blocks.<i>." /
// "layers.<i>." in the name), a parameter of block i has id i + 1; those
// registered before the first block (embeddings, cls_token, pos_embed) 0;
// the rest (final norm, head) L + 1; count = L + 2. `names`: the model's
// parameters in registration order. blocks 0: the model has none.
struct LayerDepths {
  std::map<std::string, int64_t> id;
  int64_t count = 0;
  int64_t blocks = 0;
};
LayerDepths layer_depths(const std::vector<std::string>& names);

config::Schema optim_wrapper_schema();
config::Schema param_scheduler_schema();

// Run after validate() found no error in the subtree (they read values as the
// schema guarantees them). Each error is located at the key to fix:
//   optim_wrapper: dtype and loss_scale only with type AmpOptimWrapper;
//     optimizer.betas holds two numbers in [0, 1); nesterov needs
//     momentum > 0 and dampening 0; a *_decay_mult (paramwise_cfg or a custom
//     key's decay_mult) needs an explicit optimizer.weight_decay (as MMEngine);
//     each paramwise_cfg.custom_keys value is {lr_mult, decay_mult}.
//   param_scheduler: end > begin; convert_to_iter_based needs by_epoch: true;
//     CosineAnnealingLR takes eta_min or eta_min_ratio, not both. (A missing
//     `end` defaults to the training length when ParamSchedulers is built.)
std::vector<config::ConfigError> check_optim_wrapper(const config::Node& optim_wrapper);
std::vector<config::ConfigError> check_param_scheduler(const config::Node& param_scheduler);

}  // namespace rh::optim
