// One optimisation step (docs/architecture.md, "The train step"): batch ->
// forward -> loss -> backward (the strategy's gradient hooks run inside) ->
// strategy sync -> optimizer step, with gradient accumulation windows.
//
// Shapes: B = batch, C = classes, T = tokens, V = vocabulary.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "model/Model.hpp"

namespace rh::data {
struct Batch;
class BatchPreprocessor;
}  // namespace rh::data
namespace rh::host {
class StrategyInstance;
}

namespace rh::model {
class ClassifierLoss;
}

namespace rh::optim {
class GradScaler;
class OptimWrapper;
}  // namespace rh::optim

namespace rh::lifecycle {

class ModelAccess;
class World;
struct RankFlags;

// Where a batch falls in its gradient-accumulation window: windows of
// `accumulative_counts` batches start at the epoch's start and are cut short
// by the end of the epoch or (iteration-based training) by max_iters; the
// loss is divided by the window's real length (MMEngine's rule). A run
// resumed inside a window (its checkpoint was written with another global
// batch, so its position converts to a batch inside one) begins with the
// rest of that window: the batches before `first_inner` were never run
// here, so the window is cut short at its start too and divided by what is
// left of it.
struct AccumulationWindow {
  int64_t length = 1;      // batches in this window that this run takes
  bool last_batch = true;  // this batch ends it: the optimizer steps
};
// `inner_done`/`iters_done`: batches done in the epoch / in the run before
// this one; `max_iters` 0 for epoch-based training; `first_inner`: the
// batch of this epoch the process began at (0, or where a resume put it).
AccumulationWindow accumulation_window(int64_t accumulative_counts, int64_t inner_done,
                                       int64_t batches_per_epoch, int64_t iters_done,
                                       int64_t max_iters, int64_t first_inner = 0);

// What the model computes from: `input` on `device`, floating-point inputs
// cast to the strategy's input_dtype trait (inputs_to_half) when it has one.
at::Tensor model_input(const at::Tensor& input, c10::Device device,
                       std::optional<at::ScalarType> dtype);
// Logits in float32 (the loss and the metrics), whatever the compute dtype.
at::Tensor float_logits(const at::Tensor& logits);
// The strategy's input_dtype trait, nullopt when it has none.
std::optional<at::ScalarType> input_dtype(const host::StrategyInstance& strategy);

// AmpOptimWrapper's part of the step (MMEngine's optim_context + backward +
// step): forward and loss under autocast in `dtype`; the loss multiplied by
// the scaler's scale before backward; after the gradient sync every
// gradient the optimizer reads unscaled (before clip_grad), and the step
// skipped on every rank when any rank has an inf or nan (one all-reduce);
// the scale updated once per optimizer step.
struct MixedPrecision {
  at::ScalarType dtype = at::kBFloat16;
  optim::GradScaler* scaler = nullptr;  // the runner's (checkpointed with the run)
};

// What an iteration's tensors held, bytes (the memory/* metrics): each
// storage counted once, however many tensors view it; -1 where the host
// cannot tell. A strategy's own buffers (masters, flat gradients, gathered
// units, communication) are in none of the first three: it reports them in
// its own metrics.
struct MemorySplit {
  int64_t params = -1;       // the model's parameters, after the step (a sharded one: its shard)
  int64_t grads = -1;        // the gradients the optimizer read (none: not stepped)
  int64_t optimizer = -1;    // the optimizer's state, after the step
  int64_t activations = -1;  // what forward left for backward (its tensors' growth), the
                             // largest over the iteration's forwards; CPU: counted tensors
                             // (TensorMemory.hpp); CUDA: the caching allocator's
  int64_t peak = -1;         // the most tensor bytes held at once in the iteration
};

struct StepResult {
  double loss = 0;              // mean over ranks
  double grad_norm = -1;        // before clipping; -1 when the optimizer did not step or clip
  bool skipped = false;         // this optimizer step was skipped (an inf or nan gradient)
  bool skipped_by_amp = false;  // by AmpOptimWrapper's check (else the strategy's ShouldStep)
  double loss_scale = 1;        // what the loss was multiplied by before backward (LossScale)
  int ranks_signalled = 0;      // ranks that had a stop signal when the step began
  int ranks_save_finished = 0;  // ranks whose part of a background save was over by then
  MemorySplit memory;
};

class TensorParallelPlan;

class TrainStep {
 public:
  // `strategy_grads`: with a strategy that gives the optimizer its own
  // tensors (OptimizerParams), each one's gradient in the strategy's memory,
  // in the optimizer's parameter order; empty otherwise.
  // `amp`: AmpOptimWrapper's autocast dtype and scaler, nullopt without it.
  // `micro_batches`: each batch is cut into this many parts (as even as can
  // be, at most one per example), each run forward and backward with its
  // share of the loss, the strategy's gradient sync only after the last (an
  // elastic restart keeping the global batch by accumulation,
  // ElasticBatch.hpp).
  TrainStep(model::Model& model, ModelAccess& access, optim::OptimWrapper& optim,
            host::StrategyInstance& strategy, World& world, c10::Device device,
            std::vector<at::Tensor> strategy_grads = {},
            std::optional<MixedPrecision> amp = std::nullopt, int micro_batches = 1);
  // The data_preprocessor (normalisation, batch augments) each batch goes
  // through before the model, and the classifier's loss (model.head.loss);
  // null: the batch as it is, cross entropy.
  void set_inputs(std::shared_ptr<const data::BatchPreprocessor> preprocessor,
                  std::shared_ptr<const model::ClassifierLoss> loss);
  // A strategy's tensor-parallel plan, whose group sums the gradient norm's
  // parts (null: none).
  void set_tensor_parallel(const TensorParallelPlan* tp) { tp_ = tp; }
  // `iteration`: the run's iteration this batch is, from 1, as the logs
  // number it (messages, RH_FAULT_INJECT amp_inf_grad).
  StepResult run(const data::Batch& batch, AccumulationWindow window, RankFlags flags,
                 int64_t iteration);

 private:
  // AmpOptimWrapper after the gradient sync: unscales, agrees across ranks
  // on an inf or nan, updates the scale; true when the step must be skipped.
  bool unscale_and_check(int64_t iteration);

  model::Model& model_;
  ModelAccess& access_;
  optim::OptimWrapper& optim_;
  host::StrategyInstance& strategy_;
  World& world_;
  c10::Device device_;
  std::vector<at::Tensor> strategy_grads_;
  std::optional<at::ScalarType> input_dtype_;  // the strategy's input_dtype trait
  std::vector<model::NamedTensor> params_;     // the model's, to drop their gradients
  std::optional<MixedPrecision> amp_;
  int micro_batches_ = 1;
  std::shared_ptr<const data::BatchPreprocessor> preprocessor_;
  std::shared_ptr<const model::ClassifierLoss> loss_;
  // Test-only (RH_FAULT_INJECT=amp_inf_grad:<rank>:<iteration>,...): the
  // iterations (from 1) at which this rank puts an inf into its first
  // non-empty gradient before unscaling.
  std::vector<int64_t> inject_inf_at_;
  const TensorParallelPlan* tp_ = nullptr;
};

}  // namespace rh::lifecycle
