// A pre-norm transformer block, shared by vit and gpt:
//
//   x = x + dropout(proj(attention(norm1(x))))
//   x = x + dropout(fc2(gelu(fc1(norm2(x)))))
//
// Multi-head self-attention, optionally causal: LibTorch's fused
// scaled_dot_product_attention where it has one (2.0+: flash or
// memory-efficient kernels on a GPU), written out (matmul, softmax) in 1.13. Tensors, under the
// block's name: norm1.{weight,bias}, attn.qkv.{weight,bias}, attn.proj.{weight,bias},
// norm2.{weight,bias}, mlp.fc1.{weight,bias}, mlp.fc2.{weight,bias}. Linear weights N(0, 0.02²)
// (the output projections attn.proj and mlp.fc2 N(0, proj_std²)), biases 0.
//
// Shapes: B = batch, T = tokens, D = dim, H = heads.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "model/ActivationEstimate.hpp"
#include "model/Layers.hpp"

namespace rh::model {

class ConfigFields;
class ParamRegistry;

struct TransformerBlockSpec {
  int64_t dim = 64;        // D, a multiple of heads
  int64_t heads = 4;       // H
  double mlp_ratio = 4.0;  // hidden width of the MLP = max(1, round(D * mlp_ratio))
  double dropout = 0.0;    // on attention weights and on both residual branches
  bool causal = false;     // token t attends to tokens <= t only
  double proj_std = 0.02;  // init of attn.proj and mlp.fc2 weights
};

// The block keys gpt and vit share (dim, heads, mlp_ratio, dropout), read
// over `defaults`; a dim that heads do not divide is reported on `heads`.
// causal and proj_std are the model's to set.
TransformerBlockSpec read_block_spec(const ConfigFields& cfg, TransformerBlockSpec defaults);

// What a block's forward saves for its backward, bytes, for `rows`
// sequences of `tokens` (ActivationEstimate.hpp), its input left out (the
// unit that made it counts it); `training` dropout.
int64_t block_saved_bytes(const TransformerBlockSpec& spec, int64_t rows, int64_t tokens,
                          const ActivationShape& shape);

// What dropout of probability p > 0 keeps of an n-element tensor for its
// backward, bytes: on the CPU its noise (input * noise keeps the factor
// without a gradient), on CUDA a one-byte mask (the fused kernel).
int64_t dropout_saved_bytes(int64_t n, const ActivationShape& shape);

// How attention is computed: kFused is at::scaled_dot_product_attention
// (LibTorch 2.0+), kExplicit the matmul-softmax-matmul it fuses.
enum class AttentionKernel { kExplicit, kFused };
// The kernel blocks use: kFused where this LibTorch has it.
AttentionKernel default_attention_kernel();

// softmax(q k^T / sqrt(d) [+ causal mask]) v with dropout on the weights:
// q, k, v (B, H, T, d) -> (B, H, T, d). Throws for kFused where LibTorch has
// no fused attention.
at::Tensor self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          bool causal, double dropout, bool training, AttentionKernel kernel);

class TransformerBlock {
 public:
  TransformerBlock() = default;
  TransformerBlock(ParamRegistry& reg, const std::string& name, const TransformerBlockSpec& spec);

  at::Tensor forward(const at::Tensor& x, bool training) const;  // (B, T, D) -> (B, T, D)

 private:
  at::Tensor attention(const at::Tensor& x, bool training) const;

  TransformerBlockSpec spec_;
  AttentionKernel kernel_ = default_attention_kernel();
  LayerNorm norm1_;
  Linear qkv_;
  Linear proj_;
  LayerNorm norm2_;
  Linear fc1_;
  Linear fc2_;
};

}  // namespace rh::model
