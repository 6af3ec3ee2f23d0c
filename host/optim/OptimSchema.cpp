#include "optim/OptimSchema.hpp"

#include <algorithm>
#include <charconv>
#include <string>

namespace rh::optim {
namespace {

using config::ConfigError;
using config::Node;
using config::Schema;

// The keys every scheduler type takes (MMEngine's _ParamScheduler).
std::vector<config::schema::Field> with_common_keys(std::vector<config::schema::Field> fields) {
  using namespace config::schema;
  fields.insert(fields.end(), {
                                  {"by_epoch", boolean(), false, "step per epoch (default true)"},
                                  {"begin", integer(0), false, "first step it acts on (default 0)"},
                                  {"end", integer(1), false, "step it stops at (default: never)"},
                                  {"convert_to_iter_based", boolean(), false,
                                   "convert epochs to iterations (default false)"},
                              });
  return fields;
}

Schema scheduler_schema() {
  using namespace config::schema;
  return typed_union(
      "type",
      {
          {"LinearLR",
           map(with_common_keys({{"start_factor", number(0, 1)}, {"end_factor", number(0, 1)}}))},
          {"ConstantLR", map(with_common_keys({{"factor", number(0, 1)}}))},
          {"StepLR",
           map(with_common_keys({{"step_size", integer(1), true}, {"gamma", number(0)}}))},
          {"MultiStepLR",
           map(with_common_keys({{"milestones", list(integer(0)), true}, {"gamma", number(0)}}))},
          {"ExponentialLR", map(with_common_keys({{"gamma", number(0), true}}))},
          {"CosineAnnealingLR",
           map(with_common_keys(
               {{"T_max", integer(1)}, {"eta_min", number(0)}, {"eta_min_ratio", number(0)}}))},
          {"PolyLR", map(with_common_keys({{"eta_min", number(0)}, {"power", number(0)}}))},
      },
      "param_scheduler");
}

Schema custom_key_schema() {
  using namespace config::schema;
  return map({{"lr_mult", number(0), false, "lr = optimizer.lr * lr_mult (default 1)"},
              {"decay_mult", number(0), false,
               "weight_decay = optimizer.weight_decay * decay_mult (default 1)"}});
}

std::string format_number(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

void add_error(std::vector<ConfigError>& errors, const Node& at, const std::string& message) {
  errors.emplace_back(at.location(), at.path(), message);
}

double number_or(const Node& map, const std::string& key, double fallback) {
  const Node* value = map.find(key);
  return value != nullptr ? value->as_double() : fallback;
}

void check_optimizer(const Node& optimizer, std::vector<ConfigError>& errors) {
  if (const Node* betas = optimizer.find("betas")) {
    if (betas->seq_items().size() != 2) {
      add_error(
          errors, *betas,
          "expected two numbers [beta1, beta2], got " + std::to_string(betas->seq_items().size()));
    }
    for (const auto& beta : betas->seq_items()) {
      if (beta->as_double() >= 1) add_error(errors, *beta, "must be < 1, got " + beta->scalar());
    }
  }
  if (const Node* nesterov = optimizer.find("nesterov");
      nesterov != nullptr && nesterov->as_bool()) {
    const double momentum = number_or(optimizer, "momentum", 0);
    const double dampening = number_or(optimizer, "dampening", 0);
    if (momentum <= 0 || dampening != 0) {
      add_error(errors, *nesterov,
                "nesterov needs momentum > 0 and dampening 0, got momentum " +
                    format_number(momentum) + " and dampening " + format_number(dampening));
    }
  }
}

void check_paramwise(const Node& paramwise, bool has_weight_decay, bool layer_decay,
                     std::vector<ConfigError>& errors) {
  // MMPretrain's LearningRateDecayOptimWrapperConstructor sets each lr from
  // the layer alone: an lr multiplier would be silently dropped there.
  if (const Node* rate = paramwise.find("layer_decay_rate"); rate && !layer_decay)
    add_error(errors, *rate,
              "layer_decay_rate needs constructor: LearningRateDecayOptimWrapperConstructor "
              "(optim_wrapper.constructor)");
  if (layer_decay) {
    if (const Node* mult = paramwise.find("bias_lr_mult"))
      add_error(errors, *mult,
                "LearningRateDecayOptimWrapperConstructor sets every lr from its layer (MMPretrain "
                "applies no bias_lr_mult there): remove it, or use the default constructor");
    if (const Node* keys = paramwise.find("custom_keys"); keys && keys->is_map())
      for (const auto& [key, value] : keys->map_items())
        if (const Node* mult = value->is_map() ? value->find("lr_mult") : nullptr)
          add_error(errors, *mult,
                    "LearningRateDecayOptimWrapperConstructor sets every lr from its layer "
                    "(MMPretrain applies only decay_mult from custom_keys there): remove lr_mult, "
                    "or use the default constructor");
  }
  const std::string needs_wd =
      "needs optimizer.weight_decay to be written out (the multiplier scales it; MMEngine "
      "requires it too)";
  if (!has_weight_decay) {
    for (const char* key : {"bias_decay_mult", "norm_decay_mult", "flat_decay_mult"}) {
      if (const Node* value = paramwise.find(key)) add_error(errors, *value, needs_wd);
    }
  }
  const Node* custom_keys = paramwise.find("custom_keys");
  if (custom_keys == nullptr) return;
  const Schema schema = custom_key_schema();
  for (const auto& [key, value] : custom_keys->map_items()) {
    const std::vector<ConfigError> found = config::validate(*value, schema);
    errors.insert(errors.end(), found.begin(), found.end());
    if (found.empty() && !has_weight_decay) {
      if (const Node* decay = value->find("decay_mult")) add_error(errors, *decay, needs_wd);
    }
  }
}

void check_scheduler(const Node& scheduler, std::vector<ConfigError>& errors) {
  const std::string type = scheduler.find("type")->scalar();
  const Node* begin = scheduler.find("begin");
  const Node* end = scheduler.find("end");
  const int64_t begin_value = begin != nullptr ? begin->as_int() : 0;
  if (end != nullptr && end->as_int() <= begin_value) {
    add_error(errors, *end,
              "must be > begin (" + std::to_string(begin_value) + "), got " + end->scalar());
  }
  const Node* convert = scheduler.find("convert_to_iter_based");
  const Node* by_epoch = scheduler.find("by_epoch");
  if (convert != nullptr && convert->as_bool() && by_epoch != nullptr && !by_epoch->as_bool()) {
    add_error(errors, *convert,
              "needs by_epoch: true (it converts an epoch-based schedule to iterations)");
  }
  if (type == "CosineAnnealingLR") {
    const Node* ratio = scheduler.find("eta_min_ratio");
    if (ratio != nullptr && scheduler.find("eta_min") != nullptr) {
      add_error(errors, *ratio, "give eta_min or eta_min_ratio, not both");
    }
  }
}

}  // namespace

Schema optim_wrapper_schema() {
  using namespace config::schema;
  const Field weight_decay{"weight_decay", number(0), false, "L2 penalty (SGD, Adam)"};
  const Field adam_betas{"betas", list(number(0)), false, "[beta1, beta2] (default [0.9, 0.999])"};
  const Field adam_eps{"eps", number(0), false, "default 1e-8"};
  const Field amsgrad{"amsgrad", boolean(), false, "default false"};
  const Field fused{"fused", boolean(), false,
                    "torch.optim's fused kernel, one launch per step (default false; LibTorch "
                    "2.0+ on a GPU, 2.4+ on the CPU)"};
  const Schema optimizer = typed_union(
      "type",
      {
          {"SGD", map({{"lr", number(0), true},
                       {"momentum", number(0), false, "default 0"},
                       {"dampening", number(), false, "default 0"},
                       weight_decay,
                       {"nesterov", boolean(), false, "default false"}})},
          {"Adam", map({{"lr", number(0), false, "default 0.001"},
                        adam_betas,
                        adam_eps,
                        weight_decay,
                        amsgrad,
                        fused})},
          {"AdamW", map({{"lr", number(0), false, "default 0.001"},
                         adam_betas,
                         adam_eps,
                         {"weight_decay", number(0), false, "decoupled decay (default 0.01)"},
                         amsgrad,
                         fused})},
      },
      "optimizer");
  const Schema paramwise = map({
      {"bias_lr_mult", number(0), false, "lr multiplier of `.bias` parameters (not norm ones)"},
      {"bias_decay_mult", number(0), false, "weight decay multiplier of `.bias` parameters"},
      {"norm_decay_mult", number(0), false, "weight decay multiplier of norm layers' parameters"},
      {"flat_decay_mult", number(0), false, "weight decay multiplier of other 1-D parameters"},
      {"custom_keys", open_map({}), false,
       "{name substring: {lr_mult, decay_mult}}, the longest matching key wins"},
      {"layer_decay_rate", number_above(0), false,
       "LearningRateDecayOptimWrapperConstructor: lr x rate^(layers + 1 - layer id)"},
  });
  const Schema loss_scale = one_of(
      {enumeration({"dynamic"}), number_above(0),
       map({{"init_scale", number_above(0), false, "default 65536 (2^16)"},
            {"growth_factor", number_above(1), false, "default 2.0"},
            {"backoff_factor", number_above(0, 1), false, "default 0.5, < 1"},
            {"growth_interval", integer(1), false, "default 2000"}})},
      "dynamic, a number > 0 (a static scale) or {init_scale, growth_factor, backoff_factor, "
      "growth_interval} (a dynamic scaler with those settings)");
  return map({
      {"type", enumeration({"OptimWrapper", "AmpOptimWrapper"}), false,
       "MMEngine's wrapper type: OptimWrapper (default), AmpOptimWrapper (autocast + loss "
       "scaling)"},
      {"dtype", nullable(enumeration({"bfloat16", "float16"})), false,
       "AmpOptimWrapper: the autocast dtype (default: float16 on a GPU, bfloat16 on the CPU)"},
      {"loss_scale", loss_scale, false, "AmpOptimWrapper: default dynamic"},
      {"optimizer", optimizer, true},
      {"constructor",
       enumeration({"DefaultOptimWrapperConstructor", "LearningRateDecayOptimWrapperConstructor"}),
       false,
       "how paramwise_cfg makes parameter groups: MMEngine's default, or MMPretrain's layer-wise "
       "lr decay (vit, gpt, models with blocks.N / layers.N)"},
      {"paramwise_cfg", nullable(paramwise)},
      {"clip_grad", nullable(map({{"max_norm", number_above(0), true},
                                  {"norm_type", number_above(0), false, "default 2; .inf"}}))},
      {"accumulative_counts", integer(1), false,
       "iterations per optimizer step (the loss is divided by it)"},
  });
}

Schema param_scheduler_schema() {
  using namespace config::schema;
  const Schema scheduler = scheduler_schema();
  return one_of({scheduler, list(scheduler)}, "a scheduler map or a list of them");
}

std::vector<ConfigError> check_optim_wrapper(const Node& optim_wrapper) {
  std::vector<ConfigError> errors;
  const Node* type = optim_wrapper.find("type");
  if (type == nullptr || type->scalar() != "AmpOptimWrapper") {
    for (const char* key : {"dtype", "loss_scale"})
      if (const Node* value = optim_wrapper.find(key))
        add_error(errors, *value,
                  std::string(key) +
                      " is an AmpOptimWrapper key (type: AmpOptimWrapper turns on "
                      "mixed precision; type is " +
                      (type != nullptr ? type->scalar() : std::string("OptimWrapper")) + " here)");
  }
  if (const Node* scale = optim_wrapper.find("loss_scale"); scale != nullptr && scale->is_map())
    if (const Node* backoff = scale->find("backoff_factor"); backoff && backoff->as_double() >= 1)
      add_error(errors, *backoff, "must be < 1 (the scale is multiplied by it after an overflow)");
  const Node* optimizer = optim_wrapper.find("optimizer");
  if (optimizer == nullptr) return errors;
  check_optimizer(*optimizer, errors);
  const Node* paramwise = optim_wrapper.find("paramwise_cfg");
  const Node* constructor = optim_wrapper.find("constructor");
  const bool layer_decay =
      constructor != nullptr && constructor->scalar() == "LearningRateDecayOptimWrapperConstructor";
  if (paramwise != nullptr && paramwise->is_map()) {
    check_paramwise(*paramwise, optimizer->find("weight_decay") != nullptr, layer_decay, errors);
  }
  return errors;
}

std::vector<ConfigError> check_param_scheduler(const Node& param_scheduler) {
  std::vector<ConfigError> errors;
  if (param_scheduler.is_map()) {
    check_scheduler(param_scheduler, errors);
  } else {
    for (const auto& item : param_scheduler.seq_items()) check_scheduler(*item, errors);
  }
  return errors;
}

std::optional<AmpSettings> read_amp_settings(const Node& optim_wrapper) {
  const Node* type = optim_wrapper.find("type");
  if (type == nullptr || type->scalar() != "AmpOptimWrapper") return std::nullopt;
  AmpSettings amp;
  amp.type_location = type->location();
  amp.type_path = type->path();
  if (const Node* dtype = optim_wrapper.find("dtype"); dtype != nullptr && !dtype->is_null()) {
    amp.dtype = dtype->scalar() == "bfloat16" ? AmpDtype::BFloat16 : AmpDtype::Float16;
    amp.dtype_location = dtype->location();
    amp.dtype_path = dtype->path();
  }
  const Node* scale = optim_wrapper.find("loss_scale");
  if (scale == nullptr || (scale->is_scalar() && scale->scalar() == "dynamic")) return amp;
  if (scale->is_map()) {
    amp.scaler.init_scale = number_or(*scale, "init_scale", amp.scaler.init_scale);
    amp.scaler.growth_factor = number_or(*scale, "growth_factor", amp.scaler.growth_factor);
    amp.scaler.backoff_factor = number_or(*scale, "backoff_factor", amp.scaler.backoff_factor);
    if (const Node* interval = scale->find("growth_interval"))
      amp.scaler.growth_interval = interval->as_int();
    return amp;
  }
  amp.scaler.init_scale = scale->as_double();  // MMEngine: GradScaler(init_scale=x), update(x)
  amp.scaler.dynamic = false;
  return amp;
}

LayerDepths layer_depths(const std::vector<std::string>& names) {
  LayerDepths d;
  // The block index of a name with a "blocks.<i>." or "layers.<i>." segment.
  auto block_of = [](const std::string& name) -> int64_t {
    for (const char* word : {"blocks.", "layers."}) {
      const std::string w(word);
      for (size_t at = name.find(w); at != std::string::npos; at = name.find(w, at + 1)) {
        if (at != 0 && name[at - 1] != '.') continue;
        size_t end = at + w.size();
        int64_t value = 0;
        bool digits = false;
        while (end < name.size() && name[end] >= '0' && name[end] <= '9') {
          value = value * 10 + (name[end++] - '0');
          digits = true;
        }
        if (digits && end < name.size() && name[end] == '.') return value;
      }
    }
    return -1;
  };
  int64_t blocks = 0;
  bool seen_block = false;
  std::vector<int64_t> block(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    block[i] = block_of(names[i]);
    if (block[i] >= 0) blocks = std::max(blocks, block[i] + 1);
  }
  d.count = blocks + 2;
  for (size_t i = 0; i < names.size(); ++i) {
    if (block[i] >= 0) {
      d.id[names[i]] = block[i] + 1;
      seen_block = true;
    } else {
      d.id[names[i]] = seen_block ? blocks + 1 : 0;  // embeddings before, the rest after
    }
  }
  d.blocks = blocks;
  return d;
}

}  // namespace rh::optim
