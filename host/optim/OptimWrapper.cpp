#include "optim/OptimWrapper.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "config/ConfigNode.hpp"
#include "optim/OptimSchema.hpp"
#include "rh/cpp/torch_compat.hpp"
#include "rh/cpp/torch_exact_norm.hpp"

namespace rh::optim {
namespace {

using config::Node;

void throw_first(const std::vector<config::ConfigError>& errors) {
  if (!errors.empty()) throw errors.front();
}

double number_or(const Node* map, const std::string& key, double fallback) {
  const Node* value = map != nullptr ? map->find(key) : nullptr;
  return value != nullptr ? value->as_double() : fallback;
}

std::optional<double> optional_number(const Node* map, const std::string& key) {
  const Node* value = map != nullptr ? map->find(key) : nullptr;
  if (value == nullptr) return std::nullopt;
  return value->as_double();
}

// --- paramwise_cfg ----------------------------------------------------------

struct CustomKey {
  std::string key;
  double lr_mult = 1;
  double decay_mult = 1;
};

struct Paramwise {
  std::optional<double> bias_lr_mult, bias_decay_mult, norm_decay_mult, flat_decay_mult;
  std::optional<double> layer_decay_rate;  // LearningRateDecayOptimWrapperConstructor
  std::vector<CustomKey> custom_keys;      // longest first, then alphabetical (MMEngine's order)
};

Paramwise read_paramwise(const Node* cfg) {
  Paramwise pw;
  if (cfg == nullptr || !cfg->is_map()) return pw;
  pw.bias_lr_mult = optional_number(cfg, "bias_lr_mult");
  pw.bias_decay_mult = optional_number(cfg, "bias_decay_mult");
  pw.norm_decay_mult = optional_number(cfg, "norm_decay_mult");
  pw.flat_decay_mult = optional_number(cfg, "flat_decay_mult");
  pw.layer_decay_rate = optional_number(cfg, "layer_decay_rate");
  if (const Node* keys = cfg->find("custom_keys")) {
    for (const auto& [key, value] : keys->map_items()) {
      pw.custom_keys.push_back(
          {key, number_or(value.get(), "lr_mult", 1), number_or(value.get(), "decay_mult", 1)});
    }
  }
  std::sort(pw.custom_keys.begin(), pw.custom_keys.end(),
            [](const CustomKey& a, const CustomKey& b) { return a.key < b.key; });
  std::stable_sort(
      pw.custom_keys.begin(), pw.custom_keys.end(),
      [](const CustomKey& a, const CustomKey& b) { return a.key.size() > b.key.size(); });
  return pw;
}

bool is_bias(const std::string& name) {
  static const std::string kSuffix = ".bias";
  return name == "bias" ||
         (name.size() > kSuffix.size() &&
          name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0);
}

struct GroupOptions {
  double lr = 0;
  double weight_decay = 0;
  bool operator==(const GroupOptions& o) const {
    return lr == o.lr && weight_decay == o.weight_decay;
  }
};

// MMEngine's DefaultOptimWrapperConstructor.add_params, rule for rule:
// a matching custom key (longest first) decides alone; otherwise bias_lr_mult
// scales the lr of biases outside norm layers, and the first configured decay
// rule of norm -> bias -> flat (1-D) scales the weight decay. Parameters that do
// not require grad keep the optimizer's options.
GroupOptions options_for(const OptimParam& p, const Paramwise& pw, const GroupOptions& base,
                         bool layer_decay) {
  GroupOptions options = base;
  if (!p.is_trainable()) return options;
  if (layer_decay) {
    // MMPretrain's LearningRateDecayOptimWrapperConstructor.add_params: the
    // lr from the layer alone; the decay from the first rule that applies.
    options.lr = base.lr * std::pow(pw.layer_decay_rate.value_or(1.0),
                                    static_cast<double>(p.layer_count - 1 - p.layer_id));
    const auto custom =
        std::find_if(pw.custom_keys.begin(), pw.custom_keys.end(),
                     [&](const CustomKey& k) { return p.name.find(k.key) != std::string::npos; });
    if (custom != pw.custom_keys.end())
      options.weight_decay = base.weight_decay * custom->decay_mult;
    else if (p.is_norm && pw.norm_decay_mult)
      options.weight_decay = base.weight_decay * *pw.norm_decay_mult;
    else if (is_bias(p.name) && pw.bias_decay_mult)
      options.weight_decay = base.weight_decay * *pw.bias_decay_mult;
    else if (p.dims() == 1 && pw.flat_decay_mult)
      options.weight_decay = base.weight_decay * *pw.flat_decay_mult;
    return options;
  }
  for (const CustomKey& custom : pw.custom_keys) {
    if (p.name.find(custom.key) == std::string::npos) continue;
    options.lr = base.lr * custom.lr_mult;
    options.weight_decay = base.weight_decay * custom.decay_mult;
    return options;
  }
  const bool bias = is_bias(p.name);
  if (bias && !p.is_norm && pw.bias_lr_mult) options.lr = base.lr * *pw.bias_lr_mult;
  if (p.is_norm && pw.norm_decay_mult) {
    options.weight_decay = base.weight_decay * *pw.norm_decay_mult;
  } else if (bias && pw.bias_decay_mult) {
    options.weight_decay = base.weight_decay * *pw.bias_decay_mult;
  } else if (p.dims() == 1 && pw.flat_decay_mult) {
    options.weight_decay = base.weight_decay * *pw.flat_decay_mult;
  }
  return options;
}

struct Group {
  GroupOptions options;
  std::vector<at::Tensor> params;
};

// Parameters with identical (lr, weight_decay) share a group; groups in the
// order their first parameter comes.
std::vector<Group> build_groups(const std::vector<OptimParam>& params, const Paramwise& pw,
                                const GroupOptions& base, bool layer_decay) {
  std::vector<Group> groups;
  for (const OptimParam& p : params) {
    const GroupOptions options = options_for(p, pw, base, layer_decay);
    auto found = std::find_if(groups.begin(), groups.end(),
                              [&](const Group& g) { return g.options == options; });
    if (found == groups.end()) found = groups.insert(groups.end(), Group{options, {}});
    found->params.push_back(p.param);
  }
  return groups;
}

template <typename Optim, typename Options>
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Options& defaults,
                                                        const std::vector<Group>& groups) {
  std::vector<torch::optim::OptimizerParamGroup> param_groups;
  for (const Group& group : groups) {
    auto options = std::make_unique<Options>(defaults);
    options->lr(group.options.lr);
    options->weight_decay(group.options.weight_decay);
    param_groups.emplace_back(group.params, std::move(options));
  }
  return std::make_unique<Optim>(std::move(param_groups), defaults);
}

std::tuple<double, double> read_betas(const Node& cfg) {
  const Node* betas = cfg.find("betas");
  if (betas == nullptr) return {0.9, 0.999};
  return {betas->seq_items().at(0)->as_double(), betas->seq_items().at(1)->as_double()};
}

template <typename Options>
Options adam_options(const Node& cfg, double default_weight_decay) {
  Options options(number_or(&cfg, "lr", 1e-3));
  options.betas(read_betas(cfg));
  options.eps(number_or(&cfg, "eps", 1e-8));
  options.weight_decay(number_or(&cfg, "weight_decay", default_weight_decay));
  if (const Node* amsgrad = cfg.find("amsgrad")) options.amsgrad(amsgrad->as_bool());
  return options;
}

// --- checkpoint state -------------------------------------------------------

enum class OptimizerKind { SGD, Adam, AdamW };

OptimizerKind kind_of(const torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<const torch::optim::SGD*>(&optimizer) != nullptr) return OptimizerKind::SGD;
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer) != nullptr) return OptimizerKind::AdamW;
  return OptimizerKind::Adam;
}

