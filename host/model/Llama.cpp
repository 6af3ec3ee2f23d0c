// llama: a Llama-style decoder (Meta's Llama 2/3 reference, torchtitan's
// layout and key names) for language modelling.
//
//   ids (B, T) int64, T <= max_seq_len
//   -> tok_embeddings                                       (B, T, D)
//   -> layers.i: h = x + attention(attention_norm(x))
//                out = h + feed_forward(ffn_norm(h))        (B, T, D)
//   -> norm -> output, no bias                              (B, T, V)
//
// attention: grouped-query attention (n_heads H query heads share
//   n_kv_heads KV key/value heads, H / KV each), causal, rotary position
//   embeddings on q and k (Meta's interleaved pairs: elements 2i and 2i+1 of
//   a head rotate by t * rope_theta^(-2i / head_dim)), no biases:
//   wq (H hd, D), wk (KV hd, D), wv (KV hd, D), wo (D, H hd), hd = D / H.
// feed_forward: SwiGLU, w2(silu(w1 x) * w3 x): w1, w3 (F, D), w2 (D, F),
//   F = 2/3 * 4D, times ffn_dim_multiplier when given, rounded up to a
//   multiple of multiple_of (Meta's rule).
// norms: RMSNorm, x / sqrt(mean(x^2) + norm_eps) * weight, computed in at
//   least float32 and cast back (as Meta's); the rotation likewise.
//
// Tensors: tok_embeddings.weight (V, D); layers.N.attention.{wq,wk,wv,wo}.weight,
// layers.N.feed_forward.{w1,w2,w3}.weight, layers.N.{attention_norm,ffn_norm}.weight;
// norm.weight; output.weight (V, D). Init as torchtitan's (depth_init):
// tok_embeddings N(0, 1); wq, wk, wv, w1 N(0, 0.02^2); wo, w2, w3 N(0, s^2)
// with s = 0.02 / sqrt(2 (N + 1)) for layer N; output N(0, 1/D) (torchtitan
// truncates it at 3 std, not done here); norm weights 1.
//
// Units: tok_embeddings, layers.0 .. layers.{n_layers-1}, output (norm and
// output), as torchtitan wraps it for FSDP.
//
// Tensor parallel (parallelize, TensorParallel.hpp): torchtitan's plan and
// the parts of it a plan may leave replicated.
#include <torch/torch.h>

#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <utility>
#include <vector>

#include "model/BuiltinModel.hpp"
#include "model/Layers.hpp"
#include "model/LlamaConfig.hpp"
#include "model/ModelBuilders.hpp"
#include "model/ParamRegistry.hpp"
#include "model/TensorParallel.hpp"
#include "model/TransformerBlock.hpp"

