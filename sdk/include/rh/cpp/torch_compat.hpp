// rh/cpp/torch_compat.hpp — the one place where LibTorch 1.13 (Debian) and
// 2.x (the pip wheel) differ for runner-host code. Include it instead of
// reaching for the differing APIs directly.
#pragma once

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <torch/version.h>

namespace rh::compat {

// at::fromDLPack takes `const DLManagedTensor*` in 1.13 and `DLManagedTensor*`
// in 2.x; both take ownership (they call src->deleter when the tensor dies).
inline at::Tensor from_dlpack_owning(DLManagedTensor* src) {
#if TORCH_VERSION_MAJOR >= 2
  return at::fromDLPack(src);
#else
  return at::fromDLPack(static_cast<const DLManagedTensor*>(src));
#endif
}

}  // namespace rh::compat
