// The tensors of one built-in model: its parameters (each in exactly one
// unit), its buffers, and the random generator their initial values come
// from.
//
// Layers register their tensors here while the model is built, unit by unit
// and in forward order:
//
//   ParamRegistry reg(seed);
//   reg.begin_unit("embed");
//   at::Tensor w = reg.add_parameter("embed.token.weight", reg.normal({V, D}, 0.02));
//
// The layers keep handles to the same tensors, so to() moves them in place
// (set_data) and a strategy that replaces a parameter's storage through
// named_parameters() is seen by the forward.
//
// Seeding: the generator is a private CPU generator created from the model
// seed (at::detail::createCPUGenerator), not the global one. The same seed
// gives bitwise-identical initial values whatever else used the global RNG,
// and building a model leaves the global RNG untouched. Values are drawn on
// the CPU, in registration order.
//
// Shapes only: while a ShapesOnlyScope lives on this thread, a new registry
// makes every tensor on the meta device (names, shapes, dtypes and units,
// no storage, nothing drawn): what `--estimate-memory` reads of a model it
// must not allocate (build_model_shapes, Model.hpp).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/Model.hpp"

namespace rh::model {

class ParamRegistry {
 public:
  explicit ParamRegistry(uint64_t seed);

  // Parameters registered from now on belong to unit `name`.
  void begin_unit(const std::string& name);
  // Registers `value` as parameter `name` of the current unit (requires_grad
  // on) and returns it. Throws std::logic_error before begin_unit() or for a
  // name used twice.
  at::Tensor add_parameter(const std::string& name, at::Tensor value);
  // The current unit uses parameter `name` of an earlier unit too (tied).
  void share_parameter(const std::string& name);
  // Registers a buffer (batch-norm running statistics); not in any unit.
  at::Tensor add_buffer(const std::string& name, at::Tensor value);

  // Initial values, float32 on the CPU (meta, shapes only), drawn from
  // this registry's generator.
  at::Tensor uniform(at::IntArrayRef shape, double bound);  // U(-bound, bound)
  at::Tensor normal(at::IntArrayRef shape, double std);     // N(0, std²)
  at::Tensor zeros(at::IntArrayRef shape, at::ScalarType dtype = at::kFloat);
  at::Tensor ones(at::IntArrayRef shape);

  // Registries made while one lives on this thread hold meta tensors.
  class ShapesOnlyScope {
   public:
    ShapesOnlyScope();
    ~ShapesOnlyScope();
    ShapesOnlyScope(const ShapesOnlyScope&) = delete;
    ShapesOnlyScope& operator=(const ShapesOnlyScope&) = delete;
    // Whether one lives on this thread (TorchScript loads its module to meta).
    static bool active();

   private:
    bool outer_;
  };

  const std::vector<NamedTensor>& parameters() const { return parameters_; }
  const std::vector<NamedTensor>& buffers() const { return buffers_; }
  const std::vector<Unit>& units() const { return units_; }

  // Moves every parameter (and its gradient) and buffer in place.
  void to(const at::Device& device);

 private:
  void check_new_name(const std::string& name) const;

  at::Generator generator_;
  at::Device device_;                    // the CPU, or meta (ShapesOnlyScope)
  std::vector<NamedTensor> parameters_;  // registration order
  std::vector<NamedTensor> buffers_;
  std::vector<Unit> units_;
};

}  // namespace rh::model
