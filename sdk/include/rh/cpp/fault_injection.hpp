// rh/cpp/fault_injection.hpp — test-only fault injection: RH_FAULT_INJECT, a
// comma-separated list of entries, each a name ("shm_full") or a name with a
// value ("async_write_delay_ms:200", "amp_inf_grad:1:3"). The host and the
// shipped plugins read it through these functions only; each lists the
// faults it reads where it reads them (checkpoint/CheckpointStore.hpp,
// comm/ShmAllReduce.hpp, lifecycle/TrainStep.cpp, the async checkpoint IO).
// Unset, nothing is injected.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

namespace rh {

// The entries of RH_FAULT_INJECT, in order (none when it is unset or empty).
inline std::vector<std::string> fault_entries() {
  std::vector<std::string> out;
  const char* env = std::getenv("RH_FAULT_INJECT");
  if (env == nullptr) return out;
  const std::string list(env);
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// True when RH_FAULT_INJECT lists `entry`, whole.
inline bool fault_injected(const std::string& entry) {
  for (const std::string& e : fault_entries())
    if (e == entry) return true;
  return false;
}

// The values of the entries `<name>:<value>`, in order: "a:1,b,a:2" gives
// {"1", "2"} for "a" (a value may hold colons of its own).
inline std::vector<std::string> fault_values(const std::string& name) {
  std::vector<std::string> out;
  const std::string prefix = name + ":";
  for (const std::string& e : fault_entries())
    if (e.compare(0, prefix.size(), prefix) == 0) out.push_back(e.substr(prefix.size()));
  return out;
}

}  // namespace rh