namespace rh::model {
namespace {

constexpr double kLlamaInitStd = 0.02;

// The dtype a norm or a rotation computes in: at least float32.
at::ScalarType compute_dtype(const at::Tensor& x) {
  return at::promote_types(x.scalar_type(), at::kFloat);
}

struct RmsNorm {
  at::Tensor weight;  // (D)
  double eps = 1e-5;
  // Sequence parallel: each rank normalises its positions, so the weight's
  // gradient is its positions' part, summed over the group in backward (f).
  TpGroup* sequence = nullptr;
  at::Tensor forward(const at::Tensor& x) const {
    const at::Tensor xf = x.to(compute_dtype(x));
    const at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
    return normed.to(x.scalar_type()) * (sequence != nullptr ? tp_copy(weight, *sequence) : weight);
  }
};

RmsNorm make_rms_norm(ParamRegistry& reg, const std::string& name, int64_t dim, double eps) {
  return RmsNorm{reg.add_parameter(name + ".weight", reg.ones({dim})), eps};
}

// The rotation of positions 0 .. T-1: cos and sin (T, hd / 2), in `dtype`.
struct Rotary {
  at::Tensor cos, sin;
};

Rotary rotary(int64_t T, int64_t head_dim, double theta, at::ScalarType dtype,
              const at::Device& device) {
  const auto opts = at::TensorOptions().dtype(dtype).device(device);
  // 1 / theta^(2i / hd), i = 0 .. hd/2 - 1, as Meta's precompute_freqs_cis.
  const at::Tensor freqs =
      1.0 / at::pow(theta, torch::arange(0, head_dim, 2, opts) / static_cast<double>(head_dim));
  const at::Tensor angles = at::outer(torch::arange(T, opts), freqs);  // (T, hd/2)
  return {angles.cos(), angles.sin()};
}

// x (B, T, heads, hd) rotated pairwise: (x0, x1) of pair i at position t ->
// (x0 cos - x1 sin, x0 sin + x1 cos): Meta's complex product, in real terms.
at::Tensor rotate(const at::Tensor& x, const Rotary& r) {
  const at::Tensor xf = x.to(r.cos.scalar_type());
  const auto sizes = x.sizes();
  const at::Tensor pairs = xf.reshape({sizes[0], sizes[1], sizes[2], sizes[3] / 2, 2});
  const at::Tensor x0 = pairs.select(-1, 0), x1 = pairs.select(-1, 1);  // (B, T, h, hd/2)
  const at::Tensor c = r.cos.view({1, sizes[1], 1, sizes[3] / 2});
  const at::Tensor s = r.sin.view({1, sizes[1], 1, sizes[3] / 2});
  return at::stack({x0 * c - x1 * s, x0 * s + x1 * c}, -1).flatten(3).to(x.scalar_type());
}

// Refuses `module`'s style unless it is one of `allowed`, saying why.
void require_style(const TensorParallel& tp, const std::string& module,
                   std::initializer_list<TpStyle> allowed, const std::string& why) {
  const TpStyle style = tp.style_of(module);
  for (TpStyle a : allowed)
    if (style == a) return;
  throw std::invalid_argument(module + " is " + tp_style_name(style) + "; " + why);
}

// `count` (n_heads, ...) split over the group, or a refusal naming the key.
int64_t split_count(int64_t count, const char* key, const TpGroup& group) {
  if (count % group.size() != 0)
    throw std::invalid_argument("model." + std::string(key) + " " + std::to_string(count) +
                                " is not divisible by tensor_parallel size " +
                                std::to_string(group.size()) +
                                " (each rank computes an equal share of them)");
  return count / group.size();
}

using NamedLinear = std::pair<Linear*, const char*>;

// Megatron's split of a block: `cols` colwise, then `row` rowwise (no
// collective between them), or all of them replicated. True when the plan
// splits it; any other mix is refused, saying `why`.
bool planned_split(const TensorParallel& tp, const std::string& prefix,
                   const std::vector<NamedLinear>& cols, const NamedLinear& row,
                   const std::string& why) {
  bool split = tp.style_of(prefix + row.second) != TpStyle::Replicate;
  for (const NamedLinear& c : cols)
    split = split || tp.style_of(prefix + c.second) != TpStyle::Replicate;
  if (!split) return false;
  for (const NamedLinear& c : cols) require_style(tp, prefix + c.second, {TpStyle::Colwise}, why);
  require_style(tp, prefix + row.second, {TpStyle::Rowwise}, why);
  return true;
}

// Into a split block (colwise, or the output's vocabulary) on `group` (none:
// whole): f, or with sequence parallel the positions gathered.
at::Tensor enter_split(const at::Tensor& x, TpGroup* group, bool sequence) {
  if (group == nullptr) return x;
  return sequence ? tp_sequence_gather(x, *group) : tp_copy(x, *group);
}

// Out of a split block (rowwise, or the embedding's vocabulary): g, or with
// sequence parallel the sum reduce-scattered along the sequence.
at::Tensor leave_split(const at::Tensor& x, TpGroup* group, bool sequence) {
  if (group == nullptr) return x;
  return sequence ? tp_sequence_scatter(x, *group) : tp_reduce(x, *group);
}

// This rank's rows of `cols`, columns of `row`.
void keep_blocks(const TpGroup& g, const std::string& prefix, const std::vector<NamedLinear>& cols,
                 const NamedLinear& row, std::vector<TpSplit>& out) {
  for (const NamedLinear& c : cols) {
    keep_block(c.first->weight, 0, g, prefix + c.second + ".weight");
    out.push_back({prefix + c.second + ".weight", 0});
  }
  keep_block(row.first->weight, 1, g, prefix + row.second + ".weight");
  out.push_back({prefix + row.second + ".weight", 1});
}

class LlamaLayer {
 public:
  LlamaLayer(ParamRegistry& reg, const std::string& name, const LlamaConfig& c, int64_t index)
      : c_(c) {
    const int64_t D = c.dim, hd = c.head_dim(), F = c.ffn_dim();
    const WeightInit normal{WeightInit::Kind::Normal, kLlamaInitStd};
    const WeightInit depth{WeightInit::Kind::Normal,
                           kLlamaInitStd / std::sqrt(2.0 * static_cast<double>(index + 1))};
    attention_norm_ = make_rms_norm(reg, name + ".attention_norm", D, c.norm_eps);
    wq_ = make_linear(reg, name + ".attention.wq", {D, c.n_heads * hd, false, normal});
    wk_ = make_linear(reg, name + ".attention.wk", {D, c.n_kv_heads * hd, false, normal});
    wv_ = make_linear(reg, name + ".attention.wv", {D, c.n_kv_heads * hd, false, normal});
    wo_ = make_linear(reg, name + ".attention.wo", {c.n_heads * hd, D, false, depth});
    ffn_norm_ = make_rms_norm(reg, name + ".ffn_norm", D, c.norm_eps);
    w1_ = make_linear(reg, name + ".feed_forward.w1", {D, F, false, normal});
    w2_ = make_linear(reg, name + ".feed_forward.w2", {F, D, false, depth});
    w3_ = make_linear(reg, name + ".feed_forward.w3", {D, F, false, depth});
  }

