// The layers the built-in models are made of, as plain structs of tensor
// handles with a functional forward (ATen ops; no torch::nn, so that names,
// registration order and initial values are all the model's own).
//
// Each make_*() registers the layer's tensors in a ParamRegistry under
// `name` ("blocks.0.attn.qkv" -> "blocks.0.attn.qkv.weight", ...) and draws
// their initial values from the registry's generator.
//
// Normalisation layers are always named with a last path segment that starts
// with "norm" ("stem.norm", "stages.0.0.norm1", "blocks.2.norm2",
// "head.norm"), and no other layer is: a parameter or buffer belongs to a
// norm layer iff its name has a dotted segment starting with "norm".
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace rh::model {

class ParamRegistry;

// How the weight of a Linear or Conv2d is drawn.
struct WeightInit {
  enum class Kind {
    TorchDefault,       // weight and bias U(±1/sqrt(fan_in)), as torch.nn does
    KaimingFanOutRelu,  // weight N(0, 2/fan_out) (ResNet convolutions), bias 0
    Normal,             // weight N(0, std²), bias 0 (transformers)
  };
  Kind kind = Kind::TorchDefault;
  double std = 0.02;  // Kind::Normal
};

struct Linear {
  at::Tensor weight;                              // (out, in)
  at::Tensor bias;                                // (out), undefined when the layer has none
  at::Tensor forward(const at::Tensor& x) const;  // (..., in) -> (..., out)
};

struct LinearSpec {
  // A constructor rather than an aggregate: {in, out} leaves the rest out
  // without -Wmissing-field-initializers.
  LinearSpec(int64_t in_, int64_t out_, bool bias_ = true, WeightInit init_ = {})
      : in(in_), out(out_), bias(bias_), init(init_) {}

  int64_t in = 0;
  int64_t out = 0;
  bool bias = true;
  WeightInit init;
};
Linear make_linear(ParamRegistry& reg, const std::string& name, const LinearSpec& spec);

struct Conv2d {
  at::Tensor weight;  // (out, in, k, k)
  at::Tensor bias;    // (out), undefined when the layer has none
  int64_t stride = 1;
  int64_t padding = 0;
  at::Tensor forward(const at::Tensor& x) const;  // (B, in, H, W) -> (B, out, H', W')
};

struct Conv2dSpec {  // fill by field: conv.in = 3; conv.out = 32; ...
  int64_t in = 0;
  int64_t out = 0;
  int64_t kernel = 3;
  int64_t stride = 1;
  int64_t padding = 1;
  bool bias = false;
  WeightInit init;
};
Conv2d make_conv2d(ParamRegistry& reg, const std::string& name, const Conv2dSpec& spec);

// Normalisation of (B, C, H, W) activations: batch norm (running statistics
// as buffers running_mean, running_var, num_batches_tracked; momentum 0.1,
// eps 1e-5), group norm (gcd(C, 32) groups, eps 1e-5) or none (identity, no
// tensors). Affine weight 1, bias 0.
enum class NormKind { Batch, Group, None };

struct Norm2d {
  NormKind kind = NormKind::None;
  int64_t groups = 1;
  at::Tensor weight, bias;
  at::Tensor running_mean, running_var, num_batches_tracked;
  at::Tensor forward(const at::Tensor& x, bool training) const;
};
Norm2d make_norm2d(ParamRegistry& reg, const std::string& name, NormKind kind, int64_t channels);

// LayerNorm over the last dimension (eps 1e-5), weight 1, bias 0.
struct LayerNorm {
  at::Tensor weight, bias;  // (dim)
  at::Tensor forward(const at::Tensor& x) const;
};
LayerNorm make_layer_norm(ParamRegistry& reg, const std::string& name, int64_t dim);

// A lookup table, weight N(0, std²).
struct Embedding {
  at::Tensor weight;                                // (num, dim)
  at::Tensor forward(const at::Tensor& ids) const;  // int64 (...) -> (..., dim)
};
Embedding make_embedding(ParamRegistry& reg, const std::string& name, int64_t num, int64_t dim,
                         double std);

}  // namespace rh::model
