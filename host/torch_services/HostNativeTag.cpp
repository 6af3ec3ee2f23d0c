// Only <torch/version.h> (a few macros) is needed here: cheap to compile.
#include <torch/version.h>

#include "torch_services/TorchServices.hpp"

namespace rh::host {

NativeTag host_native_tag() {
  return NativeTag{TORCH_VERSION, RH_TORCH_DEVICE, _GLIBCXX_USE_CXX11_ABI};
}

}  // namespace rh::host
