#include "launch/HeapPolicy.hpp"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace rh::launch {

bool heap_policy_wanted(const char* glibc_tunables) {
  return glibc_tunables == nullptr || std::strstr(glibc_tunables, "glibc.malloc.") == nullptr;
}

HeapMode heap_mode(const std::string& value) {
  return value == "keep" ? HeapMode::kKeep : HeapMode::kRelease;
}

std::string apply_heap_policy(HeapMode mode) {
#if defined(__GLIBC__)
  if (!heap_policy_wanted(std::getenv("GLIBC_TUNABLES"))) return "";
  // Setting the mmap threshold also turns off glibc's dynamic adjustment of
  // both thresholds, so the trim threshold is set with it.
  const bool keep = mode == HeapMode::kKeep;
  const int mmap_ok =
      mallopt(M_MMAP_THRESHOLD, static_cast<int>(keep ? kHeapKeepBytes : kHeapReleaseFromBytes));
  const int trim_ok =
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(keep ? kHeapKeepBytes : kHeapReleaseTrimBytes));
  if (mmap_ok != 1 || trim_ok != 1) return "";
  return keep ? "blocks up to 1 GiB from the heap, 1 GiB of free heap kept (env_cfg.heap: keep)"
              : "blocks of 1 MiB or more mapped and returned on free (env_cfg.heap: release)";
#else
  (void)mode;
  return "";
#endif
}

}  // namespace rh::launch
