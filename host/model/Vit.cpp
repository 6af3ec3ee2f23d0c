// vit: a tiny Vision Transformer.
//
//   x (B, C, S, S), S = image_size, P = patch_size, N = (S/P)² patches
//   -> embed: conv P×P stride P (patch projection)      (B, N, D)
//             prepend the class token, add positions    (B, N+1, D)
//   -> blocks.i: pre-norm transformer blocks            (B, N+1, D)
//   -> head: LayerNorm -> linear on the class token     (B, C)
//
// Tensors: embed.patch.{weight,bias}, embed.cls_token (1, 1, D),
// embed.pos_embed (1, N+1, D), blocks.i.* (see TransformerBlock.hpp),
// head.norm.{weight,bias}, head.fc.{weight,bias}. Init N(0, 0.02²) for
// weights and embeddings, biases 0, norms 1/0.
//
// Units: embed, blocks.0 .. blocks.{depth-1}, head.
#include <torch/torch.h>

#include <stdexcept>

#include "model/BuiltinModel.hpp"
#include "model/ConfigFields.hpp"
#include "model/Layers.hpp"
#include "model/ModelBuilders.hpp"
#include "model/TransformerBlock.hpp"

namespace rh::model {
namespace {

constexpr double kInitStd = 0.02;

struct VitConfig {
  int64_t image_size = 32;  // S
  int64_t patch_size = 4;   // P, divides S
  int64_t in_channels = 3;
  int64_t depth = 4;
  int64_t num_classes = 0;
  // D = block.dim; not causal
  TransformerBlockSpec block{64, 4, 2.0, 0.0, false, kInitStd};
};

VitConfig read_vit_config(const config::Node& node) {
  const ConfigFields cfg(node);
  VitConfig c;
  c.image_size = cfg.integer("image_size", c.image_size);
  c.patch_size = cfg.integer("patch_size", c.patch_size);
  c.in_channels = cfg.integer("in_channels", c.in_channels);
  c.depth = cfg.integer("depth", c.depth);
  c.num_classes = cfg.integer("num_classes");
  c.block = read_block_spec(cfg, c.block);
  if (c.image_size % c.patch_size != 0) {
    cfg.fail("patch_size", "image_size " + std::to_string(c.image_size) +
                               " is not a multiple of patch_size " + std::to_string(c.patch_size));
  }
  return c;
}

class Vit final : public BuiltinModel {
 public:
  Vit(const VitConfig& c, uint64_t seed) : BuiltinModel(seed), config_(c) {
    const int64_t grid = c.image_size / c.patch_size;
    registry().begin_unit("embed");
    Conv2dSpec patch;
    patch.in = c.in_channels;
    patch.out = c.block.dim;
    patch.kernel = c.patch_size;
    patch.stride = c.patch_size;
    patch.padding = 0;
    patch.bias = true;
    patch.init = {WeightInit::Kind::Normal, kInitStd};
    patch_ = make_conv2d(registry(), "embed.patch", patch);
    cls_token_ = registry().add_parameter("embed.cls_token",
                                          registry().normal({1, 1, c.block.dim}, kInitStd));
    pos_embed_ = registry().add_parameter(
        "embed.pos_embed", registry().normal({1, grid * grid + 1, c.block.dim}, kInitStd));

    for (int64_t i = 0; i < c.depth; ++i) {
      const std::string name = "blocks." + std::to_string(i);
      registry().begin_unit(name);
      blocks_.emplace_back(registry(), name, c.block);
    }

    registry().begin_unit("head");
    head_norm_ = make_layer_norm(registry(), "head.norm", c.block.dim);
    head_ = make_linear(registry(), "head.fc",
                        {c.block.dim, c.num_classes, true, {WeightInit::Kind::Normal, kInitStd}});
  }

  at::Tensor forward(const at::Tensor& input) override {
    const VitConfig& c = config_;
    if (input.dim() != 4 || input.size(1) != c.in_channels || input.size(2) != c.image_size ||
        input.size(3) != c.image_size) {
      throw std::invalid_argument("vit: expected input (B, " + std::to_string(c.in_channels) +
                                  ", " + std::to_string(c.image_size) + ", " +
                                  std::to_string(c.image_size) + "), got " +
                                  c10::str(input.sizes()) + " (model.image_size)");
    }
    const bool train = training();
    const int64_t B = input.size(0);
    int unit = 0;
    at::Tensor x = run_unit(unit++, input, [this, B, train](const at::Tensor& images) {
      at::Tensor p = patch_.forward(images).flatten(2).transpose(1, 2);  // (B, N, D)
      p = at::cat({cls_token_.expand({B, 1, config_.block.dim}), p}, 1) +
          pos_embed_;  // (B, N+1, D)
      return at::dropout(p, config_.block.dropout, train);
    });
    for (const TransformerBlock& block : blocks_)
      x = run_unit(unit++, x,
                   [&block, train](const at::Tensor& h) { return block.forward(h, train); });
    return run_unit(unit, x, [this](const at::Tensor& h) {
      return head_.forward(head_norm_.forward(h.select(1, 0)));  // (B, C)
    });
  }

  Task task() const override { return Task::Classification; }

 private:
  VitConfig config_;
  Conv2d patch_;
  at::Tensor cls_token_;
  at::Tensor pos_embed_;
  std::vector<TransformerBlock> blocks_;
  LayerNorm head_norm_;
  Linear head_;
};

}  // namespace

// As forward() above runs (ActivationEstimate.hpp).
ActivationEstimate vit_activations(const config::Node& node, const ActivationShape& shape) {
  const VitConfig c = read_vit_config(node);
  const int64_t B = shape.batch;
  const int64_t grid = c.image_size / c.patch_size;
  const int64_t T = grid * grid + 1;  // the patches and the class token
  const int64_t e = shape.element_size;
  const int64_t x = B * T * c.block.dim;
  ActivationEstimate est;
  // embed: the conv keeps the images (the batch's); cat and the position
  // add keep nothing; dropout of the sum.
  est.units.push_back({0, c.block.dropout > 0 ? dropout_saved_bytes(x, shape) : 0});
  for (int64_t i = 0; i < c.depth; ++i)
    est.units.push_back({x * e, block_saved_bytes(c.block, B, T, shape)});
  // head: the norm of the class token (a view of the input): its statistics
  // and output (the linear's input).
  est.units.push_back({x * e, 2 * B * e + B * c.block.dim * e});
  est.loss = B * c.num_classes * 4;  // cross_entropy's log_softmax output (float)
  return est;
}

std::unique_ptr<Model> make_vit(const config::Node& cfg, uint64_t seed) {
  return std::make_unique<Vit>(read_vit_config(cfg), seed);
}

}  // namespace rh::model
