#include "torch_services/BlasCheck.hpp"

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

}  // namespace rh::host
