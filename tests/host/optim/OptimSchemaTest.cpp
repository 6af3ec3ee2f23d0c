// The `optim_wrapper:` and `param_scheduler:` schemas and their cross-key
// checks: each bad input with its message.
#include <gtest/gtest.h>

#include "config/YamlReader.hpp"
#include "optim/GradScaler.hpp"
#include "optim/OptimSchema.hpp"

namespace rh::optim {
namespace {

using config::ConfigError;
using config::NodePtr;

// Every message validate() and the checks give for `yaml` (a job fragment).
std::vector<std::string> errors_of(const std::string& yaml) {
  using namespace config::schema;
  const NodePtr root = config::parse_yaml(yaml, "job.yaml");
  const config::Schema job = map(
      {{"optim_wrapper", optim_wrapper_schema()}, {"param_scheduler", param_scheduler_schema()}});
  std::vector<ConfigError> errors = config::validate(*root, job);
  if (errors.empty()) {
    if (const auto* ow = root->find("optim_wrapper")) errors = check_optim_wrapper(*ow);
    if (const auto* ps = root->find("param_scheduler")) {
      const auto more = check_param_scheduler(*ps);
      errors.insert(errors.end(), more.begin(), more.end());
    }
  }
  std::vector<std::string> messages;
  for (const auto& e : errors) messages.emplace_back(e.what());
  return messages;
}

using Messages = std::vector<std::string>;

TEST(OptimSchemaTest, AcceptsEveryKey) {
  EXPECT_EQ(errors_of(R"(
optim_wrapper:
  type: OptimWrapper
  optimizer: {type: SGD, lr: 0.1, momentum: 0.9, dampening: 0, weight_decay: 1.0e-4, nesterov: true}
  paramwise_cfg:
    bias_lr_mult: 2.0
    bias_decay_mult: 0.0
    norm_decay_mult: 0.0
    flat_decay_mult: 0.0
    custom_keys: {head: {lr_mult: 10.0, decay_mult: 0.5}, pos_embed: {decay_mult: 0.0}}
  clip_grad: {max_norm: 1.0, norm_type: 2}
  accumulative_counts: 2
param_scheduler:
  - {type: LinearLR, start_factor: 0.001, end_factor: 1.0, by_epoch: false, begin: 0, end: 500}
  - {type: ConstantLR, factor: 0.5, begin: 0, end: 3}
  - {type: StepLR, step_size: 30, gamma: 0.1}
  - {type: MultiStepLR, milestones: [30, 60], gamma: 0.1, by_epoch: true}
  - {type: ExponentialLR, gamma: 0.99}
  - {type: CosineAnnealingLR, T_max: 100, eta_min: 0, begin: 0, end: 100, convert_to_iter_based: true}
  - {type: PolyLR, eta_min: 0, power: 0.9, end: 100}
)"),
            Messages{});
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: Adam, lr: 0.001, betas: [0.9, 0.99], "
                      "eps: 1.0e-8, weight_decay: 0, amsgrad: true}\n"
                      "param_scheduler: {type: CosineAnnealingLR, end: 10, eta_min_ratio: 0.1}\n"),
            Messages{});
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: AdamW}\n  clip_grad: null\n"),
            Messages{});
}

TEST(OptimSchemaTest, UnknownOptimizerTypeListsTheChoices) {
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: Adamw, lr: 0.1}\n"),
            Messages{"job.yaml:2:21: optim_wrapper.optimizer.type: unknown optimizer type "
                     "'Adamw'; choices: Adam, AdamW, SGD (did you mean 'AdamW'?)"});
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: RMSprop, lr: 0.1}\n"),
            Messages{"job.yaml:2:21: optim_wrapper.optimizer.type: unknown optimizer type "
                     "'RMSprop'; choices: Adam, AdamW, SGD"});
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {lr: 0.1}\n"),
            Messages{"job.yaml:2:14: optim_wrapper.optimizer: missing required key 'type'"});
  EXPECT_EQ(errors_of("optim_wrapper:\n  clip_grad: {max_norm: 1}\n"),
            Messages{"job.yaml:2:3: optim_wrapper: missing required key 'optimizer'"});
}

