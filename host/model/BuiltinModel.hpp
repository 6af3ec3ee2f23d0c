// What the four built-in models (mlp, convnet, vit, gpt) share: their tensors
// live in a ParamRegistry (names, units, buffers, to()), and a train/eval flag
// their forward reads (dropout, batch norm). Subclasses register their layers
// unit by unit in their constructor and implement forward() and task().
//
// Every parameter of unit U is named "U.<...>" (the one exception: gpt with
// tie_weights uses embed.token.weight in its head).
#pragma once

#include <cstdint>
#include <vector>

#include "model/Model.hpp"
#include "model/ParamRegistry.hpp"

namespace rh::model {

class BuiltinModel : public Model {
 public:
  std::vector<NamedTensor> named_parameters() override { return registry_.parameters(); }
  std::vector<NamedTensor> named_buffers() override { return registry_.buffers(); }
  std::vector<Unit> units() const override { return registry_.units(); }
  void train(bool on) override { training_ = on; }
  void to(const at::Device& device) override { registry_.to(device); }

 protected:
  explicit BuiltinModel(uint64_t seed) : registry_(seed) {}

  ParamRegistry& registry() { return registry_; }
  bool training() const { return training_; }

 private:
  ParamRegistry registry_;
  bool training_ = true;  // like torch modules, a new model is in training mode
};

}  // namespace rh::model