  at::Tensor forward(const at::Tensor& x, const Rotary& r) const {
    const at::Tensor h = x + attention(attention_norm_.forward(x), r);
    return h + feed_forward(ffn_norm_.forward(h));
  }

  // Attention split by heads (wq, wk, wv colwise, wo rowwise: each rank
  // computes n_heads / n query heads and n_kv_heads / n key/value heads) and
  // SwiGLU by hidden features (w1, w3 colwise, w2 rowwise), each or neither:
  // the only splits that need no collective inside the block.
  // `sequence`: the norms are sequence parallel (both blocks split).
  void parallelize(const TensorParallel& tp, const std::string& name, bool sequence,
                   std::vector<TpSplit>& out) {
    TpGroup& g = *tp.group;
    const std::string a = name + ".attention.", f = name + ".feed_forward.";
    const std::vector<NamedLinear> qkv = {{&wq_, "wq"}, {&wk_, "wk"}, {&wv_, "wv"}};
    if (planned_split(tp, a, qkv, {&wo_, "wo"},
                      "llama splits attention by heads: wq, wk, wv colwise and wo rowwise")) {
      heads_ = split_count(c_.n_heads, "n_heads", g);
      kv_heads_ = split_count(c_.n_kv_heads, "n_kv_heads", g);
      keep_blocks(g, a, qkv, {&wo_, "wo"}, out);
      attention_group_ = &g;
    }
    const std::vector<NamedLinear> gate_up = {{&w1_, "w1"}, {&w3_, "w3"}};
    if (planned_split(tp, f, gate_up, {&w2_, "w2"},
                      "llama splits the feed-forward by hidden features: w1, w3 colwise and w2 "
                      "rowwise")) {
      keep_blocks(g, f, gate_up, {&w2_, "w2"}, out);
      ffn_group_ = &g;
    }
    if (!sequence) return;
    if (attention_group_ == nullptr || ffn_group_ == nullptr)
      throw std::invalid_argument(
          name + (attention_group_ == nullptr ? ".attention" : ".feed_forward") +
          " is replicated; sequence-parallel norms need every block split (the activations "
          "between them are sharded along the sequence)");
    attention_norm_.sequence = ffn_norm_.sequence = &g;
    sequence_ = true;
  }

 private:
  at::Tensor feed_forward(at::Tensor n) const {
    n = enter_split(n, ffn_group_, sequence_);
    return leave_split(w2_.forward(at::silu(w1_.forward(n)) * w3_.forward(n)), ffn_group_,
                       sequence_);
  }

