#include "lifecycle/TrainStep.hpp"

#include <ATen/DLConvertor.h>
#include <ATen/record_function.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <unordered_set>

#include "abi/ComponentInstances.hpp"
#include "abi/HostError.hpp"
#include "common/FaultInjection.hpp"
#include "data/BatchPreprocessor.hpp"
#include "data/DataLoader.hpp"
#include "lifecycle/Evaluator.hpp"
#include "lifecycle/ModelAccess.hpp"
#include "lifecycle/TensorMemory.hpp"
#include "lifecycle/TensorParallelPlan.hpp"
#include "lifecycle/World.hpp"
#include "model/ClassifierLoss.hpp"
#include "model/Model.hpp"
#include "optim/GradScaler.hpp"
#include "optim/OptimWrapper.hpp"
#include "rh/cpp/torch_compat.hpp"

namespace rh::lifecycle {
at::Tensor model_input(const at::Tensor& input, c10::Device device,
                       std::optional<at::ScalarType> dtype) {
  at::Tensor x = input.to(device);
  if (dtype && at::isFloatingType(x.scalar_type()) && x.scalar_type() != *dtype) x = x.to(*dtype);
  return x;
}

at::Tensor float_logits(const at::Tensor& logits) {
  const at::ScalarType t = logits.scalar_type();
  return t == at::kHalf || t == at::kBFloat16 ? logits.to(at::kFloat) : logits;
}

std::optional<at::ScalarType> input_dtype(const host::StrategyInstance& strategy) {
  const DLDataType t = strategy.traits().input_dtype;
  if (t.code == 0 && t.bits == 0) return std::nullopt;
  return at::toScalarType(t);
}

namespace {

// The bytes of the storages under `tensors`, each once (views of one
// buffer, tied weights); a storage without memory (a freed shard, meta)
// counts nothing.
int64_t storage_bytes(const std::vector<at::Tensor>& tensors) {
  std::unordered_set<const c10::StorageImpl*> seen;
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !t.has_storage() || t.is_meta()) continue;
    const c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
    if (s->data() == nullptr || !seen.insert(s).second) continue;
    bytes += static_cast<int64_t>(s->nbytes());
  }
  return bytes;
}

}  // namespace

AccumulationWindow accumulation_window(int64_t n, int64_t inner_done, int64_t batches_per_epoch,
                                       int64_t iters_done, int64_t max_iters, int64_t first_inner) {
  const int64_t aligned = inner_done - inner_done % n;  // the window's start, within the epoch
  int64_t end = std::min<int64_t>(aligned + n, batches_per_epoch);
  if (max_iters > 0) end = std::min<int64_t>(end, inner_done + (max_iters - iters_done));
  const int64_t start = std::max<int64_t>(aligned, first_inner);
  return {end - start, inner_done + 1 == end};
}

TrainStep::TrainStep(model::Model& model, ModelAccess& access, optim::OptimWrapper& optim,
                     host::StrategyInstance& strategy, World& world, c10::Device device,
                     std::vector<at::Tensor> strategy_grads, std::optional<MixedPrecision> amp,
                     int micro_batches)
    : model_(model),
      access_(access),
      optim_(optim),
      strategy_(strategy),
      world_(world),
      device_(device),
      strategy_grads_(std::move(strategy_grads)),
      input_dtype_(input_dtype(strategy)),
      params_(model.named_parameters()),
      amp_(amp),
      micro_batches_(std::max(1, micro_batches)) {
  // RH_FAULT_INJECT entries amp_inf_grad:<rank>:<iteration>, read once.
  if (!amp_) return;
  const std::string mine = "amp_inf_grad:" + std::to_string(world.rank());
  for (const std::string& value : common::fault_values(mine)) {
    char* end = nullptr;
    const long long at = std::strtoll(value.c_str(), &end, 10);
    if (end == value.c_str() || *end != '\0' || at < 1)
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            "RH_FAULT_INJECT: '" + mine + ":" + value +
                                "': expected amp_inf_grad:<rank>:<iteration, from 1>");
    inject_inf_at_.push_back(at);
  }
}

void TrainStep::set_inputs(std::shared_ptr<const data::BatchPreprocessor> preprocessor,
                           std::shared_ptr<const model::ClassifierLoss> loss) {
  preprocessor_ = std::move(preprocessor);
  loss_ = std::move(loss);
}

