#include "lifecycle/JobComponents.hpp"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include "abi/HostError.hpp"
#include "config/ConfigNode.hpp"
#include "lifecycle/TensorParallelPlan.hpp"
#include "model/Model.hpp"
#include "optim/OptimSchema.hpp"
#include "rh/cpp/torch_compat.hpp"

namespace rh::lifecycle {
namespace {

// The host honours every trait it declares, or refuses the strategy here
// (before anything runs): a trait silently ignored would make a plugin look
// right and be wrong.
void check_traits(const host::StrategyInstance& strategy) {
  const rh_StrategyTraits t = strategy.traits();
  const bool unit_params = strategy.has_unit_params();
  const bool optimizer_params = strategy.has_optimizer_params();
  if (t.load_phase == RH_LOAD_AFTER_WRAP && !unit_params)
    throw host::HostError(
        RH_ERROR_UNIMPLEMENTED,
        strategy.what() +
            " declares load_phase after_wrap (weights loaded through the strategy) but has no "
            "UnitParams entry (ABI 1.3) to take them: the host would copy them into the model's "
            "parameters behind the strategy; implement UnitParams or declare before_wrap");
  // sharded_checkpoint needs both entries; the message names the missing
  // ones. UnitParams too when the model is whole on every rank: the host
  // cannot tell a model that is whole from one that is sharded, and a
  // strategy whose ranks hold it whole implements UnitParams in a few lines
  // (GATHER and RELEASE do nothing, ADOPT keeps the values: docs/plugins.md).
  if (t.sharded_checkpoint != 0 && (!unit_params || !optimizer_params)) {
    const bool both = !unit_params && !optimizer_params;
    std::string missing = !optimizer_params ? "OptimizerParams" : "";
    if (!unit_params) missing += std::string(missing.empty() ? "" : " and ") + "UnitParams";
    std::string why;
    if (!optimizer_params) why = "the host saves the shards OptimizerParams gives";
    if (!unit_params)
      why += std::string(why.empty() ? "" : " and ") +
             "gathers the model for rank 0 through UnitParams (it cannot tell a model every "
             "rank holds whole from a sharded one; with a whole model GATHER and RELEASE do "
             "nothing and ADOPT keeps the values)";
    throw host::HostError(RH_ERROR_UNIMPLEMENTED,
                          strategy.what() +
                              " declares sharded_checkpoint (every rank writes its own shard) "
                              "without the entr" +
                              (both ? "ies " : "y ") + missing + " (ABI 1.3): " + why);
  }
  if (t.sharded_model_state != 0 && t.sharded_checkpoint == 0)
    throw host::HostError(RH_ERROR_UNIMPLEMENTED,
                          strategy.what() +
                              " declares sharded_model_state without sharded_checkpoint: the "
                              "parameters' shards are saved in the per-rank optimizer files");
  if (t.load_from_root != 0 && (t.load_phase != RH_LOAD_AFTER_WRAP || !unit_params))
    throw host::HostError(RH_ERROR_UNIMPLEMENTED,
                          strategy.what() +
                              " declares load_from_root without load_phase after_wrap and "
                              "UnitParams: only weights loaded through the strategy come from "
                              "rank 0 alone");
  if (t.input_dtype.code != 0 || t.input_dtype.bits != 0) {
    const bool floating = (t.input_dtype.code == kDLFloat || t.input_dtype.code == kDLBfloat) &&
                          t.input_dtype.lanes == 1;
    if (!floating)
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            strategy.what() +
                                " declares an input_dtype that is not a floating-point "
                                "type (DLPack code " +
                                std::to_string(t.input_dtype.code) + ", " +
                                std::to_string(t.input_dtype.bits) + " bits)");
  }
}

// AmpOptimWrapper autocasts forward and scales the loss; a strategy that
// computes in a precision of its own (precision_keys, ABI 1.8) would cast
// the model and scale the loss a second time. Refused before anything runs,
// quoting the strategy's settings.
void check_precision(const host::StrategyInstance& strategy, const config::Node& job) {
  // Said at start-up, by every rank as it says its strategy line: what
  // `runner-host parity` shows of a strategy's precision.
  const rh_StringView own = strategy.traits().precision_keys;
  if (own.data != nullptr && own.size != 0)
    spdlog::info("{} computes in a precision of its own: {}", strategy.what(),
                 std::string(own.data, own.size));
  const config::Node* optim_wrapper = job.find("optim_wrapper");
  if (optim_wrapper == nullptr) return;
  const std::optional<optim::AmpSettings> amp = optim::read_amp_settings(*optim_wrapper);
  if (!amp) return;
  const rh_StringView keys = strategy.traits().precision_keys;
  if (keys.data == nullptr || keys.size == 0) {
    // A strategy of ABI 1.7 or older cannot declare precision_keys; one
    // that casts the inputs itself (input_dtype) owns precision.
    const DLDataType cast = strategy.traits().input_dtype;
    if (cast.code != 0 || cast.bits != 0)
      throw config::ConfigError(amp->type_location, amp->type_path,
                                "AmpOptimWrapper cannot run beside " + strategy.what() +
                                    ", which casts the inputs to a precision of its own "
                                    "(input_dtype trait): use its mixed precision with type: "
                                    "OptimWrapper");
    return;
  }
  std::string quoted;  // "a: x, b: y" -> "strategy.a: x, strategy.b: y"
  const std::string text(keys.data, keys.size);
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find(", ", pos);
    if (end == std::string::npos) end = text.size();
    quoted += (quoted.empty() ? "strategy." : ", strategy.") + text.substr(pos, end - pos);
    pos = end + 2;
  }
  throw config::ConfigError(
      amp->type_location, amp->type_path,
      "AmpOptimWrapper (autocast and loss scaling in the host) cannot run beside " +
          strategy.what() + ", which computes in a precision of its own here (" + quoted +
          "): choose one. Keep the strategy's with type: OptimWrapper, or keep "
          "AmpOptimWrapper and turn the strategy's off");
}

