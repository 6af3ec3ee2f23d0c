// The model as strategies see it through the C ABI (rh_Model, rh_ModelApi in
// rh_strategy.h): named parameters and buffers as DLPack views, gradients,
// units, and per-parameter gradient-ready callbacks (autograd post hooks on
// each parameter's gradient accumulator), unit callbacks (the model's unit
// callback and hooks on unit outputs), and what sharding strategies need:
// replacing a parameter's data, freeing and restoring its storage (the
// tensor and what autograd saved of it stay), releasing gradients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/Model.hpp"
#include "rh/rh_strategy.h"

namespace rh::lifecycle {

// Each parameter's unit (-1 where no unit declares it: the root) and whether
// other units use it too (tied), as Model_GetParam reports them.
struct ParamPlacement {
  std::vector<int32_t> unit;
  std::vector<char> tied;
};
ParamPlacement param_placement(const std::vector<model::NamedTensor>& params,
                               const std::vector<model::Unit>& units);

class ModelAccess {
 public:
  explicit ModelAccess(model::Model& model);
  ~ModelAccess();
  rh_Model* handle();
  const rh_ModelApi* api() const;
  // DLPack views (parameters, buffers, gradients) held for strategies right
  // now: one per tensor, however often they are asked for (tests check it).
  size_t held_views() const;
  // Around every backward (the train step): POST_BACKWARD unit callbacks
  // fire as units complete, and at end_backward for the rest.
  void begin_backward();
  void end_backward();
  // After the optimizer's zero_grad: frees the gradient views strategies
  // borrowed (Model_GetGrad's are valid "until zero_grad"). A view owns its
  // gradient, so one kept to the next backward held the previous step's
  // gradients, 4 bytes a parameter, through the whole next forward.
  void end_gradient_borrows();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rh::lifecycle
