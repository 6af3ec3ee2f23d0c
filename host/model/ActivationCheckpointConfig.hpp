// The job's `activation_checkpoint` section (torchtitan's keys), read and
// checked without LibTorch: validate_job runs it, so --dry-run catches a bad
// value before anything is built.
//
//   activation_checkpoint:
//     mode: none | full | selective   # none by default
//     selective_ac_option: 2          # selective: every 2nd unit (the 2nd, 4th, ...)
//
// full: every unit of the model runs its forward without keeping its
// activations and runs it again in backward; selective N: every Nth unit
// (units in forward order, counted from 1, as torchtitan counts its
// blocks). torchtitan's op-level selective option ("op") is refused.
#pragma once

#include <cstdint>
#include <vector>

#include "config/ConfigNode.hpp"

namespace rh::model {

struct ActivationCheckpointConfig {
  enum class Mode { None, Full, Selective };
  Mode mode = Mode::None;
  int64_t every = 1;  // selective: every Nth unit; full: 1
  // Which of `units` units recompute in backward.
  std::vector<bool> recomputed(size_t units) const;
};

// Throws config::ConfigError naming the key for a value the host does not
// do (an unknown mode is the schema's).
ActivationCheckpointConfig read_activation_checkpoint(const config::Node& section);
std::vector<config::ConfigError> check_activation_checkpoint(const config::Node& section);

}  // namespace rh::model