TEST(OptimSchemaTest, MisspeltKeysSuggestTheRightOne) {
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: SGD, lr: 0.1, momentun: 0.9}\n"),
            Messages{"job.yaml:2:35: optim_wrapper.optimizer.momentun: unknown key (did you mean "
                     "'momentum'?)"});
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: AdamW}\n  paramwise_cfg: "
                      "{norm_decay_mul: 0}\n"),
            Messages{"job.yaml:3:19: optim_wrapper.paramwise_cfg.norm_decay_mul: unknown key "
                     "(did you mean 'norm_decay_mult'?)"});
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: AdamW}\n  clip_grad: {max_norm: 1, "
                      "norm_typ: 2}\n"),
            Messages{"job.yaml:3:28: optim_wrapper.clip_grad.norm_typ: unknown key (did you "
                     "mean 'norm_type'?)"});
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: AdamW, weight_decay: 0.1}\n"
                      "  paramwise_cfg: {custom_keys: {head: {lr_mul: 2}}}\n"),
            Messages{"job.yaml:3:40: optim_wrapper.paramwise_cfg.custom_keys.head.lr_mul: unknown "
                     "key (did you mean 'lr_mult'?)"});
  EXPECT_EQ(errors_of("param_scheduler: {type: CosineAnnealingLR, T_maxx: 10}\n"),
            Messages{"job.yaml:1:44: param_scheduler.T_maxx: unknown key (did you mean 'T_max'?)"});
  EXPECT_EQ(errors_of("param_scheduler:\n  - {type: LinearLR, end: 5, by_epoc: false}\n"),
            Messages{"job.yaml:2:30: param_scheduler.0.by_epoc: unknown key (did you mean "
                     "'by_epoch'?)"});
}

TEST(OptimSchemaTest, UnknownSchedulerTypeListsTheChoices) {
  EXPECT_EQ(errors_of("param_scheduler: {type: CosineLR, end: 5}\n"),
            Messages{"job.yaml:1:25: param_scheduler.type: unknown param_scheduler type "
                     "'CosineLR'; choices: ConstantLR, CosineAnnealingLR, ExponentialLR, LinearLR, "
                     "MultiStepLR, PolyLR, StepLR"});
  EXPECT_EQ(errors_of("param_scheduler: {type: MultiStepLR}\n"),
            Messages{"job.yaml:1:18: param_scheduler: missing required key 'milestones'"});
}

TEST(OptimSchemaTest, RangesAreChecked) {
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: SGD, lr: -1}\n"),
            Messages{"job.yaml:2:30: optim_wrapper.optimizer.lr: must be >= 0, got -1"});
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: SGD}\n"),
            Messages{"job.yaml:2:14: optim_wrapper.optimizer: missing required key 'lr'"});
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: Adam}\n  clip_grad: {max_norm: 0}\n"),
            Messages{"job.yaml:3:25: optim_wrapper.clip_grad.max_norm: must be > 0, got 0"});
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: Adam}\n  accumulative_counts: 0\n"),
            Messages{"job.yaml:3:24: optim_wrapper.accumulative_counts: must be >= 1, got 0"});
  EXPECT_EQ(errors_of("param_scheduler: {type: LinearLR, start_factor: 1.5, end: 5}\n"),
            Messages{"job.yaml:1:49: param_scheduler.start_factor: must be <= 1, got 1.5"});
}

