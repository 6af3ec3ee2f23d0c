// rh/cpp/torch_compat.hpp — the one place where LibTorch 1.13 (Debian) and
// 2.x (the pip wheel) differ for runner-host code. Include it instead of
// reaching for the differing APIs directly.
#pragma once

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <torch/version.h>

#include <sstream>
#include <string>
#include <type_traits>

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

// torch::optim::Optimizer::state() is keyed by the parameter's TensorImpl: its
// address printed as text in 1.13 (c10::guts::to_string), the address itself
// (void*) in 2.x. Pass the optimizer's state() map; the key type picks the form,
// so no version number is needed here.
template <typename StateMap>
typename StateMap::key_type optimizer_state_key(const StateMap& /*state*/,
                                                const at::Tensor& param) {
  using Key = typename StateMap::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;
    text << static_cast<const void*>(param.unsafeGetTensorImpl());
    return text.str();
  } else {
    return static_cast<Key>(param.unsafeGetTensorImpl());
  }
}

}  // namespace rh::compat
