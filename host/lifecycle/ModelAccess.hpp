// The model as strategies see it through the C ABI (rh_Model, rh_ModelApi in
// rh_strategy.h): named parameters and buffers as DLPack views, gradients,
// units, and per-parameter gradient-ready callbacks (autograd post hooks on
// each parameter's gradient accumulator). Unit callbacks and replacing a
// parameter's storage arrive with the sharding strategies and are NULL until
// then, which the ABI defines as "not provided".
#pragma once

#include <cstddef>
#include <memory>

#include "rh/rh_strategy.h"

namespace rh::model {
class Model;
}

namespace rh::lifecycle {

class ModelAccess {
 public:
  explicit ModelAccess(model::Model& model);
  ~ModelAccess();
  rh_Model* handle();
  const rh_ModelApi* api() const;
  // DLPack views (parameters, buffers, gradients) held for strategies right
  // now: one per tensor, however often they are asked for (tests check it).
  size_t held_views() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rh::lifecycle