  at::Tensor attention(at::Tensor x, const Rotary& r) const {
    x = enter_split(x, attention_group_, sequence_);
    const int64_t B = x.size(0), T = x.size(1), H = heads_, KV = kv_heads_;
    const int64_t hd = c_.head_dim(), rep = H / KV;
    const at::Tensor q = rotate(wq_.forward(x).view({B, T, H, hd}), r);
    at::Tensor k = rotate(wk_.forward(x).view({B, T, KV, hd}), r);
    at::Tensor v = wv_.forward(x).view({B, T, KV, hd});
    if (rep > 1) {  // Meta's repeat_kv: query head j reads key/value head j / rep
      k = k.unsqueeze(3).expand({B, T, KV, rep, hd}).reshape({B, T, H, hd});
      v = v.unsqueeze(3).expand({B, T, KV, rep, hd}).reshape({B, T, H, hd});
    }
    const at::Tensor out = self_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                          /*causal=*/true, 0.0,
                                          /*training=*/false, kernel_);  // (B, H, T, hd)
    return leave_split(wo_.forward(out.transpose(1, 2).reshape({B, T, H * hd})), attention_group_,
                       sequence_);
  }

  LlamaConfig c_;
  int64_t heads_ = c_.n_heads, kv_heads_ = c_.n_kv_heads;  // this rank's
  TpGroup* attention_group_ = nullptr;                     // set: split by heads
  TpGroup* ffn_group_ = nullptr;                           // set: split by hidden features
  bool sequence_ = false;                                  // sequence-parallel norms
  AttentionKernel kernel_ = default_attention_kernel();
  RmsNorm attention_norm_, ffn_norm_;
  Linear wq_, wk_, wv_, wo_, w1_, w2_, w3_;
};

class Llama final : public BuiltinModel {
 public:
  Llama(const LlamaConfig& c, uint64_t seed) : BuiltinModel(seed), config_(c) {
    registry().begin_unit("tok_embeddings");
    tok_embeddings_ = make_embedding(registry(), "tok_embeddings", c.vocab_size, c.dim, 1.0);
    for (int64_t i = 0; i < c.n_layers; ++i) {
      const std::string name = "layers." + std::to_string(i);
      registry().begin_unit(name);
      layers_.emplace_back(registry(), name, c, i);
    }
    registry().begin_unit("output");
    norm_ = make_rms_norm(registry(), "norm", c.dim, c.norm_eps);
    output_ =
        make_linear(registry(), "output",
                    {c.dim,
                     c.vocab_size,
                     false,
                     {WeightInit::Kind::Normal, 1.0 / std::sqrt(static_cast<double>(c.dim))}});
  }

  at::Tensor forward(const at::Tensor& input) override {
    if (input.dim() != 2 || input.scalar_type() != at::kLong) {
      throw std::invalid_argument("llama: expected int64 token ids (B, T), got " +
                                  std::string(c10::toString(input.scalar_type())) + " " +
                                  c10::str(input.sizes()));
    }
    const int64_t T = input.size(1);
    if (T > config_.max_seq_len) {
      throw std::invalid_argument(
          "llama: input has T=" + std::to_string(T) +
          " tokens, more than max_seq_len=" + std::to_string(config_.max_seq_len) +
          " (raise model.max_seq_len or feed shorter sequences)");
    }
    int unit = 0;
    at::Tensor x = run_unit(unit++, input, [this](const at::Tensor& ids) {
      return embed(ids);  // (B, T, D)
    });
    // In the weights' dtype, at least float32 (the rotation's), once for every layer.
    const Rotary r =
        rotary(T, config_.head_dim(), config_.rope_theta, compute_dtype(x), x.device());
    for (const LlamaLayer& layer : layers_)
      x = run_unit(unit++, x, [&layer, r](const at::Tensor& h) { return layer.forward(h, r); });
    return run_unit(unit, x, [this](const at::Tensor& h) {
      return logits(norm_.forward(h));  // (B, T, V)
    });
  }

  Task task() const override { return Task::LanguageModel; }