TEST(OptimSchemaTest, CrossKeyRules) {
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: Adam, betas: [0.9, 1.0, 0.5]}\n"),
            (Messages{"job.yaml:2:34: optim_wrapper.optimizer.betas: expected two numbers "
                      "[beta1, beta2], got 3",
                      "job.yaml:2:40: optim_wrapper.optimizer.betas.1: must be < 1, got 1.0"}));
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: SGD, lr: 0.1, nesterov: true}\n"),
            Messages{"job.yaml:2:45: optim_wrapper.optimizer.nesterov: nesterov needs momentum > "
                     "0 and dampening 0, got momentum 0 and dampening 0"});
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: AdamW}\n"
                      "  paramwise_cfg: {flat_decay_mult: 0, custom_keys: {a: {decay_mult: 0}}}\n"),
            (Messages{"job.yaml:3:36: optim_wrapper.paramwise_cfg.flat_decay_mult: needs "
                      "optimizer.weight_decay to be written out (the multiplier scales it; "
                      "MMEngine requires it too)",
                      "job.yaml:3:69: optim_wrapper.paramwise_cfg.custom_keys.a.decay_mult: needs "
                      "optimizer.weight_decay to be written out (the multiplier scales it; "
                      "MMEngine requires it too)"}));
  EXPECT_EQ(errors_of("param_scheduler: {type: StepLR, step_size: 1, begin: 5, end: 5}\n"),
            Messages{"job.yaml:1:62: param_scheduler.end: must be > begin (5), got 5"});
  EXPECT_EQ(errors_of("param_scheduler: {type: StepLR, step_size: 1, by_epoch: false, "
                      "convert_to_iter_based: true}\n"),
            Messages{"job.yaml:1:87: param_scheduler.convert_to_iter_based: needs by_epoch: true "
                     "(it converts an epoch-based schedule to iterations)"});
  EXPECT_EQ(errors_of("param_scheduler: {type: CosineAnnealingLR, end: 5, eta_min: 0, "
                      "eta_min_ratio: 0.1}\n"),
            Messages{"job.yaml:1:79: param_scheduler.eta_min_ratio: give eta_min or "
                     "eta_min_ratio, not both"});
  // No end: fine here, ParamSchedulers defaults it to the training length.
  EXPECT_EQ(errors_of("param_scheduler:\n  - {type: PolyLR}\n"), Messages{});
}

// MMPretrain's LearningRateDecayOptimWrapperConstructor: its key only with
// it, and no lr multiplier beside it (MMPretrain drops them there).
TEST(OptimSchemaTest, LayerDecayKeysAreCheckedAgainstTheConstructor) {
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: AdamW, weight_decay: 0.05}\n"
                      "  constructor: LearningRateDecayOptimWrapperConstructor\n"
                      "  paramwise_cfg: {layer_decay_rate: 0.75, norm_decay_mult: 0.0, "
                      "custom_keys: {.pos_embed: {decay_mult: 0.0}}}\n"),
            Messages{});
  EXPECT_EQ(errors_of("optim_wrapper:\n  optimizer: {type: AdamW}\n"
                      "  paramwise_cfg: {layer_decay_rate: 0.75}\n"),
            Messages{"job.yaml:3:37: optim_wrapper.paramwise_cfg.layer_decay_rate: "
                     "layer_decay_rate needs constructor: LearningRateDecayOptimWrapperConstructor "
                     "(optim_wrapper.constructor)"});
  const auto lr_mults = errors_of(
      "optim_wrapper:\n  optimizer: {type: AdamW}\n"
      "  constructor: LearningRateDecayOptimWrapperConstructor\n"
      "  paramwise_cfg: {bias_lr_mult: 2.0, custom_keys: {head: {lr_mult: 10.0}}}\n");
  ASSERT_EQ(lr_mults.size(), 2u);
  EXPECT_NE(lr_mults[0].find("paramwise_cfg.bias_lr_mult: LearningRateDecayOptimWrapperConstructor "
                             "sets every lr from its layer"),
            std::string::npos)
      << lr_mults[0];
  EXPECT_NE(lr_mults[1].find("custom_keys.head.lr_mult: LearningRateDecayOptimWrapperConstructor"),
            std::string::npos)
      << lr_mults[1];
}

