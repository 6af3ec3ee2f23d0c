// Test-only fault injection: RH_FAULT_INJECT, a comma-separated list of
// named faults (checkpoint/CheckpointStore.hpp and comm/ShmAllReduce.hpp
// list theirs). Header-only: no library of its own.
#pragma once

#include <cstdlib>
#include <sstream>
#include <string>

namespace rh::common {

// True when RH_FAULT_INJECT lists `item` (one whole entry).
inline bool fault_injected(const std::string& item) {
  const char* env = std::getenv("RH_FAULT_INJECT");
  if (env == nullptr) return false;
  std::stringstream list(env);
  std::string entry;
  while (std::getline(list, entry, ','))
    if (entry == item) return true;
  return false;
}

}  // namespace rh::common
