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

struct TensorParallel;
struct TpSplit;

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
  // Activation checkpointing (the job's activation_checkpoint): the units,
  // by index, whose forward keeps no activations and runs again in backward
  // (ActivationCheckpoint.cpp); all false, or empty, keeps every activation.
  // A model whose forward is opaque (TorchScript) recomputes its whole
  // forward as one piece when any unit is set.
  void set_recomputed_units(std::vector<bool> units);
  const std::vector<bool>& recomputed_units() const { return recomputed_; }
  // True when the model runs its units one by one (the built-in models), so
  // that any subset can recompute; false for an opaque forward.
  virtual bool units_run_separately() const { return true; }
  // Tensor parallelism (a strategy's plan; TensorParallel.hpp): keeps this
  // rank's blocks of the planned modules and runs the plan's collectives in
  // forward and backward from now on; returns the parameters it split.
  // Throws std::invalid_argument for a plan the model cannot run, naming the
  // module and why (the default: the model runs none; only llama does).
  virtual std::vector<TpSplit> parallelize(const TensorParallel& plan);

 protected:
  using UnitBody = std::function<at::Tensor(const at::Tensor&)>;
  // One unit's forward: enter_unit, `body(x)`, exit_unit. With grad mode on
  // and the unit recomputed, body runs without keeping its activations and
  // again in backward, its random numbers (dropout) and autocast as they
  // were (ActivationCheckpoint.cpp). `body` is kept for the backward: it
  // must capture nothing by reference that ends with the forward.
  at::Tensor run_unit(int unit, const at::Tensor& x, const UnitBody& body);
  // body(x) recomputed in backward, for the whole trainable model (an opaque
  // forward).
  at::Tensor run_recomputed(const at::Tensor& x, const UnitBody& body);

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
  // The trainable parameters `body` of a unit uses (its own and the shared
  // ones), and each unit's buffers, found at the first recomputed forward.
  const std::vector<at::Tensor>& unit_params(int unit);
  UnitCallback unit_callback_;
  bool pre_backward_ = true;
  std::vector<bool> recomputed_;
  std::vector<std::vector<at::Tensor>> unit_params_;
  std::vector<at::Tensor> all_params_;
  std::vector<std::vector<at::Tensor>> unit_buffers_;
  std::vector<at::Tensor> all_buffers_;
  bool resolved_ = false;
};

// Builds the model of a validated `model:` subtree (see ModelSchema.hpp).
// Weights are initialised deterministically from `seed` (same seed, same
// weights, on every rank and every run). `job_dir` resolves relative paths
// (torchscript). Throws config::ConfigError naming the key for bad values
// (e.g. an unreadable TorchScript file).
// `model.frozen` is applied here (see freeze()).
std::unique_ptr<Model> build_model(const config::Node& cfg, uint64_t seed,
                                   const std::string& job_dir);
// The same model with every tensor on the meta device: names, shapes,
// dtypes, units, buffers and model.frozen as build_model() makes them, no
// storage and no initial values (`--estimate-memory` reads a model it must
// not allocate).
std::unique_ptr<Model> build_model_shapes(const config::Node& cfg, const std::string& job_dir);

// The job's activation_checkpoint section (ActivationCheckpointConfig.hpp):
// sets the units that recompute in backward, and logs which. selective on a
// model with an opaque forward (TorchScript) is a ConfigError naming the key.
void apply_activation_checkpoint(Model& model, const config::Node& section);

// model.frozen: every parameter whose name is a prefix of the list, or starts
// with "<prefix>.", gets requires_grad false (no optimizer state, no
// gradient, never communicated). A prefix that matches nothing is a
// ConfigError naming it (and the model's top-level modules).
void freeze(Model& model, const config::Node& prefixes);

}  // namespace rh::model
