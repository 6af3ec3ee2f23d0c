// Activation checkpointing in C++. LibTorch has no C++ checkpoint API
// (torch.utils.checkpoint is Python; pytorch/pytorch#52744), so a unit's
// forward runs under no-grad and its output is given a graph node of our own,
// RecomputeBackward. Its inputs, as autograd sees them, are the unit's input
// and the trainable parameters the unit uses; its backward runs the unit's
// forward again with grad on, from the saved input, with the random-number
// state and autocast of the first run, and takes the gradients of that
// graph with respect to the input and the parameters (torch::autograd::grad,
// a nested backward, as PyTorch's reentrant checkpoint does). The
// parameters' gradients are returned to the outer backward, which
// accumulates them as it would have without checkpointing: the gradient
// accumulators' hooks (the strategies' grad-ready and POST_BACKWARD
// callbacks) fire there, once, in the usual order.
//
// What stays alive per recomputed unit between forward and backward: its
// input (the previous unit's output) and its output. A unit's PRE_BACKWARD
// callback (a hook on its output's gradient) fires before the recompute, so
// zero stage 3 / fsdp have gathered the parameters it needs.
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

#include <mutex>
#include <optional>

#include "config/ConfigNode.hpp"
#include "model/ActivationCheckpointConfig.hpp"
#include "model/Model.hpp"
#include "rh/cpp/torch_compat.hpp"

namespace rh::model {
namespace {

using Body = std::function<at::Tensor(const at::Tensor&)>;

// The default generator of a device and its state at a point of the forward.
struct RngState {
  at::Generator generator;
  at::Tensor state;

  static RngState of(const at::Device& device) {
    RngState s{at::globalContext().defaultGenerator(device), {}};
    std::lock_guard<std::mutex> lock(s.generator.mutex());
    s.state = s.generator.get_state();
    return s;
  }
  void set(const at::Tensor& st) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(st);
  }
};

// The recompute draws the forward's random numbers; the generator is put
// back after it, so what follows the backward draws as without checkpointing.
class RngReplay {
 public:
  explicit RngReplay(RngState saved) : saved_(std::move(saved)) {
    now_ = RngState::of(saved_.generator.device()).state;
    saved_.set(saved_.state);
  }
  ~RngReplay() { saved_.set(now_); }
  RngReplay(const RngReplay&) = delete;
  RngReplay& operator=(const RngReplay&) = delete;

 private:
  RngState saved_;
  at::Tensor now_;
};

// Batch norm updates its running statistics on every training forward: the
// recompute must not update them a second time.
class BufferGuard {
 public:
  explicit BufferGuard(const std::vector<at::Tensor>& buffers) : buffers_(buffers) {
    at::NoGradGuard no_grad;
    for (const at::Tensor& b : buffers_) copies_.push_back(b.clone());
  }
  ~BufferGuard() {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(copies_[i]);
  }
  BufferGuard(const BufferGuard&) = delete;
  BufferGuard& operator=(const BufferGuard&) = delete;

 private:
  const std::vector<at::Tensor>& buffers_;
  std::vector<at::Tensor> copies_;
};

struct AutocastState {
  bool on = false;
  at::ScalarType dtype = at::kFloat;
};

class RecomputeBackward : public torch::autograd::Node {
 public:
  RecomputeBackward(Body body, at::Tensor input, std::vector<at::Tensor> params,
                    const std::vector<at::Tensor>& buffers, RngState rng, AutocastState autocast)
      : body_(std::move(body)),
        input_(std::move(input)),
        params_(std::move(params)),
        buffers_(buffers),
        rng_(std::move(rng)),
        autocast_(autocast) {}

  std::string name() const override { return "rh::RecomputeBackward"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    torch::autograd::variable_list out_grads(1 + params_.size());
    if (!grads[0].defined()) return out_grads;
    const bool input_grad = input_.is_floating_point() && next_edge(0).is_valid();
    at::Tensor x = input_.detach();
    if (input_grad) x.requires_grad_(true);
    // Put back after the gradients: the recomputed graph saved the
    // statistics as the recompute left them (their version).
    BufferGuard buffers(buffers_);
    at::Tensor out;
    {
      at::AutoGradMode grad_mode(true);
      RngReplay rng(rng_);
      std::optional<compat::AutocastScope> autocast;
      if (autocast_.on) autocast.emplace(input_.device().type(), autocast_.dtype);
      out = body_(x);
    }
    torch::autograd::variable_list wrt;
    if (input_grad) wrt.push_back(x);
    for (const at::Tensor& p : params_) wrt.push_back(p);
    torch::autograd::variable_list got =
        torch::autograd::grad({out}, wrt, {grads[0]}, /*retain_graph=*/false,
                              /*create_graph=*/false, /*allow_unused=*/true);
    size_t k = 0;
    if (input_grad) out_grads[0] = got[k++];
    for (size_t i = 0; i < params_.size(); ++i) out_grads[1 + i] = got[k++];
    return out_grads;
  }