const char* kind_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::SGD:
      return "SGD";
    case OptimizerKind::Adam:
      return "Adam";
    case OptimizerKind::AdamW:
      return "AdamW";
  }
  return "?";
}

bool amsgrad_of(const torch::optim::Optimizer& optimizer, OptimizerKind kind) {
  if (kind == OptimizerKind::Adam) {
    return static_cast<const torch::optim::AdamOptions&>(optimizer.defaults()).amsgrad();
  }
  if (kind == OptimizerKind::AdamW) {
    return static_cast<const torch::optim::AdamWOptions&>(optimizer.defaults()).amsgrad();
  }
  return false;
}

bool has_momentum(const torch::optim::Optimizer& optimizer) {
  return static_cast<const torch::optim::SGDOptions&>(optimizer.defaults()).momentum() != 0;
}

// The state fields of one parameter, in export order. Adam's are always all
// there (a parameter that never stepped exports step 0 and zeros, which is what
// Adam starts from); SGD's momentum_buffer only once the parameter has one.
std::vector<std::string> adam_fields(bool amsgrad) {
  std::vector<std::string> fields = {"step", "exp_avg", "exp_avg_sq"};
  if (amsgrad) fields.emplace_back("max_exp_avg_sq");
  return fields;
}

// A CPU contiguous copy, or (`copy` false) the tensor itself when it is
// already one.
at::Tensor cpu_copy(const at::Tensor& t, bool copy = true) {
  if (!copy && t.device().is_cpu() && t.is_contiguous()) return t.detach();
  return t.detach().to(at::kCPU, t.scalar_type(), /*non_blocking=*/false, /*copy=*/true,
                       at::MemoryFormat::Contiguous);
}

