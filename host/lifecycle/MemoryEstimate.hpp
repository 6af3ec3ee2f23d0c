// `runner-host --config job.yaml --estimate-memory [--nproc-per-node N]
// [--nnodes M]`: what each rank of the job would keep, without allocating
// the model (DeepSpeed's estimate_zero3_model_states_mem_needs, Accelerate's
// `estimate-memory`). The model is built on the meta device
// (model::build_model_shapes: sizes, units, frozen parameters); the
// strategy says what a rank keeps of it (EstimateMemory, ABI 1.9: its
// parameters, gradients, the elements its optimizer steps, masters,
// communication buffers, gathered units); the host adds the optimizer's
// state per element (optim_wrapper.optimizer) and the activations of a
// built-in model's forward at the job's batch (model/ActivationEstimate.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace rh::config {
class Node;
}
namespace rh::host {
class StrategyInstance;
}

namespace rh::lifecycle {

struct MemoryEstimateOptions {
  int world_size = 1;        // --nproc-per-node x --nnodes
  int local_world_size = 1;  // --nproc-per-node
};

// One rank's estimate, in bytes.
struct RankMemory {
  int rank = 0;
  uint64_t params = 0;
  uint64_t grads = 0;
  uint64_t optimizer = 0;  // the strategy's optimizer elements x the state per element
  uint64_t masters = 0;
  uint64_t comm = 0;
  uint64_t gathered = 0;
  uint64_t activations = 0;  // the model's (ActivationsEstimate), the same on every rank
  // Of grads, those made in backward and dropped at zero_grad (ABI 1.10):
  // backward frees the activations as it makes them.
  uint64_t backward_grads = 0;
  // The peak: everything held through forward, and the larger of the
  // activations and the gradients backward makes in their place.
  uint64_t total() const {
    return params + (grads - backward_grads) + optimizer + masters + comm + gathered +
           std::max(activations, backward_grads);
  }
};

struct MemoryEstimate {
  std::string strategy;             // "zero", as the job names it
  bool strategy_estimates = false;  // false: the strategy has no EstimateMemory
  int64_t numel = 0;                // every parameter's elements
  int64_t trainable_numel = 0;
  std::string optimizer;          // "AdamW"
  int optimizer_states = 0;       // state tensors per element (AdamW: 2)
  std::vector<RankMemory> ranks;  // one per rank, 0..world_size-1 (empty without EstimateMemory)
  // What forward keeps for backward (model/ActivationEstimate.hpp), per rank.
  struct Activations {
    std::string not_estimated;   // non-empty: why none (in no rank's figures)
    std::string what;            // the shape it is for: model, batch, dtype, kernels
    uint64_t after_forward = 0;  // kept from the end of forward into backward
    uint64_t recompute = 0;      // held again while backward recomputes a unit
  } activations;
};

// The estimate of `job` (validated, defaults applied) with `strategy`
// (created from it, nothing else called). Throws config::ConfigError for
// the model's keys, host::HostError for the strategy's answer.
MemoryEstimate estimate_memory(const config::Node& job, const std::filesystem::path& job_dir,
                               const host::StrategyInstance& strategy,
                               const MemoryEstimateOptions& opts);

// Prints it as the command line does: a header, one row per group of
// ranks with the same figures (MiB), and what the figures leave out.
void print_memory_estimate(const MemoryEstimate& estimate, const MemoryEstimateOptions& opts,
                           std::ostream& out);

}  // namespace rh::lifecycle
