// The native ABI tag: which LibTorch build a binary's C++ side uses. The host
// refuses a plugin whose tag differs from its own (docs/architecture.md §2 rule 4).
#pragma once

#include <string>

namespace rh::host {

struct NativeTag {
  std::string torch_version;  // empty: does not link LibTorch
  std::string device;         // "cpu" or "cuda"
  int cxx11_abi = -1;         // _GLIBCXX_USE_CXX11_ABI, -1 when not C++

  bool links_torch() const { return !torch_version.empty(); }
  // "torch 1.13.0 cpu cxx11abi=1", or "none (does not link LibTorch)".
  std::string str() const {
    if (!links_torch()) return "none (does not link LibTorch)";
    return "torch " + torch_version + " " + device + " cxx11abi=" + std::to_string(cxx11_abi);
  }
  bool operator==(const NativeTag& o) const {
    return torch_version == o.torch_version && device == o.device && cxx11_abi == o.cxx11_abi;
  }
};

}  // namespace rh::host