// Clipping by the norm needs every rank's share of it (ReduceGradNorm): a
// strategy that hands the optimizer its own tensors (OptimizerParams)
// without it is refused rather than clipped by this rank's share.
void check_clip_grad(const host::StrategyInstance& strategy, const config::Node& job) {
  const config::Node* clip = job.find_path("optim_wrapper.clip_grad");
  if (clip == nullptr || clip->is_null() || !strategy.has_optimizer_params() ||
      strategy.has_reduce_grad_norm())
    return;
  throw config::ConfigError(
      clip->location(), clip->path(),
      strategy.what() +
          " hands the optimizer its own tensors (OptimizerParams) and has no ReduceGradNorm "
          "(ABI 1.3): clip_grad needs the gradient norm over every rank's shards");
}

}  // namespace

void check_amp_on_cpu(const config::Node& job, bool on_cpu) {
  const config::Node* optim_wrapper = job.find("optim_wrapper");
  if (!on_cpu || optim_wrapper == nullptr) return;
  const std::optional<optim::AmpSettings> amp = optim::read_amp_settings(*optim_wrapper);
  // On the CPU, AmpOptimWrapper autocasts to bfloat16 unless dtype says float16.
  if (!amp || amp->dtype != optim::AmpDtype::Float16 || compat::cpu_autocast_supports(at::kHalf))
    return;
  throw config::ConfigError(amp->dtype_location, amp->dtype_path,
                            std::string("AmpOptimWrapper in float16 on the CPU: LibTorch ") +
                                TORCH_VERSION +
                                " has no float16 autocast (or matrix multiply) on the CPU; use "
                                "dtype: bfloat16, or train on a GPU");
}

void check_model(const config::Node& job, const std::string& job_dir,
                 host::StrategyInstance& strategy, int world_size) {
  const config::Node* model = job.find("model");
  if (model == nullptr) return;
  const config::Node* type = model->find("type");
  std::unique_ptr<model::Model> shapes;
  if (type == nullptr || type->as_string() != "torchscript")
    shapes = model::build_model_shapes(*model, job_dir);
  TensorParallelPlan::check(strategy, job, shapes.get(), world_size);
}

JobComponents create_components(host::ComponentFactory& factory, const config::Node& job) {
  JobComponents c;
  c.strategy = factory.create_strategy(*job.find("strategy"));
  check_traits(*c.strategy);
  check_precision(*c.strategy, job);
  check_clip_grad(*c.strategy, job);
  // A LibTorch without CUDA runs on the CPU whatever the strategy picks.
  check_amp_on_cpu(job, !torch::cuda::is_available());
  if (const config::Node* hooks = job.find("hooks"))
    for (const auto& h : hooks->seq_items()) c.hooks.push_back(factory.create_hook(*h));
  c.checkpoint_io = factory.create_checkpoint_io(*job.find("checkpoint_io"));
  return c;
}

}  // namespace rh::lifecycle