  void release_variables() override {
    input_.reset();
    body_ = nullptr;
  }

 private:
  Body body_;
  at::Tensor input_;
  std::vector<at::Tensor> params_;
  const std::vector<at::Tensor>& buffers_;  // the model's, which outlives its graph
  RngState rng_;
  AutocastState autocast_;
};

at::Tensor recompute_in_backward(const Body& body, const at::Tensor& x,
                                 const std::vector<at::Tensor>& params,
                                 const std::vector<at::Tensor>& buffers) {
  const bool any_grad = (x.requires_grad() && x.is_floating_point()) || !params.empty();
  if (!any_grad) return body(x);
  RngState rng = RngState::of(x.device());
  AutocastState autocast{compat::AutocastScope::enabled(x.device().type()),
                         compat::AutocastScope::get_dtype(x.device().type())};
  at::Tensor out;
  {
    at::NoGradGuard no_grad;
    out = body(x);
  }
  auto node = std::shared_ptr<RecomputeBackward>(
      new RecomputeBackward(body, x.detach(), params, buffers, std::move(rng), autocast),
      torch::autograd::deleteNode);
  std::vector<at::Tensor> inputs;
  inputs.push_back(x);
  for (const at::Tensor& p : params) inputs.push_back(p);
  node->set_next_edges(torch::autograd::collect_next_edges(inputs));
  torch::autograd::set_history(out, node);
  return out;
}

}  // namespace

void Model::set_recomputed_units(std::vector<bool> units) { recomputed_ = std::move(units); }

const std::vector<at::Tensor>& Model::unit_params(int unit) {
  if (!resolved_) {
    std::map<std::string, at::Tensor> by_name;
    for (const NamedTensor& p : named_parameters()) {
      by_name[p.name] = p.tensor;
      if (p.tensor.requires_grad()) all_params_.push_back(p.tensor);
    }
    for (const Unit& u : units()) {
      std::vector<at::Tensor> ps;
      for (const auto* names : {&u.param_names, &u.shared_param_names})
        for (const std::string& n : *names)
          if (auto it = by_name.find(n); it != by_name.end() && it->second.requires_grad())
            ps.push_back(it->second);
      unit_params_.push_back(std::move(ps));
    }
    // A unit's buffers: those named under it ("blocks.0.norm1.running_mean"
    // is blocks.0's). Only those are put back after its recompute: another
    // unit's may be saved, at their version, by the graph still to run.
    const std::vector<NamedTensor> buffers = named_buffers();
    for (const NamedTensor& b : buffers) all_buffers_.push_back(b.tensor);
    for (const Unit& u : units()) {
      std::vector<at::Tensor> own;
      for (const NamedTensor& b : buffers)
        if (b.name.rfind(u.name + ".", 0) == 0) own.push_back(b.tensor);
      unit_buffers_.push_back(std::move(own));
    }
    resolved_ = true;
  }
  return unit < 0 ? all_params_ : unit_params_.at(static_cast<size_t>(unit));
}

at::Tensor Model::run_unit(int unit, const at::Tensor& x, const UnitBody& body) {
  enter_unit(unit);
  const bool recompute = static_cast<size_t>(unit) < recomputed_.size() &&
                         recomputed_[static_cast<size_t>(unit)] && at::GradMode::is_enabled();
  if (!recompute) return exit_unit(unit, body(x));
  const std::vector<at::Tensor>& params = unit_params(unit);  // resolves the buffers too
  return exit_unit(
      unit, recompute_in_backward(body, x, params, unit_buffers_.at(static_cast<size_t>(unit))));
}

void apply_activation_checkpoint(Model& model, const config::Node& section) {
  const ActivationCheckpointConfig c = read_activation_checkpoint(section);
  const std::vector<Unit> units = model.units();
  std::vector<bool> recomputed = c.recomputed(units.size());
  if (c.mode == ActivationCheckpointConfig::Mode::Selective && !model.units_run_separately())
    throw config::ConfigError(section.location(), section.path(),
                              "mode: selective needs a model that runs its units one by one; "
                              "this model's forward is opaque (TorchScript): mode: full "
                              "recomputes the whole forward");
  std::string names;
  for (size_t k = 0; k < units.size(); ++k)
    if (recomputed[k]) names += (names.empty() ? "" : ", ") + units[k].name;
  if (!names.empty())
    spdlog::info("activation checkpoint: {} recompute in backward{}", names,
                 model.units_run_separately() ? "" : " (as one piece: the forward is opaque)");
  model.set_recomputed_units(std::move(recomputed));
}

at::Tensor Model::run_recomputed(const at::Tensor& x, const UnitBody& body) {
  if (!at::GradMode::is_enabled()) return body(x);
  const std::vector<at::Tensor>& params = unit_params(-1);  // resolves the buffers too
  return recompute_in_backward(body, x, params, all_buffers_);
}

}  // namespace rh::model
