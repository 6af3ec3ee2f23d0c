// Which BLAS the process runs on. Debian's LibTorch links libblas.so.3, which
// the alternatives system points at OpenBLAS (libopenblas0-pthread) or, when
// that is missing, at the reference BLAS — measured 8x slower on an MLP step.
#pragma once

#include <string>

namespace rh::host {

// The resolved path of the loaded libblas.so.3 ("" when none is loaded).
std::string loaded_blas_path();
// True when that path is Debian's reference BLAS (.../blas/libblas.so.3).
bool is_reference_blas(const std::string& path);

}  // namespace rh::host