StepResult TrainStep::run(const data::Batch& batch, AccumulationWindow window, RankFlags flags,
                          int64_t iteration) {
  const bool step = window.last_batch;
  model_.train(true);
  mark_cpu_tensor_peak();
  // The data_preprocessor's batch: normalised on the device and, with batch
  // augments, mixed, its targets soft scores (B, C).
  at::Tensor batch_input = batch.input, batch_target = batch.target;
  if (preprocessor_)
    std::tie(batch_input, batch_target) = preprocessor_->train(batch, device_, iteration);
  // The batch's parts for forward and backward: one, or micro_batches_ (an
  // elastic restart keeping the global batch by accumulation), each weighted
  // by its share of the batch, so that a mean loss's gradient is the whole
  // batch's.
  // One part (every run but such a restart) takes the batch as it is, with
  // nothing allocated for the parts on this per-step path.
  const int64_t rows = batch_input.size(0);
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(micro_batches_, rows));
  std::vector<int64_t> sizes;
  std::vector<at::Tensor> inputs, targets;
  if (parts > 1) {
    for (int64_t j = 0; j < parts; ++j) sizes.push_back(rows / parts + (j < rows % parts ? 1 : 0));
    inputs = batch_input.split_with_sizes(sizes);
    targets = batch_target.split_with_sizes(sizes);
  }
  // The strategy's entries through its instance (abi/ComponentInstances.hpp),
  // which applies the default of an absent one.
  StepResult result;
  std::optional<PendingMean> mean_loss;
  at::Tensor earlier_parts;  // the weighted losses of the parts before the last (detached)
  for (int64_t j = 0; j < parts; ++j) {
    const bool last_part = j + 1 == parts;
    const double share =
        parts == 1 ? 1.0
                   : static_cast<double>(sizes[static_cast<size_t>(j)]) / static_cast<double>(rows);
    const at::Tensor& part_input = parts == 1 ? batch_input : inputs[static_cast<size_t>(j)];
    const at::Tensor& part_target = parts == 1 ? batch_target : targets[static_cast<size_t>(j)];
    // Named ranges (RECORD_USER_SCOPE): the phases in a profiler trace (hook
    // `profiler`); without a profiler each costs a check of the callbacks.
    at::Tensor loss;
    const int64_t before_forward = tensor_bytes(device_);
    {
      RECORD_USER_SCOPE("rh::forward");
      // AmpOptimWrapper: forward and loss under autocast; backward after it
      // (the casts' backward runs in the dtypes forward chose).
      std::optional<compat::AutocastScope> autocast;
      if (amp_) autocast.emplace(device_.type(), amp_->dtype);
      at::Tensor input =
          model_input(part_input, device_, input_dtype_);       // (B, F) / (B, 3, H, W) / (B, T)
      at::Tensor target = part_target.to(device_);              // (B) / (B, T)
      at::Tensor logits = float_logits(model_.forward(input));  // (B, C) / (B, T, V)
      loss = loss_ ? (*loss_)(logits, target) : Evaluator::loss(model_.task(), logits, target);
    }
    // What the forward left alive (saved for backward, the loss): its
    // temporaries are freed by now, the logits too unless backward needs them.
    if (const int64_t after = tensor_bytes(device_); before_forward >= 0 && after >= 0)
      result.memory.activations = std::max(result.memory.activations, after - before_forward);
    if (last_part) {
      // The logged loss is the mean over ranks: its all-reduce runs while we
      // do backward and the step (read at the end, no round trip of its own;
      // every rank issues it here, before the strategy's collectives of the
      // last part). It also carries this rank's flags (a stop signal, a
      // background save over), so all ranks learn of them together.
      at::Tensor logged = loss;
      if (parts > 1) logged = earlier_parts + loss.detach() * share;
      mean_loss.emplace(world_.start_mean(logged, flags));
    } else {
      at::Tensor weighted = loss.detach() * share;
      earlier_parts = earlier_parts.defined() ? earlier_parts + weighted : weighted;
    }
    const bool sync = step && last_part;
    {
      RECORD_USER_SCOPE("rh::backward");
      strategy_.before_backward(sync);
      // fp16: the strategy's loss scale (it divides it out of its gradients).
      result.loss_scale = strategy_.loss_scale();
      if (amp_) {
        // A strategy of ABI 1.7 or older cannot declare precision_keys: one
        // that scales the loss itself is found here, before a wrong step.
        if (result.loss_scale != 1)
          throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                                "AmpOptimWrapper cannot run beside " + strategy_.what() +
                                    ", which scales the loss itself (LossScale " +
                                    std::to_string(result.loss_scale) +
                                    "): use its own mixed precision with type: OptimWrapper");
        result.loss_scale = amp_->scaler->scale();
      }
      const double divisor = static_cast<double>(window.length) / share;
      at::Tensor objective = divisor == 1 ? loss : loss / divisor;
      if (result.loss_scale != 1) objective = objective * result.loss_scale;
      access_.begin_backward();
      objective.backward();
      access_.end_backward();  // POST_BACKWARD for the units that got no gradient
    }
    if (strategy_.has_sync_gradients()) {
      RECORD_USER_SCOPE("rh::sync");
      strategy_.sync_gradients(sync);
    }
  }
  if (step && amp_) {
    RECORD_USER_SCOPE("rh::unscale");
    result.skipped = result.skipped_by_amp = unscale_and_check(iteration);
  }
  if (step && !result.skipped) result.skipped = !strategy_.should_step();
  if (step && !result.skipped) {
    // The strategy's gradients are its memory: bound (not copied) as the
    // optimizer tensors' grads; zero_grad drops only the binding.
    if (!strategy_grads_.empty()) optim_.bind_grads(strategy_grads_);
    std::vector<at::Tensor> grads;
    for (const auto& p : optim_.params()) grads.push_back(p.param.grad());
    result.memory.grads = storage_bytes(grads);
    {
      RECORD_USER_SCOPE("rh::optimizer_step");
      // Sharded gradients: the strategy's ranks' shares, and a
      // tensor-parallel group's blocks, summed.
      std::function<double(double, double)> reduce_norm;
      if (strategy_.has_reduce_grad_norm() || tp_ != nullptr)
        reduce_norm = [this](double norm_type, double local) {
          if (tp_ != nullptr) local = tp_->reduce_norm(norm_type, local);
          return strategy_.has_reduce_grad_norm() ? strategy_.reduce_grad_norm(norm_type, local)
                                                  : local;
        };
      result.grad_norm = optim_.step(reduce_norm);
    }
    if (strategy_.has_after_optimizer_step()) {
      RECORD_USER_SCOPE("rh::after_optimizer_step");
      strategy_.after_optimizer_step();
    }
  }
  if (step) {
    std::vector<at::Tensor> params;
    for (const auto& p : params_) params.push_back(p.tensor);
    result.memory.params = storage_bytes(params);
    result.memory.optimizer = storage_bytes(optim_.state_in_memory());
  }
  if (device_.is_cpu() && counting_cpu_tensor_memory())
    result.memory.peak = cpu_tensor_peak_bytes();
  if (step) {
    RECORD_USER_SCOPE("rh::zero_grad");
    optim_.zero_grad();
    // The optimizer's tensors are the strategy's; the model's own gradients
    // (what backward wrote, what SyncGradients read) are dropped here, as
    // zero_grad drops them when the optimizer holds the model's parameters.
    if (!strategy_grads_.empty())
      for (auto& p : params_)
        if (p.tensor.grad().defined()) p.tensor.mutable_grad() = at::Tensor();
    access_.end_gradient_borrows();
  }
  RECORD_USER_SCOPE("rh::loss_mean");  // waits for the logged loss's all-reduce
  const auto [mean, counts] = mean_loss->get();
  result.loss = mean;
  result.ranks_signalled = counts.stop_signalled;
  result.ranks_save_finished = counts.save_finished;
  return result;
}