template <typename State>
void export_adam(const torch::optim::Optimizer& optimizer, const OptimParam& p, bool amsgrad,
                 bool copy, std::vector<model::NamedTensor>& out) {
  const auto& state = optimizer.state();
  const auto found = state.find(compat::optimizer_state_key(state, p.param));
  const State* s = found != state.end() ? static_cast<const State*>(found->second.get()) : nullptr;
  const auto zeros = [&] { return at::zeros(p.param.sizes(), p.param.options().device(at::kCPU)); };
  out.push_back({p.name + ".step", at::scalar_tensor(s ? s->step() : 0, at::kLong)});
  out.push_back({p.name + ".exp_avg", s ? cpu_copy(s->exp_avg(), copy) : zeros()});
  out.push_back({p.name + ".exp_avg_sq", s ? cpu_copy(s->exp_avg_sq(), copy) : zeros()});
  if (amsgrad) {
    out.push_back({p.name + ".max_exp_avg_sq", s ? cpu_copy(s->max_exp_avg_sq(), copy) : zeros()});
  }
}

// A copy of `src` laid out like `param` (its device, dtype and memory format).
at::Tensor like_param(const at::Tensor& param, const at::Tensor& src, bool adopt) {
  at::NoGradGuard no_grad;
  if (adopt && src.device() == param.device() && src.scalar_type() == param.scalar_type() &&
      src.sizes() == param.sizes() && src.is_contiguous() && param.is_contiguous())
    return src.detach();
  return at::empty_like(param, at::MemoryFormat::Preserve).copy_(src);
}

template <typename State>
std::unique_ptr<torch::optim::OptimizerParamState> import_adam(
    const OptimParam& p, bool amsgrad, const std::map<std::string, at::Tensor>& given, bool adopt) {
  auto state = std::make_unique<State>();
  state->step(given.at(p.name + ".step").item<int64_t>());
  state->exp_avg(like_param(p.param, given.at(p.name + ".exp_avg"), adopt));
  state->exp_avg_sq(like_param(p.param, given.at(p.name + ".exp_avg_sq"), adopt));
  if (amsgrad)
    state->max_exp_avg_sq(like_param(p.param, given.at(p.name + ".max_exp_avg_sq"), adopt));
  return state;
}

std::string shape_text(at::IntArrayRef sizes) {
  std::ostringstream text;
  text << '[';
  for (size_t i = 0; i < sizes.size(); ++i) text << (i > 0 ? ", " : "") << sizes[i];
  text << ']';
  return text.str();
}

std::string name_list(const std::vector<std::string>& names) {
  constexpr size_t kShown = 8;
  std::string text;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) text += (i > 0 ? ", " : "") + names[i];
  if (names.size() > kShown) text += ", ... (" + std::to_string(names.size() - kShown) + " more)";
  return text;
}

std::string entries(size_t n) { return std::to_string(n) + (n == 1 ? " entry" : " entries"); }

}  // namespace

