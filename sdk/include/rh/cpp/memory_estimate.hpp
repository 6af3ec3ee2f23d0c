// rh/cpp/memory_estimate.hpp — sums a strategy's EstimateMemory (ABI 1.9, 1.10)
// needs over the parameters' sizes, for every rank alike.
#pragma once

#include <cstdint>

#include "rh/rh_strategy.h"

namespace rh {

// Bytes (or elements) of the parameters `keep` selects, as built.
template <class Keep>
uint64_t param_bytes_if(const rh_MemoryEstimateArgs& args, Keep keep) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < args.num_params; ++i)
    if (keep(args.params[i]))
      bytes += static_cast<uint64_t>(args.params[i].numel) *
               static_cast<uint64_t>(args.params[i].element_size);
  return bytes;
}
template <class Keep>
uint64_t param_elements_if(const rh_MemoryEstimateArgs& args, Keep keep) {
  uint64_t elements = 0;
  for (size_t i = 0; i < args.num_params; ++i)
    if (keep(args.params[i])) elements += static_cast<uint64_t>(args.params[i].numel);
  return elements;
}

inline bool is_trainable(const rh_ParamSize& p) { return p.requires_grad != 0; }
inline bool is_frozen(const rh_ParamSize& p) { return p.requires_grad == 0; }

// Every parameter whole on every rank, autograd's gradients, the optimizer
// on every trainable parameter: what `single` keeps, and ddp's model part.
// The gradients exist from backward to zero_grad only, unless a window
// accumulates them (ABI 1.10, backward_grad_bytes).
inline void estimate_whole_model(const rh_MemoryEstimateArgs& args, rh_MemoryEstimate& out) {
  out.param_bytes = param_bytes_if(args, [](const rh_ParamSize&) { return true; });
  out.grad_bytes = param_bytes_if(args, is_trainable);
  out.optimizer_elements = param_elements_if(args, is_trainable);
  out.backward_grad_bytes = args.accumulation > 1 ? 0 : out.grad_bytes;
}

}  // namespace rh