bool TrainStep::unscale_and_check(int64_t iteration) {
  // The gradients the optimizer reads: the strategy's (OptimizerParams), or
  // the parameters' own (under ddp, views of its reduced buckets).
  std::vector<at::Tensor> grads;
  if (!strategy_grads_.empty()) {
    grads = strategy_grads_;
  } else {
    grads.reserve(optim_.params().size());
    for (const auto& p : optim_.params())
      if (p.param.grad().defined()) grads.push_back(p.param.grad());
  }
  if (std::find(inject_inf_at_.begin(), inject_inf_at_.end(), iteration) != inject_inf_at_.end()) {
    const auto target =
        std::find_if(grads.begin(), grads.end(), [](const at::Tensor& g) { return g.numel() > 0; });
    if (target != grads.end()) {
      spdlog::warn("RH_FAULT_INJECT amp_inf_grad: an inf in rank {}'s gradient at iteration {}",
                   world_.rank(), iteration);
      torch::NoGradGuard no_grad;
      target->as_strided({1}, {1}).fill_(std::numeric_limits<float>::infinity());
    }
  }
  const double scale = amp_->scaler->scale();
  at::Tensor found = compat::unscale_and_find_inf(grads, 1.0 / scale);
  world_.sum(found);  // every rank skips when any rank found one
  const bool skip = found.item<float>() > 0;
  try {
    amp_->scaler->update(skip, iteration);
  } catch (const std::runtime_error& e) {
    throw host::HostError(RH_ERROR_FAILED_PRECONDITION, e.what());
  }
  return skip;
}

}  // namespace rh::lifecycle