TEST(OptimSchemaTest, LayerDepthsFollowMmpretrainsRule) {
  const LayerDepths d = layer_depths({"embed.cls_token", "embed.patch.weight", "blocks.0.attn.w",
                                      "blocks.1.norm1.weight", "blocks.10.mlp.fc1.weight",
                                      "head.norm.weight", "head.fc.bias"});
  EXPECT_EQ(d.blocks, 11);
  EXPECT_EQ(d.count, 13);  // blocks + 2
  EXPECT_EQ(d.id.at("embed.cls_token"), 0);
  EXPECT_EQ(d.id.at("embed.patch.weight"), 0);
  EXPECT_EQ(d.id.at("blocks.0.attn.w"), 1);
  EXPECT_EQ(d.id.at("blocks.1.norm1.weight"), 2);
  EXPECT_EQ(d.id.at("blocks.10.mlp.fc1.weight"), 11);
  EXPECT_EQ(d.id.at("head.norm.weight"), 12);
  EXPECT_EQ(d.id.at("head.fc.bias"), 12);
  // TorchScript names: layers.<i> at any depth; "sublayers.0" is no block.
  const LayerDepths t =
      layer_depths({"stem.w", "encoder.layers.0.w", "encoder.layers.1.w", "x.sublayers.0.w"});
  EXPECT_EQ(t.blocks, 2);
  EXPECT_EQ(t.id.at("stem.w"), 0);
  EXPECT_EQ(t.id.at("encoder.layers.1.w"), 2);
  EXPECT_EQ(t.id.at("x.sublayers.0.w"), 3);
  EXPECT_EQ(layer_depths({"fc.weight", "fc.bias"}).blocks, 0);
}

// AmpOptimWrapper: MMEngine's keys as its configs write them, read into the
// settings the runner builds the scaler from; its keys refused elsewhere.
TEST(OptimSchemaTest, AmpOptimWrapperTakesMmengineKeys) {
  for (const char* scale : {"dynamic", "512.0", "512",
                            "{init_scale: 1024, growth_factor: 4, backoff_factor: 0.25, "
                            "growth_interval: 100}"})
    EXPECT_EQ(errors_of(std::string("optim_wrapper:\n  type: AmpOptimWrapper\n  dtype: float16\n"
                                    "  loss_scale: ") +
                        scale + "\n  optimizer: {type: SGD, lr: 0.01, momentum: 0.9}\n"),
              Messages{})
        << scale;
  auto settings = [](const std::string& yaml) {
    const NodePtr root = config::parse_yaml(yaml, "job.yaml");
    return read_amp_settings(*root->find("optim_wrapper"));
  };
  EXPECT_FALSE(settings("optim_wrapper: {optimizer: {type: Adam}}\n").has_value());
  const auto plain = settings("optim_wrapper: {type: AmpOptimWrapper, optimizer: {type: Adam}}\n");
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->dtype, AmpDtype::Default);
  EXPECT_TRUE(plain->scaler.dynamic);
  EXPECT_EQ(plain->scaler.init_scale, 65536.0);
  EXPECT_EQ(plain->scaler.growth_interval, 2000);
  const auto fixed = settings(
      "optim_wrapper: {type: AmpOptimWrapper, dtype: bfloat16, loss_scale: 128, optimizer: "
      "{type: Adam}}\n");
  EXPECT_EQ(fixed->dtype, AmpDtype::BFloat16);
  EXPECT_FALSE(fixed->scaler.dynamic);
  EXPECT_EQ(fixed->scaler.init_scale, 128.0);
  EXPECT_EQ(fixed->dtype_path, "optim_wrapper.dtype");
  const auto custom = settings(
      "optim_wrapper: {type: AmpOptimWrapper, loss_scale: {init_scale: 8, growth_interval: 3}, "
      "optimizer: {type: Adam}}\n");
  EXPECT_TRUE(custom->scaler.dynamic);
  EXPECT_EQ(custom->scaler.init_scale, 8.0);
  EXPECT_EQ(custom->scaler.growth_interval, 3);
  EXPECT_EQ(custom->scaler.backoff_factor, 0.5);
}

