#include "lifecycle/TrainStep.hpp"

#include <torch/torch.h>

#include <algorithm>

#include "data/DataLoader.hpp"
#include "lifecycle/Evaluator.hpp"
#include "lifecycle/World.hpp"
#include "model/Model.hpp"
#include "optim/OptimWrapper.hpp"
#include "plugins/ComponentFactory.hpp"
#include "plugins/HostError.hpp"

namespace rh::lifecycle {
namespace {

void check(const host::StrategyInstance& s, const char* step, rh_Error* err) {
  host::throw_if_error(err, s.what() + " " + step);
}

}  // namespace

AccumulationWindow accumulation_window(int64_t n, int64_t inner_done, int64_t batches_per_epoch,
                                       int64_t iters_done, int64_t max_iters) {
  const int64_t window_start = inner_done - inner_done % n;  // within the epoch
  int64_t length = std::min<int64_t>(n, batches_per_epoch - window_start);
  if (max_iters > 0) length = std::min<int64_t>(length, max_iters - (iters_done - inner_done % n));
  return {length, inner_done + 1 == window_start + length};
}

TrainStep::TrainStep(model::Model& model, optim::OptimWrapper& optim,
                     host::StrategyInstance& strategy, World& world, c10::Device device)
    : model_(model), optim_(optim), strategy_(strategy), world_(world), device_(device) {}

StepResult TrainStep::run(const data::Batch& batch, AccumulationWindow window,
                          bool stop_signalled) {
  const bool step = window.last_batch;
  model_.train(true);
  at::Tensor input = batch.input.to(device_);    // (B, F) / (B, 3, H, W) / (B, T)
  at::Tensor target = batch.target.to(device_);  // (B) / (B, T)
  at::Tensor logits = model_.forward(input);     // (B, C) / (B, T, V)
  at::Tensor loss = Evaluator::loss(model_.task(), logits, target);
  // The logged loss is the mean over ranks: its all-reduce runs while we do
  // backward and the step (read at the end, no round trip of its own; every
  // rank issues it here, before the strategy's collectives). It also carries
  // this rank's stop signal, so all ranks learn of one together.
  PendingMean mean_loss = world_.start_mean(loss, stop_signalled);
  const auto& vt = strategy_.vtable();
  if (vt.BeforeBackward)
    check(strategy_, "BeforeBackward", vt.BeforeBackward(strategy_.handle(), step ? 1 : 0));
  (window.length == 1 ? loss : loss / static_cast<double>(window.length)).backward();
  if (vt.SyncGradients)
    check(strategy_, "SyncGradients", vt.SyncGradients(strategy_.handle(), step ? 1 : 0));
  StepResult result;
  if (step) {
    result.grad_norm = optim_.step();
    if (vt.AfterOptimizerStep)
      check(strategy_, "AfterOptimizerStep", vt.AfterOptimizerStep(strategy_.handle()));
    optim_.zero_grad();
  }
  const auto [mean, ranks_signalled] = mean_loss.get();
  result.loss = mean;
  result.ranks_signalled = ranks_signalled;
  return result;
}

}  // namespace rh::lifecycle
