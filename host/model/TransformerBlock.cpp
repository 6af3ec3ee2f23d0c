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
