#include "model/ActivationCheckpointConfig.hpp"

#include <string>

namespace rh::model {

std::vector<bool> ActivationCheckpointConfig::recomputed(size_t units) const {
  std::vector<bool> out(units, false);
  if (mode == Mode::None) return out;
  for (size_t k = 0; k < units; ++k) out[k] = (static_cast<int64_t>(k) + 1) % every == 0;
  return out;
}

ActivationCheckpointConfig read_activation_checkpoint(const config::Node& section) {
  ActivationCheckpointConfig c;
  const config::Node* mode = section.find("mode");
  const std::string m = mode != nullptr ? mode->as_string() : "none";
  c.mode = m == "full"        ? ActivationCheckpointConfig::Mode::Full
           : m == "selective" ? ActivationCheckpointConfig::Mode::Selective
                              : ActivationCheckpointConfig::Mode::None;
  const config::Node* option = section.find("selective_ac_option");
  if (c.mode != ActivationCheckpointConfig::Mode::Selective) {
    // torchtitan ignores it outside selective; a key that does nothing is
    // refused here rather than ignored.
    if (option != nullptr)
      throw config::ConfigError(option->location(), option->path(),
                                "applies to mode: selective only (mode is " + m + ")");
    return c;
  }
  if (option == nullptr)
    throw config::ConfigError(section.location(), section.path(),
                              "mode: selective needs selective_ac_option: N (every Nth unit)");
  if (option->as_string() == "op")
    throw config::ConfigError(
        option->location(), option->path(),
        "'op' (torchtitan's per-operator selective checkpointing, which keeps the outputs of "
        "chosen operators) is not implemented: write a number N to recompute every Nth unit, "
        "or mode: full");
  const int64_t every = option->as_int();
  if (every < 1)
    throw config::ConfigError(option->location(), option->path(),
                              "expected a number of units >= 1, got " + option->as_string());
  c.every = every;
  return c;
}

std::vector<config::ConfigError> check_activation_checkpoint(const config::Node& section) {
  try {
    read_activation_checkpoint(section);
  } catch (const config::ConfigError& e) {
    return {e};
  }
  return {};
}

}  // namespace rh::model