OptimWrapper::OptimWrapper(const config::Node& cfg, std::vector<OptimParam> params)
    : params_(std::move(params)) {
  throw_first(config::validate(cfg, optim_wrapper_schema()));
  throw_first(check_optim_wrapper(cfg));
  for (size_t i = 0; i < params_.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (params_[i].name == params_[j].name || params_[i].param.is_same(params_[j].param)) {
        throw std::invalid_argument("OptimWrapper: parameter '" + params_[i].name +
                                    "' is given twice (as '" + params_[j].name + "' before)");
      }
    }
  }

  const Node& opt = *cfg.find("optimizer");
  const std::string type = opt.find("type")->scalar();
  const Paramwise paramwise = read_paramwise(cfg.find("paramwise_cfg"));
  const Node* constructor = cfg.find("constructor");
  const bool layer_decay =
      constructor != nullptr && constructor->scalar() == "LearningRateDecayOptimWrapperConstructor";
  if (layer_decay)
    for (const OptimParam& p : params_)
      if (p.is_trainable() && (p.layer_id < 0 || p.layer_id >= p.layer_count))
        throw config::ConfigError(
            constructor->location(), constructor->path(),
            "LearningRateDecayOptimWrapperConstructor: parameter '" + p.name +
                "' has no layer id (the model has no numbered blocks: blocks.<i> / layers.<i>)");
  if (type == "SGD") {
    torch::optim::SGDOptions defaults(opt.find("lr")->as_double());
    defaults.momentum(number_or(&opt, "momentum", 0));
    defaults.dampening(number_or(&opt, "dampening", 0));
    defaults.weight_decay(number_or(&opt, "weight_decay", 0));
    if (const Node* nesterov = opt.find("nesterov")) defaults.nesterov(nesterov->as_bool());
    const auto groups =
        build_groups(params_, paramwise, {defaults.lr(), defaults.weight_decay()}, layer_decay);
    optimizer_ = make_optimizer<torch::optim::SGD>(defaults, groups);
  } else if (type == "Adam") {
    const auto defaults = adam_options<torch::optim::AdamOptions>(opt, 0.0);
    const auto groups =
        build_groups(params_, paramwise, {defaults.lr(), defaults.weight_decay()}, layer_decay);
    optimizer_ = make_optimizer<torch::optim::Adam>(defaults, groups);
  } else {  // AdamW (the schema admits no other type)
    const auto defaults = adam_options<torch::optim::AdamWOptions>(opt, 0.01);
    const auto groups =
        build_groups(params_, paramwise, {defaults.lr(), defaults.weight_decay()}, layer_decay);
    optimizer_ = make_optimizer<torch::optim::AdamW>(defaults, groups);
  }
  base_lrs_ = lrs();
  if (const Node* fused = opt.find("fused"); fused != nullptr && fused->as_bool()) {
    const c10::Device device =
        params_.empty() ? c10::Device(at::kCPU) : params_.front().param.device();
    if (!compat::fused_adam_supports(device))
      throw config::ConfigError(fused->location(), fused->path(),
                                std::string("the fused ") + type +
                                    " kernel needs LibTorch 2.0+ on a GPU or "
                                    "2.4+ on the CPU; this is LibTorch " +
                                    TORCH_VERSION + " on " + device.str() +
                                    " (remove fused, or set it false)");
    fused_ = true;
  }

  if (const Node* counts = cfg.find("accumulative_counts")) {
    accumulative_counts_ = static_cast<int>(counts->as_int());
  }
  if (const Node* clip = cfg.find("clip_grad"); clip != nullptr && clip->is_map()) {
    clip_max_norm_ = clip->find("max_norm")->as_double();
    clip_norm_type_ = number_or(clip, "norm_type", 2.0);
  }
}

OptimWrapper::~OptimWrapper() = default;

std::vector<OptimWrapper::ParamOptions> OptimWrapper::param_options() const {
  std::vector<ParamOptions> out;
  for (const OptimParam& p : params_)
    for (const auto& group : optimizer_->param_groups()) {
      const auto& members = group.params();
      if (std::none_of(members.begin(), members.end(),
                       [&](const at::Tensor& t) { return t.is_same(p.param); }))
        continue;
      const auto& o = group.options();
      double wd = 0;
      if (const auto* sgd = dynamic_cast<const torch::optim::SGDOptions*>(&o))
        wd = sgd->weight_decay();
      if (const auto* adam = dynamic_cast<const torch::optim::AdamOptions*>(&o))
        wd = adam->weight_decay();
      if (const auto* adamw = dynamic_cast<const torch::optim::AdamWOptions*>(&o))
        wd = adamw->weight_decay();
      out.push_back({p.name, o.get_lr(), wd});
      break;
    }
  return out;
}