  // torchtitan's plan runs as written: tok_embeddings and output split by
  // vocabulary (output's colwise is its vocabulary), the layers by heads and
  // hidden features; norms replicated, or sequence parallel (every norm:
  // the residual stream sharded along the sequence from the embedding's
  // reduce-scatter to the output's all-gather).
  std::vector<TpSplit> parallelize(const TensorParallel& tp) override {
    std::vector<std::string> modules;
    for (const NamedTensor& p : named_parameters())
      modules.push_back(p.name.substr(0, p.name.rfind('.')));
    tp.check_rules_match(modules);
    std::vector<TpSplit> out;
    TpGroup& g = *tp.group;
    const bool sequence = tp.style_of("norm") == TpStyle::Sequence;
    const std::string norms_why =
        "llama's norms are all replicated or all sequence parallel (the residual stream between "
        "them is sharded along the sequence or whole)";
    for (const std::string& m : modules)
      if (m == "norm" || (m.size() > 5 && m.compare(m.size() - 5, 5, "_norm") == 0))
        require_style(tp, m, {sequence ? TpStyle::Sequence : TpStyle::Replicate}, norms_why);
    if (sequence) {
      require_style(tp, "tok_embeddings", {TpStyle::Vocab},
                    "sequence-parallel norms need the embedding split by vocabulary (its sum "
                    "reduce-scattered along the sequence)");
      require_style(tp, "output", {TpStyle::Vocab, TpStyle::Colwise},
                    "sequence-parallel norms need the output split by vocabulary (its input "
                    "gathered along the sequence)");
      if (config_.max_seq_len % g.size() != 0)
        throw std::invalid_argument("model.max_seq_len " + std::to_string(config_.max_seq_len) +
                                    " is not divisible by tensor_parallel size " +
                                    std::to_string(g.size()) +
                                    " (sequence parallel: each rank holds an equal share of "
                                    "the positions)");
    }
    require_style(tp, "tok_embeddings", {TpStyle::Replicate, TpStyle::Vocab},
                  "an embedding is replicated or split by vocabulary");
    if (tp.style_of("tok_embeddings") == TpStyle::Vocab) {
      split_count(config_.vocab_size, "vocab_size", g);
      keep_block(tok_embeddings_.weight, 0, g, "tok_embeddings.weight");
      out.push_back({"tok_embeddings.weight", 0});
      embed_group_ = &g;
    }
    for (size_t i = 0; i < layers_.size(); ++i)
      layers_[i].parallelize(tp, "layers." + std::to_string(i), sequence, out);
    if (sequence) norm_.sequence = &g;
    sequence_ = sequence;
    require_style(tp, "output", {TpStyle::Replicate, TpStyle::Vocab, TpStyle::Colwise},
                  "the output layer is replicated or split by vocabulary (colwise)");
    if (tp.style_of("output") != TpStyle::Replicate) {
      split_count(config_.vocab_size, "vocab_size", g);
      keep_block(output_.weight, 0, g, "output.weight");
      out.push_back({"output.weight", 0});
      output_group_ = &g;
    }
    return out;
  }

 private:
  // Split by vocabulary: this rank looks up the ids in its rows, zeros for
  // the others, and the group sums the lookups.
  at::Tensor embed(const at::Tensor& ids) const {
    if (embed_group_ == nullptr) return tok_embeddings_.forward(ids);
    const int64_t rows = tok_embeddings_.weight.size(0);
    const at::Tensor local = ids - embed_group_->rank() * rows;
    const at::Tensor outside = (local < 0).logical_or(local >= rows);
    const at::Tensor e = tok_embeddings_.forward(local.masked_fill(outside, 0))
                             .masked_fill(outside.unsqueeze(-1), 0);
    return leave_split(e, embed_group_, sequence_);
  }

  // Split by vocabulary: this rank's logits, gathered.
  at::Tensor logits(const at::Tensor& h) const {
    if (output_group_ == nullptr) return output_.forward(h);
    return tp_gather_last(output_.forward(enter_split(h, output_group_, sequence_)),
                          *output_group_);
  }

  LlamaConfig config_;
  Embedding tok_embeddings_;
  std::vector<LlamaLayer> layers_;
  RmsNorm norm_;
  Linear output_;
  TpGroup* embed_group_ = nullptr;   // set: tok_embeddings split by vocabulary
  TpGroup* output_group_ = nullptr;  // set: output split by vocabulary
  bool sequence_ = false;            // sequence-parallel norms
};

}  // namespace

std::unique_ptr<Model> make_llama(const config::Node& cfg, uint64_t seed) {
  return std::make_unique<Llama>(read_llama_config(cfg), seed);
}

}  // namespace rh::model
