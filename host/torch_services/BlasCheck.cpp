#include "torch_services/BlasCheck.hpp"

#include <dlfcn.h>

#include <fstream>

namespace rh::host {

std::string loaded_blas_path() {
  // /proc/self/maps lists mapped files by their resolved path, so the
  // alternatives symlink shows as its target.
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (path.find("libblas.so") != std::string::npos) return path;
  }
  return "";
}

bool is_reference_blas(const std::string& path) {
  return path.find("/blas/libblas.so") != std::string::npos;
}

LoadedBlas loaded_blas() {
  LoadedBlas blas;
  blas.path = loaded_blas_path();
  if (blas.path.empty()) return blas;
  // RTLD_NOLOAD: the handle of the copy LibTorch loaded, or nothing. dlsym
  // on it searches its dependencies too (Debian's OpenBLAS libblas.so.3 is
  // a thin library over libopenblas.so.0, which has these).
  void* handle = ::dlopen(blas.path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return blas;
  using NameFn = char* (*)();
  if (auto corename = reinterpret_cast<NameFn>(::dlsym(handle, "openblas_get_corename")))
    if (const char* core = corename()) blas.core = core;
  if (auto config = reinterpret_cast<NameFn>(::dlsym(handle, "openblas_get_config")))
    if (const char* text = config()) blas.config = text;
  ::dlclose(handle);  // only the reference RTLD_NOLOAD took
  return blas;
}

}  // namespace rh::host