void OptimWrapper::scale_lr(double factor) {
  for (auto& group : optimizer_->param_groups()) {
    group.options().set_lr(group.options().get_lr() * factor);
  }
  for (double& lr : base_lrs_) lr *= factor;
}

std::vector<double> OptimWrapper::lrs() const {
  std::vector<double> values;
  for (const auto& group : optimizer_->param_groups()) values.push_back(group.options().get_lr());
  return values;
}

std::vector<double> OptimWrapper::base_lrs() const { return base_lrs_; }

void OptimWrapper::set_lrs(const std::vector<double>& lrs) {
  auto& groups = optimizer_->param_groups();
  if (lrs.size() != groups.size()) {
    throw std::invalid_argument("OptimWrapper::set_lrs: " + std::to_string(lrs.size()) +
                                " lrs for " + std::to_string(groups.size()) + " param groups");
  }
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(lrs[i]);
}

double OptimWrapper::step(const std::function<double(double, double)>& reduce_norm) {
  double norm = -1;
  if (clip_max_norm_ > 0) {
    norm = grad_norm(reduce_norm);
    // clip_grad_norm_'s rule: max_norm / (norm + 1e-6), applied below 1.
    const double coef = clip_max_norm_ / (norm + 1e-6);
    if (coef < 1)
      for (const OptimParam& p : params_)
        if (p.param.grad().defined()) p.param.mutable_grad().mul_(coef);
  }
  if (fused_)
    fused_step();
  else
    optimizer_->step();
  return norm;
}

// One arithmetic for every strategy, whether this rank holds whole
// gradients (single, ddp) or shards of them (zero, fsdp: `reduce_norm`,
// their ReduceGradNorm, sums the ranks' shares). For norm types 2 and 1 the
// sum is exact (rh/cpp/torch_exact_norm.hpp), so the norm has the same bits
// however the gradients are cut: one rank of any strategy clips as
// `single`, and zero and fsdp as ddp. Each of its parts goes through
// `reduce_norm` (a double sum over the ranks, exact for these integers).
// inf: the max, exact as it is. Any other p: the sum of each tensor's
// |g|^p in double, in this rank's order (not exact across layouts).
double OptimWrapper::grad_norm(const std::function<double(double, double)>& reduce_norm) const {
  const double p = clip_norm_type_;
  const auto reduce = [&](double local) { return reduce_norm ? reduce_norm(p, local) : local; };
  if (p == 2 || p == 1) {
    const int power = static_cast<int>(p);
    ExactNormSum sum(power);
    for (const OptimParam& o : params_)
      if (o.norm_counted) sum.add(o.param.grad());
    ExactNormSum::Parts parts = sum.parts();
    for (double& part : parts) part = reduce(part);
    const double total = ExactNormSum::total(parts, power);
    return power == 2 ? std::sqrt(total) : total;
  }
  const bool inf = std::isinf(p);
  double local = 0;
  for (const OptimParam& o : params_) {
    const at::Tensor& g = o.param.grad();
    if (!o.norm_counted || !g.defined() || g.numel() == 0) continue;
    const double n = g.norm(p).item<double>();
    local = inf ? std::max(local, n) : local + std::pow(n, p);
  }
  const double global = reduce(local);
  return inf ? global : std::pow(global, 1.0 / p);
}

void OptimWrapper::fused_step() {
  const bool decoupled = kind_of(*optimizer_) == OptimizerKind::AdamW;
  for (auto& group : optimizer_->param_groups()) {
    if (decoupled)
      fused_group_step<torch::optim::AdamWParamState, torch::optim::AdamWOptions>(group, true);
    else
      fused_group_step<torch::optim::AdamParamState, torch::optim::AdamOptions>(group, false);
  }
}

