// torchscript: a module saved with torch.jit.save / ScriptModule.save,
// trained as it is (the file's weights; the seed does not apply).
//
// Parameters: named_parameters(recurse) of the module, named as TorchScript
// names them ("fc1.weight"), requires_grad as saved. Units: the parameters
// directly on the root module as unit "root" (first, where TorchScript lists
// them), then one unit per top-level child that holds parameters, named as
// the child, in the module's order (children without parameters, such as
// activations, are not units). The forward is opaque: the unit callback sees
// PreForward for every unit in order before module.forward(input), and
// PostForward for every unit in order after it.
#include <spdlog/spdlog.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <filesystem>
#include <optional>
#include <stdexcept>

#include "model/ConfigFields.hpp"
#include "model/ModelBuilders.hpp"
#include "model/ParamRegistry.hpp"
#include "model/TensorParallel.hpp"

// jit/codegen/fuser/interface.h is not among LibTorch's installed headers;
// libtorch_cpu exports both functions (TORCH_API) with this signature in
// 1.13 and 2.x.
namespace torch::jit {
TORCH_API bool canFuseOnCPU();
TORCH_API void overrideCanFuseOnCPU(bool value);
}  // namespace torch::jit

namespace rh::model {
namespace {

// No NNC fusion on the CPU, as in a LibTorch built without LLVM (Debian's
// 1.13). A LibTorch built with LLVM (Debian 13's 2.6) fuses on the CPU by
// default, and training then compiles kernels through LLVM again and again:
// each fusion group is guarded by its inputs' shapes, strides and
// requires_grad, the backward graphs have executors of their own, and every
// failed guard re-specialises (up to 12 times a graph) with fresh compiles;
// 30 SGD steps of a tiny scripted MLP took 0.5 s on 1.13 and had not ended
// after 10 minutes on 2.6. Without CPU fusion the profiling executor still
// runs (autodiff, graph optimisations) and 2.6 trains at 1.13's speed
// (ModelContractTest, TorchScriptModelTest.StepTimeStaysFlat). CUDA fusion
// is left as the LibTorch has it. Process-wide, set before the first
// forward (the executor decides fusion at the second call).
void train_without_cpu_fusion() {
  if (torch::jit::canFuseOnCPU()) {
    torch::jit::overrideCanFuseOnCPU(false);
    spdlog::debug("torchscript: NNC fusion on the CPU turned off for training");
  }
}

std::string first_line(const std::string& text) {
  const size_t end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

class TorchScriptModel final : public Model {
 public:
  TorchScriptModel(torch::jit::Module module, Task task, std::optional<int64_t> num_classes)
      : module_(std::move(module)), task_(task), num_classes_(num_classes) {
    Unit root{"root", {}, {}};
    for (const auto& p : module_.named_parameters(/*recurse=*/false)) {
      root.param_names.push_back(p.name);
    }
    if (!root.param_names.empty()) units_.push_back(root);
    for (const auto& child : module_.named_children()) {
      Unit unit{child.name, {}, {}};
      for (const auto& p : child.value.named_parameters(/*recurse=*/true)) {
        unit.param_names.push_back(child.name + "." + p.name);
      }
      if (!unit.param_names.empty()) units_.push_back(unit);
    }
  }

  at::Tensor forward(const at::Tensor& input) override {
    const int count = static_cast<int>(units_.size());
    for (int unit = 0; unit < count; ++unit) enter_unit(unit);
    // Activation checkpointing: the forward is opaque, so it recomputes as
    // one piece (the units are not run one by one).
    const auto& recomputed = recomputed_units();
    const auto run = [this](const at::Tensor& x) { return module_.forward({x}).toTensor(); };
    at::Tensor output = std::find(recomputed.begin(), recomputed.end(), true) != recomputed.end()
                            ? run_recomputed(input, run)
                            : run(input);
    // Opaque: every unit's PRE_BACKWARD fires on the output's gradient, in
    // unit order, before any of the module's backward runs.
    for (int unit = 0; unit < count; ++unit) output = exit_unit(unit, output);
    if (num_classes_ && task_ == Task::Classification &&
        (output.dim() != 2 || output.size(1) != *num_classes_)) {
      throw std::runtime_error("torchscript: expected logits (B, " + std::to_string(*num_classes_) +
                               ") (model.num_classes), got " + c10::str(output.sizes()));
    }
    return output;
  }

  bool units_run_separately() const override { return false; }
  std::vector<TpSplit> parallelize(const TensorParallel&) override {
    throw std::invalid_argument(
        "is a TorchScript module, whose forward is opaque: the host cannot put a "
        "tensor-parallel plan's collectives between its layers");
  }

  std::vector<NamedTensor> named_parameters() override {
    std::vector<NamedTensor> params;
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
      params.push_back(NamedTensor{p.name, p.value});
    }
    return params;
  }

  std::vector<NamedTensor> named_buffers() override {
    std::vector<NamedTensor> buffers;
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) {
      buffers.push_back(NamedTensor{b.name, b.value});
    }
    return buffers;
  }

  std::vector<Unit> units() const override { return units_; }
  void train(bool on) override { module_.train(on); }
  void to(const at::Device& device) override { module_.to(device); }
  Task task() const override { return task_; }

 private:
  torch::jit::Module module_;
  Task task_;
  std::optional<int64_t> num_classes_;
  std::vector<Unit> units_;
};

}  // namespace

std::unique_ptr<Model> make_torchscript(const config::Node& node, const std::string& job_dir) {
  const ConfigFields cfg(node);
  const std::filesystem::path written = cfg.string("path");
  const std::string resolved =
      (written.is_absolute() ? written : std::filesystem::path(job_dir) / written)
          .lexically_normal()
          .string();
  const std::string task_name = cfg.string("task", "classification");
  if (task_name != "classification" && task_name != "language_model") {
    cfg.fail("task", "expected one of classification, language_model, got '" + task_name + "'");
  }
  const Task task = task_name == "language_model" ? Task::LanguageModel : Task::Classification;
  std::optional<int64_t> num_classes;
  if (cfg.has("num_classes")) num_classes = cfg.integer("num_classes");

  std::string reason;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(resolved, ec)) {
    reason = std::filesystem::exists(resolved, ec) ? "not a regular file" : "no such file";
  } else {
    try {
      train_without_cpu_fusion();
      // Shapes only (build_model_shapes): the module's tensors go to the
      // meta device as they are read, so no storage is kept.
      const c10::optional<at::Device> device = ParamRegistry::ShapesOnlyScope::active()
                                                   ? c10::optional<at::Device>(at::kMeta)
                                                   : c10::nullopt;
      return std::make_unique<TorchScriptModel>(torch::jit::load(resolved, device), task,
                                                num_classes);
    } catch (const c10::Error& e) {
      reason = e.what_without_backtrace();
    } catch (const std::exception& e) {
      reason = e.what();
    }
  }
  cfg.fail("path", "cannot load TorchScript module '" + resolved + "': " + first_line(reason));
}

}  // namespace rh::model
