#include "model/ActivationEstimate.hpp"

#include <algorithm>

#include "config/ConfigNode.hpp"

namespace rh::model {

int64_t ActivationEstimate::after_forward(const ActivationCheckpointConfig& ac) const {
  const std::vector<bool> again = ac.recomputed(units.size());
  int64_t bytes = loss;
  for (size_t u = 0; u < units.size(); ++u)
    bytes += units[u].input + (again[u] ? rng_state : units[u].saved);
  return bytes;
}

int64_t ActivationEstimate::recompute(const ActivationCheckpointConfig& ac) const {
  const std::vector<bool> again = ac.recomputed(units.size());
  int64_t most = 0;
  for (size_t u = 0; u < units.size(); ++u)
    if (again[u]) most = std::max(most, units[u].saved);
  return most;
}

ActivationEstimate estimate_activations(const config::Node& model, const ActivationShape& shape) {
  const std::string type = model.find("type")->scalar();
  ActivationEstimate est;
  if (type == "gpt") est = gpt_activations(model, shape);
  if (type == "vit") est = vit_activations(model, shape);
  if (type == "mlp") est = mlp_activations(model, shape);
  if (!est.units.empty()) {
    est.rng_state = shape.rng_state;
    return est;
  }
  ActivationEstimate none;
  none.not_estimated = type == "torchscript"
                           ? "a TorchScript model's forward is not known before it runs"
                           : "no formula for model type '" + type + "' yet";
  return none;
}

}  // namespace rh::model
