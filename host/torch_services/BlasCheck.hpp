// Which BLAS the process runs on (part of rh_engine: the runner library
// asks the copy LibTorch loaded). Debian's LibTorch links libblas.so.3, which
// the alternatives system points at OpenBLAS (libopenblas0-pthread) or, when
// that is missing, at the reference BLAS — measured 8x slower on an MLP step.
// Which kernels OpenBLAS runs is BlasKernelCheck.hpp's question.
#pragma once

#include <string>

namespace rh::host {

// The resolved path of the loaded libblas.so.3 ("" when none is loaded).
std::string loaded_blas_path();
// True when that path is Debian's reference BLAS (.../blas/libblas.so.3).
bool is_reference_blas(const std::string& path);

// The loaded BLAS and, when it is OpenBLAS, what it says of itself.
struct LoadedBlas {
  std::string path;    // loaded_blas_path()
  std::string core;    // openblas_get_corename(): the kernels it runs; "" when not OpenBLAS
  std::string config;  // openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
};
// Asks the library this process already loaded (nothing is loaded here).
LoadedBlas loaded_blas();

}  // namespace rh::host