// loss_scale as a map: each of its four keys reaches the scaler the runner
// builds (GradScaler(settings.scaler)): it starts at init_scale, grows by
// growth_factor after growth_interval clean steps, and backs off by
// backoff_factor on an overflow.
TEST(OptimSchemaTest, LossScaleMapSetsEveryRuleOfTheScaler) {
  const NodePtr root = config::parse_yaml(
      "optim_wrapper: {type: AmpOptimWrapper, loss_scale: {init_scale: 8, growth_factor: 4, "
      "backoff_factor: 0.25, growth_interval: 2}, optimizer: {type: Adam}}\n",
      "job.yaml");
  const auto settings = read_amp_settings(*root->find("optim_wrapper"));
  ASSERT_TRUE(settings.has_value());
  GradScaler scaler(settings->scaler);
  EXPECT_EQ(scaler.scale(), 8.0);  // init_scale
  scaler.update(false, 0);
  EXPECT_EQ(scaler.scale(), 8.0);
  scaler.update(false, 1);          // growth_interval 2 clean steps
  EXPECT_EQ(scaler.scale(), 32.0);  // x growth_factor 4
  scaler.update(true, 2);
  EXPECT_EQ(scaler.scale(), 8.0);  // x backoff_factor 0.25
  // A number is a static scale (MMEngine's loss_scale: <number>).
  const NodePtr fixed = config::parse_yaml(
      "optim_wrapper: {type: AmpOptimWrapper, loss_scale: 16, optimizer: {type: Adam}}\n",
      "job.yaml");
  GradScaler still(read_amp_settings(*fixed->find("optim_wrapper"))->scaler);
  still.update(true, 0);
  still.update(false, 1);
  EXPECT_EQ(still.scale(), 16.0);
}

TEST(OptimSchemaTest, AmpKeysAreRefusedWhereTheyCannotApply) {
  EXPECT_EQ(errors_of("optim_wrapper:\n  dtype: bfloat16\n  optimizer: {type: Adam}\n"),
            Messages{"job.yaml:2:10: optim_wrapper.dtype: dtype is an AmpOptimWrapper key (type: "
                     "AmpOptimWrapper turns on mixed precision; type is OptimWrapper here)"});
  EXPECT_EQ(errors_of("optim_wrapper:\n  type: AmpOptimWrapper\n  dtype: float64\n"
                      "  optimizer: {type: Adam}\n"),
            Messages{"job.yaml:3:10: optim_wrapper.dtype: expected one of bfloat16, float16, "
                     "got 'float64' (did you mean 'float16'?)"});
  const auto bad_scale = errors_of(
      "optim_wrapper:\n  type: AmpOptimWrapper\n  loss_scale: static\n  optimizer: {type: "
      "Adam}\n");
  ASSERT_EQ(bad_scale.size(), 1u);
  EXPECT_NE(bad_scale[0].find("optim_wrapper.loss_scale"), std::string::npos) << bad_scale[0];
  EXPECT_EQ(errors_of("optim_wrapper:\n  type: AmpOptimWrapper\n  loss_scale: {backoff_factor: "
                      "1}\n  optimizer: {type: Adam}\n"),
            Messages{"job.yaml:3:32: optim_wrapper.loss_scale.backoff_factor: must be < 1 (the "
                     "scale is multiplied by it after an overflow)"});
  EXPECT_EQ(errors_of("optim_wrapper:\n  type: AmpOptimWrapper\n  loss_scale: {growth_factor: 1}\n"
                      "  optimizer: {type: Adam}\n"),
            Messages{"job.yaml:3:31: optim_wrapper.loss_scale.growth_factor: must be > 1, got 1"});
}

}  // namespace
}  // namespace rh::optim
