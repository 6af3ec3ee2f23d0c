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
#pragma once

#include <vector>

#include "config/Schema.hpp"

namespace rh::optim {

config::Schema optim_wrapper_schema();
config::Schema param_scheduler_schema();

// Run after validate() found no error in the subtree (they read values as the
// schema guarantees them). Each error is located at the key to fix:
//   optim_wrapper: optimizer.betas holds two numbers in [0, 1); nesterov needs
//     momentum > 0 and dampening 0; a *_decay_mult (paramwise_cfg or a custom
//     key's decay_mult) needs an explicit optimizer.weight_decay (as MMEngine);
//     each paramwise_cfg.custom_keys value is {lr_mult, decay_mult}.
//   param_scheduler: end > begin; convert_to_iter_based needs by_epoch: true;
//     CosineAnnealingLR takes eta_min or eta_min_ratio, not both. (A missing
//     `end` defaults to the training length when ParamSchedulers is built.)
std::vector<config::ConfigError> check_optim_wrapper(const config::Node& optim_wrapper);
std::vector<config::ConfigError> check_param_scheduler(const config::Node& param_scheduler);

}  // namespace rh::optim
