// What a built-in model's forward keeps for its backward ("activations"),
// bytes, from its keys and the batch alone: the memory estimate's
// activation column (runner-host --estimate-memory). Each model computes it
// beside its forward (Gpt.cpp, Vit.cpp, Mlp.cpp, TransformerBlock.cpp), term
// by term as autograd saves the tensors of that forward on LibTorch's
// kernels, so that a change to one is seen beside the other; a test checks
// the sum against the tensors a real forward leaves alive
// (lifecycle/TensorMemory.hpp; EstimateMemoryTest). convnet and TorchScript
// models have no formula: said, not guessed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/ActivationCheckpointConfig.hpp"

namespace rh::config {
class Node;
}

namespace rh::model {

// What the estimate needs besides the model's keys.
struct ActivationShape {
  int64_t batch = 1;         // rows of one forward (per rank and micro-batch)
  int64_t seq_len = 0;       // gpt: tokens per row; 0: the model's block_size
  int64_t element_size = 4;  // bytes per element of the dtype forward computes in
  bool fused_attention =
      false;              // at::scaled_dot_product_attention (LibTorch 2.x), else written out
  bool cuda = false;      // dropout keeps a one-byte mask (CUDA's fused kernel), else
                          // its float noise (the CPU's)
  int64_t rng_state = 0;  // bytes of the random-number state a recomputed unit keeps
};

// One unit's share, bytes.
struct UnitActivations {
  int64_t input = 0;  // its input, when an earlier unit made it (the first unit's is the batch)
  int64_t saved = 0;  // everything else its forward saves: what recomputing it frees
};

struct ActivationEstimate {
  std::string not_estimated;           // non-empty: why there are no figures
  std::vector<UnitActivations> units;  // in forward order
  int64_t loss = 0;                    // what the loss keeps (log-softmax's output)
  int64_t rng_state = 0;               // kept per recomputed unit (ActivationShape)

  // Held from the end of forward into backward: every unit's input, the
  // saved tensors of the units that are not recomputed (the random-number
  // state of those that are), the loss's.
  int64_t after_forward(const ActivationCheckpointConfig& ac) const;
  // What backward holds again at most while it recomputes a unit (0
  // without recomputed units): the largest recomputed unit's saved tensors.
  int64_t recompute(const ActivationCheckpointConfig& ac) const;
};

// The estimate for the job's `model` section (validated); not_estimated
// says why for a model type without a formula.
ActivationEstimate estimate_activations(const config::Node& model, const ActivationShape& shape);

// Per model type (the model's own file).
ActivationEstimate gpt_activations(const config::Node& model, const ActivationShape& shape);
ActivationEstimate vit_activations(const config::Node& model, const ActivationShape& shape);
ActivationEstimate mlp_activations(const config::Node& model, const ActivationShape& shape);

}  // namespace rh::model
