#include "model/ParamRegistry.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <stdexcept>

namespace rh::model {

namespace {
thread_local bool shapes_only = false;
}  // namespace

ParamRegistry::ShapesOnlyScope::ShapesOnlyScope() : outer_(shapes_only) { shapes_only = true; }
ParamRegistry::ShapesOnlyScope::~ShapesOnlyScope() { shapes_only = outer_; }
bool ParamRegistry::ShapesOnlyScope::active() { return shapes_only; }

ParamRegistry::ParamRegistry(uint64_t seed)
    : generator_(at::detail::createCPUGenerator(seed)),
      device_(shapes_only ? at::kMeta : at::kCPU) {}

void ParamRegistry::begin_unit(const std::string& name) { units_.push_back(Unit{name, {}, {}}); }

void ParamRegistry::share_parameter(const std::string& name) {
  if (units_.empty()) throw std::logic_error("share_parameter before begin_unit");
  units_.back().shared_param_names.push_back(name);
}

at::Tensor ParamRegistry::add_parameter(const std::string& name, at::Tensor value) {
  if (units_.empty()) {
    throw std::logic_error("parameter '" + name + "' registered before any unit");
  }
  check_new_name(name);
  value.requires_grad_(true);
  parameters_.push_back(NamedTensor{name, value});
  units_.back().param_names.push_back(name);
  return value;
}

at::Tensor ParamRegistry::add_buffer(const std::string& name, at::Tensor value) {
  check_new_name(name);
  buffers_.push_back(NamedTensor{name, value});
  return value;
}

// On the meta device nothing is drawn, and the generator is left as it is.
at::Tensor ParamRegistry::uniform(at::IntArrayRef shape, double bound) {
  at::Tensor t = torch::empty(shape, torch::TensorOptions(torch::kFloat).device(device_));
  return device_.is_meta() ? t : t.uniform_(-bound, bound, generator_);
}

at::Tensor ParamRegistry::normal(at::IntArrayRef shape, double std) {
  at::Tensor t = torch::empty(shape, torch::TensorOptions(torch::kFloat).device(device_));
  return device_.is_meta() ? t : t.normal_(0.0, std, generator_);
}

at::Tensor ParamRegistry::zeros(at::IntArrayRef shape, at::ScalarType dtype) {
  return torch::zeros(shape, torch::TensorOptions(dtype).device(device_));
}

at::Tensor ParamRegistry::ones(at::IntArrayRef shape) {
  return torch::ones(shape, torch::TensorOptions(torch::kFloat).device(device_));
}

void ParamRegistry::to(const at::Device& device) {
  torch::NoGradGuard no_grad;
  for (NamedTensor& p : parameters_) {
    p.tensor.set_data(p.tensor.to(device));
    if (p.tensor.grad().defined()) p.tensor.mutable_grad() = p.tensor.grad().to(device);
  }
  for (NamedTensor& b : buffers_) b.tensor.set_data(b.tensor.to(device));
}

void ParamRegistry::check_new_name(const std::string& name) const {
  for (const auto* list : {&parameters_, &buffers_}) {
    for (const NamedTensor& t : *list) {
      if (t.name == name) throw std::logic_error("tensor '" + name + "' registered twice");
    }
  }
}

}  // namespace rh::model