// torch.optim's _fused_adam(w) for one param group, on torch::optim's own
// state objects: a parameter without state gets zeros (as torch::optim
// creates them), every step count +1 (the integer and the kernel's float
// copy), then one kernel call for the group's parameters that have a grad.
template <typename State, typename Options>
void OptimWrapper::fused_group_step(torch::optim::OptimizerParamGroup& group, bool decoupled) {
  torch::NoGradGuard no_grad;
  auto& state = optimizer_->state();
  const auto& options = static_cast<const Options&>(group.options());
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
  for (at::Tensor& p : group.params()) {
    if (!p.grad().defined()) continue;
    const auto key = compat::optimizer_state_key(state, p);
    auto found = state.find(key);
    if (found == state.end()) {
      auto fresh = std::make_unique<State>();
      fresh->step(0);
      fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
      fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      if (options.amsgrad()) fresh->max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      found = state.emplace(key, std::move(fresh)).first;
    }
    auto& s = static_cast<State&>(*found->second);
    DeviceStep& d = device_steps_[p.unsafeGetTensorImpl()];
    if (d.count != s.step()) {  // new, or restored by a resume
      d.value = at::full({}, static_cast<double>(s.step()), p.options().dtype(at::kFloat));
      d.count = s.step();
    }
    s.step(s.step() + 1);
    d.count = s.step();
    params.push_back(p);
    grads.push_back(p.grad());
    exp_avgs.push_back(s.exp_avg());
    exp_avg_sqs.push_back(s.exp_avg_sq());
    if (options.amsgrad()) max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
    steps.push_back(d.value);
  }
  if (params.empty()) return;
  at::_foreach_add_(steps, 1);
  const auto [beta1, beta2] = options.betas();
  compat::fused_adam(decoupled, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
                     options.lr(), beta1, beta2, options.weight_decay(), options.eps(),
                     options.amsgrad());
}

void OptimWrapper::zero_grad() {
  // set_to_none, as PyTorch >= 2.0 and MMEngine do, on every LibTorch version
  // (1.13's Optimizer::zero_grad() zeroes in place instead, which makes Adam
  // move parameters that got no gradient).
  for (const OptimParam& p : params_) {
    if (p.param.grad().defined()) p.param.mutable_grad() = at::Tensor();
  }
}

void OptimWrapper::bind_grads(const std::vector<at::Tensor>& grads) {
  if (grads.size() != params_.size())
    throw std::invalid_argument("bind_grads: " + std::to_string(grads.size()) + " gradients for " +
                                std::to_string(params_.size()) + " parameters");
  for (size_t i = 0; i < grads.size(); ++i) params_[i].param.mutable_grad() = grads[i];
}

std::vector<model::NamedTensor> OptimWrapper::state_tensors(bool copy) const {
  std::vector<model::NamedTensor> out;
  const OptimizerKind kind = kind_of(*optimizer_);
  const bool amsgrad = amsgrad_of(*optimizer_, kind);
  for (const OptimParam& p : params_) {
    switch (kind) {
      case OptimizerKind::Adam:
        export_adam<torch::optim::AdamParamState>(*optimizer_, p, amsgrad, copy, out);
        break;
      case OptimizerKind::AdamW:
        export_adam<torch::optim::AdamWParamState>(*optimizer_, p, amsgrad, copy, out);
        break;
      case OptimizerKind::SGD: {
        const auto& state = optimizer_->state();
        const auto found = state.find(compat::optimizer_state_key(state, p.param));
        if (found == state.end()) break;
        const auto& s = static_cast<const torch::optim::SGDParamState&>(*found->second);
        if (s.momentum_buffer().defined()) {
          out.push_back({p.name + ".momentum_buffer", cpu_copy(s.momentum_buffer(), copy)});
        }
        break;
      }
    }
  }
  return out;
}

std::vector<at::Tensor> OptimWrapper::state_in_memory() const {
  std::vector<at::Tensor> out;
  const auto keep = [&out](const at::Tensor& t) {
    if (t.defined()) out.push_back(t);
  };
  const OptimizerKind kind = kind_of(*optimizer_);
  for (const auto& [key, state] : optimizer_->state()) {
    (void)key;
    switch (kind) {
      case OptimizerKind::Adam: {
        const auto& s = static_cast<const torch::optim::AdamParamState&>(*state);
        keep(s.exp_avg()), keep(s.exp_avg_sq()), keep(s.max_exp_avg_sq());
        break;
      }
      case OptimizerKind::AdamW: {
        const auto& s = static_cast<const torch::optim::AdamWParamState&>(*state);
        keep(s.exp_avg()), keep(s.exp_avg_sq()), keep(s.max_exp_avg_sq());
        break;
      }
      case OptimizerKind::SGD:
        keep(static_cast<const torch::optim::SGDParamState&>(*state).momentum_buffer());
        break;
    }
  }
  return out;
}

