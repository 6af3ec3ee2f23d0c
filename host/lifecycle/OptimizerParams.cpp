#include "lifecycle/OptimizerParams.hpp"

#include <ATen/DLConvertor.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <map>
#include <set>
#include <sstream>

#include "abi/ComponentInstances.hpp"
#include "abi/HostError.hpp"
#include "config/ConfigNode.hpp"
#include "job/JobSettings.hpp"
#include "model/Model.hpp"
#include "optim/OptimSchema.hpp"
#include "optim/OptimWrapper.hpp"

namespace rh::lifecycle {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream text;
  text << at::IntArrayRef(shape);
  return text.str();
}

// Normalisation-layer parameters (paramwise norm_decay_mult): in the
// built-in models a dotted segment of their name starts with "norm".
bool is_norm_param(const std::string& name) {
  for (size_t pos = 0; pos < name.size();) {
    if (name.compare(pos, 4, "norm") == 0) return name.find('.', pos) != std::string::npos;
    size_t dot = name.find('.', pos);
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return false;
}

}  // namespace

// The model's trainable parameters, as the optimizer takes them without a
// strategy's own tensors.
std::vector<optim::OptimParam> trainable_params(model::Model& model) {
  std::vector<optim::OptimParam> params;
  for (auto& p : model.named_parameters())
    if (p.tensor.requires_grad()) params.push_back({p.name, p.tensor, is_norm_param(p.name)});
  return params;
}

// MMPretrain's layer-wise lr decay (optim_wrapper.constructor:
// LearningRateDecayOptimWrapperConstructor): each parameter's layer, from
// the model's parameters in registration order. A model without numbered
// blocks is refused by OptimWrapper, naming the parameter.
void set_layer_depths(const config::Node& job, model::Model& model,
                      std::vector<optim::OptimParam>& params) {
  if (config::read_settings(job).optim.constructor != "LearningRateDecayOptimWrapperConstructor")
    return;
  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) names.push_back(p.name);
  const optim::LayerDepths depths = optim::layer_depths(names);
  if (depths.blocks == 0) return;
  for (auto& p : params) {
    const auto found = depths.id.find(p.name);
    if (found == depths.id.end()) continue;
    p.layer_id = found->second;
    p.layer_count = depths.count;
  }
}

void print_param_groups(const config::Node& job, const std::filesystem::path& job_dir,
                        std::ostream& out) {
  auto model = model::build_model(*job.find("model"), config::read_settings(job).seed.seed,
                                  job_dir.string());
  std::vector<optim::OptimParam> params = trainable_params(*model);
  set_layer_depths(job, *model, params);
  std::map<std::string, int64_t> layer;
  for (const auto& p : params) layer[p.name] = p.layer_id;
  std::map<std::string, std::vector<int64_t>> shape;
  for (const auto& p : params) shape[p.name] = p.param.sizes().vec();
  const optim::OptimWrapper optim(*job.find("optim_wrapper"), std::move(params));
  out << "parameter\tshape\tlr\tweight_decay\tlayer\n";
  for (const auto& o : optim.param_options()) {
    out << o.name << '\t' << shape_text(shape[o.name]) << '\t' << fmt::format("{:.10g}", o.lr)
        << '\t' << fmt::format("{:.10g}", o.weight_decay) << '\t';
    if (layer[o.name] >= 0)
      out << layer[o.name];
    else
      out << '-';
    out << '\n';
  }
}

