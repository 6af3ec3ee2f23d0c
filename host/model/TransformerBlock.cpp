#include "model/TransformerBlock.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/ConfigFields.hpp"
#include "model/ParamRegistry.hpp"
#include "rh/cpp/torch_compat.hpp"

namespace rh::model {

TransformerBlockSpec read_block_spec(const ConfigFields& cfg, TransformerBlockSpec spec) {
  spec.dim = cfg.integer("dim", spec.dim);
  spec.heads = cfg.integer("heads", spec.heads);
  spec.mlp_ratio = cfg.number("mlp_ratio", spec.mlp_ratio);
  spec.dropout = cfg.number("dropout", spec.dropout);
  if (spec.dim % spec.heads != 0)
    cfg.fail("heads", "dim " + std::to_string(spec.dim) + " is not a multiple of heads " +
                          std::to_string(spec.heads));
  return spec;
}

TransformerBlock::TransformerBlock(ParamRegistry& reg, const std::string& name,
                                   const TransformerBlockSpec& spec)
    : spec_(spec) {
  const int64_t dim = spec.dim;
  const int64_t hidden =
      std::max<int64_t>(1, std::llround(static_cast<double>(dim) * spec.mlp_ratio));
  const WeightInit normal{WeightInit::Kind::Normal, 0.02};
  const WeightInit proj{WeightInit::Kind::Normal, spec.proj_std};
  norm1_ = make_layer_norm(reg, name + ".norm1", dim);
  qkv_ = make_linear(reg, name + ".attn.qkv", {dim, 3 * dim, true, normal});
  proj_ = make_linear(reg, name + ".attn.proj", {dim, dim, true, proj});
  norm2_ = make_layer_norm(reg, name + ".norm2", dim);
  fc1_ = make_linear(reg, name + ".mlp.fc1", {dim, hidden, true, normal});
  fc2_ = make_linear(reg, name + ".mlp.fc2", {hidden, dim, true, proj});
}

at::Tensor TransformerBlock::forward(const at::Tensor& x, bool training) const {
  at::Tensor h = x + at::dropout(proj_.forward(attention(norm1_.forward(x), training)),
                                 spec_.dropout, training);
  at::Tensor m = fc2_.forward(at::gelu(fc1_.forward(norm2_.forward(h))));
  return h + at::dropout(m, spec_.dropout, training);
}

int64_t dropout_saved_bytes(int64_t n, const ActivationShape& shape) {
  return shape.cuda ? n : n * shape.element_size;
}

// Term by term as forward() and attention() above run on LibTorch's
// kernels: exact up to 0-dim scalars autograd keeps on the CPU
// (EstimateMemoryTest.ActivationsAreWhatAForwardKeeps compares it with a
// forward, on LibTorch 1.13 and 2.6); CUDA's kernels are taken to save what
// the CPU's do, but dropout's one-byte mask and flash attention with dropout.
int64_t block_saved_bytes(const TransformerBlockSpec& spec, int64_t rows, int64_t tokens,
                          const ActivationShape& shape) {
  const int64_t e = shape.element_size;
  const int64_t D = spec.dim;
  const int64_t H = spec.heads;
  const int64_t F = std::max<int64_t>(1, std::llround(static_cast<double>(D) * spec.mlp_ratio));
  const int64_t x = rows * tokens * D;                // elements of a (B, T, D) tensor
  const int64_t scores = rows * H * tokens * tokens;  // (B, H, T, T)
  const int64_t stats = 2 * rows * tokens * e;        // a LayerNorm's mean and rstd
  const bool drop = spec.dropout > 0;
  int64_t bytes = stats + x * e;  // norm1: its statistics; its output, qkv's input
  // LibTorch's CPU flash kernel has no dropout: with dropout,
  // scaled_dot_product_attention runs its math path on the CPU (2.6).
  if (shape.fused_attention && !shape.cuda && drop) {
    // q·√s, kᵀ·√s and v made contiguous for matmul; softmax's output; the
    // dropout's noise and output (the second matmul's input); the heads'
    // output made contiguous, proj's input.
    bytes += 3 * x * e + 3 * scores * e + x * e;
  } else if (shape.fused_attention) {
    // q, k, v are views of qkv's output, kept whole; the output (laid out
    // (B, T, H, d), so proj's input is a view of it) and the logsumexp.
    bytes += 3 * x * e + x * e + rows * H * tokens * 4;
  } else {
    // matmul makes q, kᵀ and v contiguous and keeps the copies; the causal
    // mask (bool, T x T) for masked_fill; softmax's output, which the second
    // matmul also reads; then the heads' output made contiguous, proj's input.
    bytes += 3 * x * e + (spec.causal ? tokens * tokens : 0) + scores * e + x * e;
    // Dropout on the weights: its noise (CPU) or mask (CUDA), and its
    // output, the second matmul's input.
    if (drop) bytes += (shape.cuda ? scores : scores * e) + scores * e;
  }
  if (drop) bytes += dropout_saved_bytes(x, shape);  // after proj
  bytes += x * e + stats + x * e;      // h (norm2's input), its statistics and output (fc1's input)
  bytes += 2 * rows * tokens * F * e;  // fc1's output (gelu's input), gelu's (fc2's input)
  if (drop) bytes += dropout_saved_bytes(x, shape);  // after fc2
  return bytes;
}

AttentionKernel default_attention_kernel() {
  return compat::kHasFusedAttention ? AttentionKernel::kFused : AttentionKernel::kExplicit;
}

at::Tensor self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          bool causal, double dropout, bool training, AttentionKernel kernel) {
  if (kernel == AttentionKernel::kFused)
    return compat::scaled_dot_product_attention(q, k, v, training ? dropout : 0.0, causal);
  const int64_t T = q.size(-2);
  const int64_t d = q.size(-1);
  // (B, H, T, T)
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
  if (causal) {
    at::Tensor future = torch::ones({T, T}, q.options().dtype(torch::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  }
  at::Tensor weights = at::dropout(at::softmax(scores, -1), dropout, training);
  return at::matmul(weights, v);
}

at::Tensor TransformerBlock::attention(const at::Tensor& x, bool training) const {
  const int64_t B = x.size(0);
  const int64_t T = x.size(1);
  const int64_t D = spec_.dim;
  const int64_t H = spec_.heads;
  const int64_t d = D / H;  // per-head width
  // (B, T, 3D) -> q, k, v each (B, H, T, d)
  std::vector<at::Tensor> qkv =
      qkv_.forward(x).view({B, T, 3, H, d}).permute({2, 0, 3, 1, 4}).unbind(0);
  at::Tensor out =
      self_attention(qkv[0], qkv[1], qkv[2], spec_.causal, spec_.dropout, training, kernel_);
  // (B, H, T, d) -> (B, T, D)
  return out.transpose(1, 2).reshape({B, T, D});
}

}  // namespace rh::model