void OptimWrapper::load_state_tensors(const std::vector<model::NamedTensor>& tensors, bool adopt,
                                      const std::set<std::string>& fresh) {
  const OptimizerKind kind = kind_of(*optimizer_);
  const bool amsgrad = amsgrad_of(*optimizer_, kind);
  const std::string what =
      std::string("optimizer state (") + kind_name(kind) + (amsgrad ? ", amsgrad" : "") + ")";

  std::map<std::string, at::Tensor> given;
  for (const auto& t : tensors) {
    if (!given.emplace(t.name, t.tensor).second) {
      throw std::invalid_argument(what + ": entry '" + t.name + "' appears twice");
    }
  }

  // What each entry should be: its parameter, and whether it must be there.
  struct Expected {
    const OptimParam* param;
    bool is_step;
    bool required;
  };
  std::map<std::string, Expected> expected;
  for (const OptimParam& p : params_) {
    if (fresh.count(p.name) != 0) continue;  // no entry expected: it starts afresh
    if (kind == OptimizerKind::SGD) {
      if (has_momentum(*optimizer_)) expected[p.name + ".momentum_buffer"] = {&p, false, false};
    } else {
      for (const std::string& field : adam_fields(amsgrad)) {
        expected[p.name + "." + field] = {&p, field == "step", true};
      }
    }
  }

  std::vector<std::string> missing, extra, mismatched;
  for (const auto& [name, e] : expected) {
    if (e.required && given.count(name) == 0) missing.push_back(name);
  }
  for (const auto& [name, tensor] : given) {
    const auto found = expected.find(name);
    if (found == expected.end()) {
      extra.push_back(name);
      continue;
    }
    const at::Tensor& param = found->second.param->param;
    const at::IntArrayRef want_shape = found->second.is_step ? at::IntArrayRef{} : param.sizes();
    if (tensor.sizes() != want_shape) {
      mismatched.push_back("'" + name + "' has shape " + shape_text(tensor.sizes()) +
                           ", expected " + shape_text(want_shape));
    } else if (found->second.is_step && !at::isIntegralType(tensor.scalar_type(), false)) {
      mismatched.push_back("'" + name + "' has dtype " +
                           std::string(at::toString(tensor.scalar_type())) +
                           ", expected an integer step count");
    } else if (!found->second.is_step && tensor.scalar_type() != param.scalar_type()) {
      mismatched.push_back("'" + name + "' has dtype " +
                           std::string(at::toString(tensor.scalar_type())) + ", expected " +
                           at::toString(param.scalar_type()) + " (the parameter's)");
    }
  }
  if (!missing.empty() || !extra.empty() || !mismatched.empty()) {
    std::string message = what + " does not fit the parameters:";
    if (!missing.empty())
      message += " missing " + entries(missing.size()) + ": " + name_list(missing) + ";";
    if (!extra.empty())
      message += " unexpected " + entries(extra.size()) + ": " + name_list(extra) + ";";
    for (const auto& m : mismatched) message += " " + m + ";";
    message.back() = '.';
    message += " Was the checkpoint saved with another optimizer type, amsgrad setting or model?";
    throw std::invalid_argument(message);
  }

  auto& state = optimizer_->state();
  for (const OptimParam& p : params_) {
    const auto key = compat::optimizer_state_key(state, p.param);
    state.erase(key);
    if (fresh.count(p.name) != 0) continue;
    switch (kind) {
      case OptimizerKind::Adam:
        state[key] = import_adam<torch::optim::AdamParamState>(p, amsgrad, given, adopt);
        break;
      case OptimizerKind::AdamW:
        state[key] = import_adam<torch::optim::AdamWParamState>(p, amsgrad, given, adopt);
        break;
      case OptimizerKind::SGD: {
        const auto found = given.find(p.name + ".momentum_buffer");
        if (found == given.end()) break;
        auto s = std::make_unique<torch::optim::SGDParamState>();
        s->momentum_buffer(like_param(p.param, found->second, adopt));
        state[key] = std::move(s);
        break;
      }
    }
  }
}

}  // namespace rh::optim