StrategyOptimizerParams strategy_optimizer_params(const config::Node& job,
                                                  host::StrategyInstance& strategy,
                                                  model::Model& model) {
  struct Collected {
    std::vector<optim::OptimParam> params;
    std::vector<at::Tensor> grads;
    std::set<std::string> names;
  } collected;
  auto add = [](void* user_data, const rh_OptimParam* p) -> rh_Error* {
    return host::guard_entry("OptimizerParams add", [&]() -> rh_Error* {
      auto& out = *static_cast<Collected*>(user_data);
      auto bad = [](const std::string& what) {
        throw host::HostError(RH_ERROR_INVALID_ARGUMENT, "OptimizerParams: " + what);
      };
      if (p == nullptr || p->struct_size < RH_STRUCT_SIZE(rh_OptimParam, grad))
        bad("a parameter record is NULL or smaller than rh_OptimParam 1.0");
      // Ownership passes to the host even when this add() fails: the
      // deleters run when these tensors go.
      at::Tensor value = p->param ? at::fromDLPack(p->param) : at::Tensor();
      at::Tensor grad = p->grad ? at::fromDLPack(p->grad) : at::Tensor();
      const std::string name(p->name.data == nullptr ? "" : p->name.data, p->name.size);
      if (name.empty()) bad("a parameter without a name");
      if (!value.defined() || !grad.defined()) bad("'" + name + "' has no param or no grad tensor");
      if (!out.names.insert(name).second) bad("'" + name + "' given twice");
      if (value.sizes() != grad.sizes() || value.scalar_type() != grad.scalar_type() ||
          value.device() != grad.device())
        bad("'" + name + "': its grad tensor differs from the param in shape, dtype or device");
      optim::OptimParam param{name, value, is_norm_param(name)};
      // 1.3: a shard of a larger parameter.
      if (RH_STRUCT_HAS(p, rh_OptimParam, full_offset) && p->full_shape != nullptr) {
        if (p->full_ndim < 0 || p->full_ndim > 16)
          bad("'" + name + "': full_ndim " + std::to_string(p->full_ndim) + " out of range");
        std::vector<int64_t> full(p->full_shape, p->full_shape + p->full_ndim);
        int64_t full_numel = 1;
        for (int64_t d : full) full_numel *= d;
        if (p->full_offset < 0 || p->full_offset + value.numel() > full_numel)
          bad("'" + name + "': the shard's elements [" + std::to_string(p->full_offset) + ", " +
              std::to_string(p->full_offset + value.numel()) +
              ") are not inside its full shape of " + std::to_string(full_numel) + " elements");
        param.full_shape = std::move(full);
        param.full_offset = p->full_offset;
      }
      out.params.push_back(std::move(param));
      out.grads.push_back(grad);
      return nullptr;
    });
  };
  rh_OptimParamSink sink{RH_OPTIM_PARAM_SINK_STRUCT_SIZE, &collected, add};
  strategy.optimizer_params(sink);
  // clip_grad without ReduceGradNorm was refused at step 1 (JobComponents).
  // paramwise_cfg matches a strategy's tensor by its parameter: the name
  // (custom_keys, bias, norm) and the whole parameter's shape (1-D for
  // flat_decay_mult), not the shard's own flat shape; they are trainable
  // (their requires_grad is false: autograd never sees them).
  const config::Node* paramwise = job.find_path("optim_wrapper.paramwise_cfg");
  std::map<std::string, at::Tensor> by_name;
  for (auto& p : model.named_parameters()) by_name[p.name] = p.tensor;
  for (auto& p : collected.params) {
    p.trainable = true;
    if (paramwise == nullptr || paramwise->is_null()) continue;
    const auto found = by_name.find(p.name);
    const std::vector<int64_t> whole = p.full_shape.empty() ? p.param.sizes().vec() : p.full_shape;
    if (found == by_name.end() || found->second.sizes().vec() != whole)
      throw config::ConfigError(
          paramwise->location(), paramwise->path(),
          "paramwise_cfg cannot apply: " + strategy.what() + " names an optimizer tensor '" +
              p.name + "' " +
              (found == by_name.end()
                   ? std::string("that is no parameter of the model")
                   : "of shape " + shape_text(whole) + " where the model's parameter is " +
                         shape_text(found->second.sizes().vec())) +
              " (OptimizerParams must name each tensor after its parameter and give the whole "
              "parameter's shape in full_shape)");
  }
  spdlog::info("optimizer over {} tensor(s) given by {}", collected.params.size(), strategy.what());
  return {std::move(collected.params), std::move(collected.grads)};
}

}  // namespace rh::lifecycle
