// A trainable model as the runner sees it: forward, named parameters and
// buffers, and its *units* (the blocks sharding strategies gather one at a
// time: embedding, each transformer block, head). Every parameter belongs to
// exactly one unit.
//
// Shapes: B = batch, F = features, C = classes, T = tokens, V = vocabulary,
// H×W = image size.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rh::config {
class Node;
}

namespace rh::model {

struct NamedTensor {
  std::string name;  // "blocks.0.attn.qkv.weight"
  at::Tensor tensor;
};

struct Unit {
  std::string name;                      // "embed", "blocks.0", "head"
  std::vector<std::string> param_names;  // its parameters, registration order
  // Parameters of earlier units it uses too (tied weights: gpt's head with
  // tie_weights uses embed.token.weight).
  std::vector<std::string> shared_param_names;
};

// What a model computes from. Classification: input (B, F) or (B, 3, H, W)
// float, target (B) int64 class ids. Language model: input (B, T) int64 token
// ids, target (B, T) int64 next tokens.
enum class Task { Classification, LanguageModel };

// Called around each unit's forward (sharding strategies gather/reshard),
// and before autograd enters the unit's backward (a hook on the gradient of
// the unit's output; only when that output requires grad).
enum class UnitPhase { PreForward, PostForward, PreBackward };
using UnitCallback = std::function<void(int unit, UnitPhase phase)>;

class Model {
 public:
  virtual ~Model() = default;
  // Classification: (B, ...) -> logits (B, C). Language model: (B, T) -> (B, T, V).
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  virtual std::vector<NamedTensor> named_parameters() = 0;  // registration order
  virtual std::vector<NamedTensor> named_buffers() = 0;
  virtual std::vector<Unit> units() const = 0;  // forward order
  virtual void train(bool on) = 0;              // dropout, batch norm
  virtual void to(const at::Device& device) = 0;
  virtual Task task() const = 0;
  // Installs the callback models call around each unit's forward (none by
  // default). Models whose forward is opaque (TorchScript) call it only
  // around the whole forward for unit 0..N-1 in order. `pre_backward`: also
  // hook each unit's output for PreBackward. That hook is an autograd hook
  // registered on every forward (allocations, ~6k instructions a step on
  // the quickstart's MLP), so it is only added for a caller that wants it.
  void set_unit_callback(UnitCallback cb, bool pre_backward = true) {
    unit_callback_ = std::move(cb);
    pre_backward_ = pre_backward;
  }

 protected:
  void enter_unit(int unit) {
    if (unit_callback_) unit_callback_(unit, UnitPhase::PreForward);
  }
  // Returns `out`, the unit's output, with the PreBackward hook on it.
  at::Tensor exit_unit(int unit, at::Tensor out) {
    if (!unit_callback_) return out;
    unit_callback_(unit, UnitPhase::PostForward);
    if (pre_backward_ && out.requires_grad()) {
      UnitCallback cb = unit_callback_;
      out.register_hook([cb, unit](const at::Tensor& grad) {
        cb(unit, UnitPhase::PreBackward);
        return grad;
      });
    }
    return out;
  }

 private:
  UnitCallback unit_callback_;
  bool pre_backward_ = true;
};

// Builds the model of a validated `model:` subtree (see ModelSchema.hpp).
// Weights are initialised deterministically from `seed` (same seed, same
// weights, on every rank and every run). `job_dir` resolves relative paths
// (torchscript). Throws config::ConfigError naming the key for bad values
// (e.g. an unreadable TorchScript file).
// `model.frozen` is applied here (see freeze()).
std::unique_ptr<Model> build_model(const config::Node& cfg, uint64_t seed,
                                   const std::string& job_dir);

// model.frozen: every parameter whose name is a prefix of the list, or starts
// with "<prefix>.", gets requires_grad false (no optimizer state, no
// gradient, never communicated). A prefix that matches nothing is a
// ConfigError naming it (and the model's top-level modules).
void freeze(Model& model, const config::Node& prefixes);

}  // namespace rh::model
