// gpt: a tiny decoder-only transformer (nanoGPT-like) for language modelling.
//
//   ids (B, T) int64, T <= block_size
//   -> embed: token + position embeddings             (B, T, D)
//   -> blocks.i: pre-norm causal transformer blocks   (B, T, D)
//   -> head: LayerNorm -> linear, no bias             (B, T, V)
//
// Tensors: embed.token.weight (V, D), embed.position.weight (block_size, D),
// blocks.i.* (see TransformerBlock.hpp), head.norm.{weight,bias},
// head.fc.weight (V, D). With tie_weights the head multiplies by
// embed.token.weight instead: there is no head.fc.weight, the shared weight
// is listed once and belongs to the embed unit (a sharding strategy must
// have it gathered for the head's forward too). Init as nanoGPT: N(0, 0.02²),
// the residual projections N(0, (0.02/sqrt(2·depth))²), biases 0.
//
// Units: embed, blocks.0 .. blocks.{depth-1}, head.
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

#include "model/BuiltinModel.hpp"
#include "model/ConfigFields.hpp"
#include "model/Layers.hpp"
#include "model/ModelBuilders.hpp"
#include "model/TransformerBlock.hpp"

namespace rh::model {
namespace {

constexpr double kInitStd = 0.02;

struct GptConfig {
  int64_t vocab_size = 0;   // V
  int64_t block_size = 64;  // longest T
  int64_t depth = 2;
  bool tie_weights = false;
  // D = block.dim; causal, with the output projections at 0.02 / sqrt(2 depth)
  TransformerBlockSpec block{64, 4, 4.0, 0.0, true, kInitStd};
};

GptConfig read_gpt_config(const config::Node& node) {
  const ConfigFields cfg(node);
  GptConfig c;
  c.vocab_size = cfg.integer("vocab_size");
  c.block_size = cfg.integer("block_size", c.block_size);
  c.depth = cfg.integer("depth", c.depth);
  c.tie_weights = cfg.boolean("tie_weights", c.tie_weights);
  c.block = read_block_spec(cfg, c.block);
  c.block.proj_std = kInitStd / std::sqrt(2.0 * static_cast<double>(c.depth));
  return c;
}

class Gpt final : public BuiltinModel {
 public:
  Gpt(const GptConfig& c, uint64_t seed) : BuiltinModel(seed), config_(c) {
    registry().begin_unit("embed");
    token_ = make_embedding(registry(), "embed.token", c.vocab_size, c.block.dim, kInitStd);
    position_ = make_embedding(registry(), "embed.position", c.block_size, c.block.dim, kInitStd);

    for (int64_t i = 0; i < c.depth; ++i) {
      const std::string name = "blocks." + std::to_string(i);
      registry().begin_unit(name);
      blocks_.emplace_back(registry(), name, c.block);
    }

    registry().begin_unit("head");
    head_norm_ = make_layer_norm(registry(), "head.norm", c.block.dim);
    if (c.tie_weights) {
      head_weight_ = token_.weight;  // the same tensor: one parameter, two uses
      registry().share_parameter("embed.token.weight");
    } else {
      head_weight_ =
          make_linear(registry(), "head.fc",
                      {c.block.dim, c.vocab_size, false, {WeightInit::Kind::Normal, kInitStd}})
              .weight;
    }
  }

  at::Tensor forward(const at::Tensor& input) override {
    if (input.dim() != 2 || input.scalar_type() != at::kLong) {
      throw std::invalid_argument("gpt: expected int64 token ids (B, T), got " +
                                  std::string(c10::toString(input.scalar_type())) + " " +
                                  c10::str(input.sizes()));
    }
    const int64_t T = input.size(1);
    if (T > config_.block_size) {
      throw std::invalid_argument(
          "gpt: input has T=" + std::to_string(T) +
          " tokens, more than block_size=" + std::to_string(config_.block_size) +
          " (raise model.block_size or feed shorter sequences)");
    }
    const bool train = training();
    int unit = 0;
    at::Tensor x = run_unit(unit++, input, [this, T, train](const at::Tensor& ids) {
      const at::Tensor positions = torch::arange(T, ids.options());       // (T)
      at::Tensor e = token_.forward(ids) + position_.forward(positions);  // (B, T, D)
      return at::dropout(e, config_.block.dropout, train);
    });
    for (const TransformerBlock& block : blocks_)
      x = run_unit(unit++, x,
                   [&block, train](const at::Tensor& h) { return block.forward(h, train); });
    return run_unit(unit, x, [this](const at::Tensor& h) {
      return at::linear(head_norm_.forward(h), head_weight_);  // (B, T, V)
    });
  }

  Task task() const override { return Task::LanguageModel; }

 private:
  GptConfig config_;
  Embedding token_;
  Embedding position_;
  std::vector<TransformerBlock> blocks_;
  LayerNorm head_norm_;
  at::Tensor head_weight_;  // head.fc.weight, or embed.token.weight when tied
};

}  // namespace

// As forward() above runs (ActivationEstimate.hpp).
ActivationEstimate gpt_activations(const config::Node& node, const ActivationShape& shape) {
  const GptConfig c = read_gpt_config(node);
  const int64_t B = shape.batch;
  const int64_t T = shape.seq_len > 0 ? shape.seq_len : c.block_size;
  const int64_t e = shape.element_size;
  const int64_t x = B * T * c.block.dim;  // elements of a (B, T, D) tensor
  ActivationEstimate est;
  // embed: the positions (int64, T), kept by their embedding (the ids are
  // the batch's); dropout of the sum.
  UnitActivations embed{0, T * 8};
  if (c.block.dropout > 0) embed.saved += dropout_saved_bytes(x, shape);
  est.units.push_back(embed);
  for (int64_t i = 0; i < c.depth; ++i)
    est.units.push_back({x * e, block_saved_bytes(c.block, B, T, shape)});
  // head: the norm's statistics and output (the linear's input); the logits
  // are kept by nothing.
  est.units.push_back({x * e, 2 * B * T * e + x * e});
  est.loss = B * T * c.vocab_size * 4;  // cross_entropy's log_softmax output (float)
  return est;
}

std::unique_ptr<Model> make_gpt(const config::Node& cfg, uint64_t seed) {
  return std::make_unique<Gpt>(read_gpt_config(cfg), seed);
}

}  // namespace rh::model
