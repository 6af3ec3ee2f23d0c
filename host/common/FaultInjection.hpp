// Test-only fault injection: RH_FAULT_INJECT, read through the SDK's one
// parser (rh/cpp/fault_injection.hpp), which the shipped plugins use too;
// checkpoint/CheckpointStore.hpp and comm/ShmAllReduce.hpp list the faults
// they read. Header-only: no library of its own.
#pragma once

#include "rh/cpp/fault_injection.hpp"

namespace rh::common {

using rh::fault_injected;
using rh::fault_values;

}  // namespace rh::common
