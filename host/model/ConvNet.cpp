// convnet: a small ResNet for 32×32 images (any H×W works: global average
// pooling before the head).
//
//   x (B, Cin, H, W) -> stem: conv3x3 -> norm -> relu            (B, w, H, W)
//   -> stages.s.b: basic residual blocks; stage s has w·2^s channels, its
//      first block strides 2 (s > 0)                             (B, w·2^s, H/2^s, W/2^s)
//   -> head: global average pool -> linear                       (B, C)
//
// A block: relu(norm2(conv2(relu(norm1(conv1(x))))) + shortcut(x)), the
// shortcut a 1×1 conv + norm where the shape changes. Tensors: stem.conv,
// stem.norm, stages.S.B.{conv1,norm1,conv2,norm2,shortcut.conv,shortcut.norm},
// head.{weight,bias}. Convolutions have a bias only with `norm: none`.
// Init as torchvision's ResNet: convs N(0, 2/fan_out), norms weight 1 bias 0,
// head U(±1/sqrt(fan_in)).
//
// Units: stem, stages.S.B (each block), head.
#include <torch/torch.h>

#include <stdexcept>

#include "model/BuiltinModel.hpp"
#include "model/ConfigFields.hpp"
#include "model/Layers.hpp"
#include "model/ModelBuilders.hpp"

namespace rh::model {
namespace {

struct ConvNetConfig {
  int64_t in_channels = 3;
  int64_t num_classes = 0;
  int64_t width = 32;                       // channels of the stem and stage 0
  std::vector<int64_t> blocks = {1, 1, 1};  // residual blocks per stage
  NormKind norm = NormKind::Batch;
};

ConvNetConfig read_convnet_config(const config::Node& node) {
  const ConfigFields cfg(node);
  ConvNetConfig c;
  c.in_channels = cfg.integer("in_channels", c.in_channels);
  c.num_classes = cfg.integer("num_classes");
  c.width = cfg.integer("width", c.width);
  c.blocks = cfg.integers("blocks", c.blocks);
  if (c.blocks.empty()) cfg.fail("blocks", "expected at least one stage, got an empty list");
  constexpr size_t kMaxStages = 16;  // width·2^s must stay a sane channel count
  if (c.blocks.size() > kMaxStages) {
    cfg.fail("blocks", "at most " + std::to_string(kMaxStages) + " stages, got " +
                           std::to_string(c.blocks.size()));
  }
  const std::string norm = cfg.string("norm", "batch");
  if (norm == "group") {
    c.norm = NormKind::Group;
  } else if (norm == "none") {
    c.norm = NormKind::None;
  } else if (norm != "batch") {
    cfg.fail("norm", "expected one of batch, group, none, got '" + norm + "'");
  }
  return c;
}

class ConvNet final : public BuiltinModel {
 public:
  ConvNet(const ConvNetConfig& c, uint64_t seed) : BuiltinModel(seed), config_(c) {
    registry().begin_unit("stem");
    stem_ = {conv("stem.conv", c.in_channels, c.width, 3, 1), norm("stem.norm", c.width)};
    int64_t channels = c.width;
    for (size_t s = 0; s < c.blocks.size(); ++s) {
      const int64_t out = c.width << s;
      for (int64_t b = 0; b < c.blocks[s]; ++b) {
        const std::string name = "stages." + std::to_string(s) + "." + std::to_string(b);
        const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
        registry().begin_unit(name);
        Block block;
        block.conv1 = conv(name + ".conv1", channels, out, 3, stride);
        block.norm1 = norm(name + ".norm1", out);
        block.conv2 = conv(name + ".conv2", out, out, 3, 1);
        block.norm2 = norm(name + ".norm2", out);
        if (stride != 1 || channels != out) {
          block.has_shortcut = true;
          block.shortcut = {conv(name + ".shortcut.conv", channels, out, 1, stride),
                            norm(name + ".shortcut.norm", out)};
        }
        blocks_.push_back(block);
        channels = out;
      }
    }
    registry().begin_unit("head");
    head_ = make_linear(registry(), "head", {channels, c.num_classes});
  }

  at::Tensor forward(const at::Tensor& input) override {
    if (input.dim() != 4 || input.size(1) != config_.in_channels) {
      throw std::invalid_argument("convnet: expected input (B, " +
                                  std::to_string(config_.in_channels) + ", H, W), got " +
                                  c10::str(input.sizes()));
    }
    const bool train = training();
    int unit = 0;
    at::Tensor x = run_unit(unit++, input, [this, train](const at::Tensor& images) {
      return at::relu(stem_.norm.forward(stem_.conv.forward(images), train));  // (B, w, H, W)
    });
    for (const Block& block : blocks_)
      x = run_unit(unit++, x, [&block, train](const at::Tensor& in) {
        at::Tensor h = at::relu(block.norm1.forward(block.conv1.forward(in), train));
        h = block.norm2.forward(block.conv2.forward(h), train);
        const at::Tensor skip =
            block.has_shortcut ? block.shortcut.norm.forward(block.shortcut.conv.forward(in), train)
                               : in;
        return at::relu(h + skip);  // (B, w·2^s, H/2^s, W/2^s)
      });
    return run_unit(unit, x, [this](const at::Tensor& h) { return head_.forward(h.mean({2, 3})); });
  }

  Task task() const override { return Task::Classification; }

 private:
  struct ConvNorm {
    Conv2d conv;
    Norm2d norm;
  };
  struct Block {
    Conv2d conv1;
    Norm2d norm1;
    Conv2d conv2;
    Norm2d norm2;
    bool has_shortcut = false;
    ConvNorm shortcut;
  };

  Conv2d conv(const std::string& name, int64_t in, int64_t out, int64_t kernel, int64_t stride) {
    Conv2dSpec spec;
    spec.in = in;
    spec.out = out;
    spec.kernel = kernel;
    spec.stride = stride;
    spec.padding = kernel / 2;
    spec.bias = config_.norm == NormKind::None;
    spec.init.kind = WeightInit::Kind::KaimingFanOutRelu;
    return make_conv2d(registry(), name, spec);
  }
  Norm2d norm(const std::string& name, int64_t channels) {
    return make_norm2d(registry(), name, config_.norm, channels);
  }

  ConvNetConfig config_;
  ConvNorm stem_;
  std::vector<Block> blocks_;
  Linear head_;
};

}  // namespace

std::unique_ptr<Model> make_convnet(const config::Node& cfg, uint64_t seed) {
  return std::make_unique<ConvNet>(read_convnet_config(cfg), seed);
}

}  // namespace rh::model
