#include "model/Layers.hpp"

#include <torch/torch.h>

#include <cmath>
#include <numeric>

#include "model/ParamRegistry.hpp"

namespace rh::model {
namespace {

constexpr double kNormEps = 1e-5;
constexpr double kBatchNormMomentum = 0.1;
constexpr int64_t kMaxGroups = 32;

// Weight and bias of a layer with `fan_in` inputs and `fan_out` outputs per
// weight slice; `bias_size` 0 for none.
std::pair<at::Tensor, at::Tensor> draw_weights(ParamRegistry& reg, at::IntArrayRef shape,
                                               int64_t fan_in, int64_t fan_out, int64_t bias_size,
                                               const WeightInit& init) {
  at::Tensor weight;
  at::Tensor bias;
  switch (init.kind) {
    case WeightInit::Kind::TorchDefault: {
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      weight = reg.uniform(shape, bound);
      if (bias_size > 0) bias = reg.uniform({bias_size}, bound);
      return {weight, bias};
    }
    case WeightInit::Kind::KaimingFanOutRelu:
      weight = reg.normal(shape, std::sqrt(2.0 / static_cast<double>(fan_out)));
      break;
    case WeightInit::Kind::Normal:
      weight = reg.normal(shape, init.std);
      break;
  }
  if (bias_size > 0) bias = reg.zeros({bias_size});
  return {weight, bias};
}

}  // namespace

at::Tensor Linear::forward(const at::Tensor& x) const { return at::linear(x, weight, bias); }

Linear make_linear(ParamRegistry& reg, const std::string& name, const LinearSpec& spec) {
  auto [weight, bias] = draw_weights(reg, {spec.out, spec.in}, spec.in, spec.out,
                                     spec.bias ? spec.out : 0, spec.init);
  Linear layer;
  layer.weight = reg.add_parameter(name + ".weight", weight);
  if (spec.bias) layer.bias = reg.add_parameter(name + ".bias", bias);
  return layer;
}

at::Tensor Conv2d::forward(const at::Tensor& x) const {
  return at::conv2d(x, weight, bias, {stride, stride}, {padding, padding});
}

Conv2d make_conv2d(ParamRegistry& reg, const std::string& name, const Conv2dSpec& spec) {
  const int64_t area = spec.kernel * spec.kernel;
  auto [weight, bias] =
      draw_weights(reg, {spec.out, spec.in, spec.kernel, spec.kernel}, spec.in * area,
                   spec.out * area, spec.bias ? spec.out : 0, spec.init);
  Conv2d layer;
  layer.stride = spec.stride;
  layer.padding = spec.padding;
  layer.weight = reg.add_parameter(name + ".weight", weight);
  if (spec.bias) layer.bias = reg.add_parameter(name + ".bias", bias);
  return layer;
}

at::Tensor Norm2d::forward(const at::Tensor& x, bool training) const {
  switch (kind) {
    case NormKind::Batch:
      if (training) {
        torch::NoGradGuard no_grad;
        num_batches_tracked.add_(1);
      }
      return at::batch_norm(x, weight, bias, running_mean, running_var, training,
                            kBatchNormMomentum, kNormEps, /*cudnn_enabled=*/true);
    case NormKind::Group:
      return at::group_norm(x, groups, weight, bias, kNormEps);
    case NormKind::None:
      break;
  }
  return x;
}

Norm2d make_norm2d(ParamRegistry& reg, const std::string& name, NormKind kind, int64_t channels) {
  Norm2d norm;
  norm.kind = kind;
  if (kind == NormKind::None) return norm;
  norm.weight = reg.add_parameter(name + ".weight", reg.ones({channels}));
  norm.bias = reg.add_parameter(name + ".bias", reg.zeros({channels}));
  if (kind == NormKind::Batch) {
    norm.running_mean = reg.add_buffer(name + ".running_mean", reg.zeros({channels}));
    norm.running_var = reg.add_buffer(name + ".running_var", reg.ones({channels}));
    norm.num_batches_tracked =
        reg.add_buffer(name + ".num_batches_tracked", reg.zeros({}, torch::kLong));
  } else {
    norm.groups = std::gcd(channels, kMaxGroups);
  }
  return norm;
}

at::Tensor LayerNorm::forward(const at::Tensor& x) const {
  return at::layer_norm(x, {weight.size(0)}, weight, bias, kNormEps);
}

LayerNorm make_layer_norm(ParamRegistry& reg, const std::string& name, int64_t dim) {
  LayerNorm norm;
  norm.weight = reg.add_parameter(name + ".weight", reg.ones({dim}));
  norm.bias = reg.add_parameter(name + ".bias", reg.zeros({dim}));
  return norm;
}

at::Tensor Embedding::forward(const at::Tensor& ids) const { return at::embedding(weight, ids); }

Embedding make_embedding(ParamRegistry& reg, const std::string& name, int64_t num, int64_t dim,
                         double std) {
  Embedding table;
  table.weight = reg.add_parameter(name + ".weight", reg.normal({num, dim}, std));
  return table;
}

}  // namespace rh::model
