// mlp: Linear layers with an activation (and dropout) between them.
//
//   x (B, F) -> layers.0 -> act -> dropout -> ... -> head -> logits (B, C)
//
// Units: layers.0 .. layers.N-1 (one per hidden Linear), head. Weights as
// torch.nn.Linear: U(±1/sqrt(fan_in)).
#include <torch/torch.h>

#include <stdexcept>

#include "model/ActivationEstimate.hpp"
#include "model/BuiltinModel.hpp"
#include "model/ConfigFields.hpp"
#include "model/Layers.hpp"
#include "model/ModelBuilders.hpp"
#include "model/TransformerBlock.hpp"

namespace rh::model {
namespace {

enum class Activation { Relu, Gelu, Tanh };

struct MlpConfig {
  int64_t in_features = 0;              // F
  std::vector<int64_t> hidden = {128};  // widths of the hidden layers
  int64_t num_classes = 0;              // C
  Activation activation = Activation::Relu;
  double dropout = 0.0;
};

MlpConfig read_mlp_config(const config::Node& node) {
  const ConfigFields cfg(node);
  MlpConfig c;
  c.in_features = cfg.integer("in_features");
  c.hidden = cfg.integers("hidden", c.hidden);
  c.num_classes = cfg.integer("num_classes");
  const std::string activation = cfg.string("activation", "relu");
  if (activation == "gelu") {
    c.activation = Activation::Gelu;
  } else if (activation == "tanh") {
    c.activation = Activation::Tanh;
  } else if (activation != "relu") {
    cfg.fail("activation", "expected one of relu, gelu, tanh, got '" + activation + "'");
  }
  c.dropout = cfg.number("dropout", c.dropout);
  return c;
}

class Mlp final : public BuiltinModel {
 public:
  Mlp(const MlpConfig& c, uint64_t seed) : BuiltinModel(seed), config_(c) {
    int64_t width = c.in_features;
    for (size_t i = 0; i < c.hidden.size(); ++i) {
      const std::string name = "layers." + std::to_string(i);
      registry().begin_unit(name);
      layers_.push_back(make_linear(registry(), name, {width, c.hidden[i]}));
      width = c.hidden[i];
    }
    registry().begin_unit("head");
    head_ = make_linear(registry(), "head", {width, c.num_classes});
  }

  at::Tensor forward(const at::Tensor& input) override {
    if (input.dim() != 2 || input.size(1) != config_.in_features) {
      throw std::invalid_argument("mlp: expected input (B, " + std::to_string(config_.in_features) +
                                  "), got " + c10::str(input.sizes()));
    }
    at::Tensor x = input;  // (B, F)
    int unit = 0;
    for (const Linear& layer : layers_)
      x = run_unit(unit++, x, [this, &layer](const at::Tensor& h) {
        return at::dropout(activate(layer.forward(h)), config_.dropout, training());
      });
    return run_unit(unit, x, [this](const at::Tensor& h) { return head_.forward(h); });  // (B, C)
  }

  Task task() const override { return Task::Classification; }

 private:
  at::Tensor activate(const at::Tensor& x) const {
    switch (config_.activation) {
      case Activation::Gelu:
        return at::gelu(x);
      case Activation::Tanh:
        return at::tanh(x);
      case Activation::Relu:
        break;
    }
    return at::relu(x);
  }

  MlpConfig config_;
  std::vector<Linear> layers_;
  Linear head_;
};

}  // namespace

// As forward() above runs (ActivationEstimate.hpp).
ActivationEstimate mlp_activations(const config::Node& node, const ActivationShape& shape) {
  const MlpConfig c = read_mlp_config(node);
  const int64_t B = shape.batch;
  const int64_t e = shape.element_size;
  ActivationEstimate est;
  int64_t input = 0;  // the first layer's is the batch
  for (const int64_t width : c.hidden) {
    const int64_t n = B * width;
    int64_t saved = 0;
    // gelu keeps its input (the linear's output); relu and tanh their
    // output, which is the unit's output (the next unit's input, counted
    // there) unless dropout follows; dropout its noise or mask.
    const bool keeps_output = c.activation != Activation::Gelu;
    if (!keeps_output) saved += n * e;
    if (c.dropout > 0) saved += dropout_saved_bytes(n, shape) + (keeps_output ? n * e : 0);
    est.units.push_back({input, saved});
    input = n * e;
  }
  est.units.push_back({input, 0});   // head: the linear keeps its input
  est.loss = B * c.num_classes * 4;  // cross_entropy's log_softmax output (float)
  return est;
}

std::unique_ptr<Model> make_mlp(const config::Node& cfg, uint64_t seed) {
  return std::make_unique<Mlp>(read_mlp_config(cfg), seed);
}

}  // namespace rh::model
