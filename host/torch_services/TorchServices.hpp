// The host's LibTorch layer as the rest of the host sees it: no LibTorch
// headers here, so config/CLI/loader code can include it cheaply.
#pragma once

#include <string>

#include "abi/NativeTag.hpp"

namespace rh::host {

class HostServices;

// The host's own native ABI tag (LibTorch version, cpu/cuda, C++11 ABI).
NativeTag host_native_tag();

// Fills the rh_HostApi entries that need LibTorch (Tensor_Alloc...).
void install_torch_services(HostServices& services);

// Sets LibTorch's intra-op thread count (0 = leave LibTorch's default).
void set_torch_threads(int threads);

}  // namespace rh::host
