#include "launch/ThreadPolicy.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace rh::launch {

bool passive_threads_wanted(const char* omp_wait_policy, const char* gomp_spincount,
                            int openblas_parallel) {
  if (omp_wait_policy != nullptr || gomp_spincount != nullptr) return false;
  return openblas_parallel == 1;
}

std::string apply_thread_policy() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr)
    return "";
  // The BLAS LibTorch links (Debian's LibTorch: libblas.so.3 through the
  // alternatives); it stays loaded, as LibTorch would load it next.
  void* blas = ::dlopen("libblas.so.3", RTLD_LAZY | RTLD_LOCAL);
  if (blas == nullptr) return "";
  using ParallelFn = int (*)();
  const auto parallel = reinterpret_cast<ParallelFn>(::dlsym(blas, "openblas_get_parallel"));
  const int mode = parallel != nullptr ? parallel() : -1;
  if (!passive_threads_wanted(nullptr, nullptr, mode)) return "";
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  return "OpenMP threads wait passively (OMP_WAIT_POLICY=PASSIVE): OpenBLAS runs its own thread "
         "pool (set OMP_WAIT_POLICY to choose otherwise)";
}

}  // namespace rh::launch
