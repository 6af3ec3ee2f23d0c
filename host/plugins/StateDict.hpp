// Behind the opaque rh_StateDict: named tensors (host-owned CPU copies) and
// byte blobs, the content of a checkpoint file.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

struct rh_StateDict {
  struct Entry {
    bool is_tensor = false;
    DLDataType dtype{};
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;  // tensor data (C-contiguous) or the blob
    DLManagedTensor view{};      // borrowed view handed out by GetTensor
  };
  std::map<std::string, Entry> entries;  // sorted: KeyAt is stable
};

namespace rh::host {

size_t dtype_bytes(DLDataType dtype);
// Copies a CPU DLPack tensor (any strides) into a C-contiguous entry.
rh_StateDict::Entry copy_tensor_entry(const DLManagedTensor& tensor);

}  // namespace rh::host
