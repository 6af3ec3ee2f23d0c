#include "launch/HeapPolicy.hpp"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace rh::launch {

bool heap_policy_wanted(const char* glibc_tunables) {
  return glibc_tunables == nullptr || std::strstr(glibc_tunables, "glibc.malloc.") == nullptr;
}

std::string apply_heap_policy() {
#if defined(__GLIBC__)
  if (!heap_policy_wanted(std::getenv("GLIBC_TUNABLES"))) return "";
  // Setting the mmap threshold also turns off glibc's dynamic adjustment of
  // both thresholds, so the trim threshold is set with it.
  const int mmap_ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapKeepBytes));
  const int trim_ok = mallopt(M_TRIM_THRESHOLD, static_cast<int>(kHeapKeepBytes));
  if (mmap_ok == 1 && trim_ok == 1)
    return "blocks up to 1 GiB from the heap, 1 GiB of free heap kept "
           "(GLIBC_TUNABLES=glibc.malloc.* to choose otherwise)";
  return "";
#else
  return "";
#endif
}

}  // namespace rh::launch
