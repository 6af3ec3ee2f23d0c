// Behind the opaque rh_StateDict: named tensors (host-owned CPU copies) and
// byte blobs, the content of a checkpoint file.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

struct rh_StateDict {
  struct Entry {
    bool is_tensor = false;
    DLDataType dtype{};
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;  // tensor data (C-contiguous) or the blob, owned
    // Or a tensor the host lends without a copy (checkpoint::put_tensor_view:
    // its own CPU tensors, for a save that ends before they change): `owner`
    // keeps it alive, `bytes` stays empty.
    std::shared_ptr<const void> owner;
    const uint8_t* borrowed = nullptr;
    size_t borrowed_size = 0;
    DLManagedTensor view{};  // borrowed view handed out by GetTensor

    const uint8_t* data() const { return borrowed != nullptr ? borrowed : bytes.data(); }
    size_t size() const { return borrowed != nullptr ? borrowed_size : bytes.size(); }
  };
  std::map<std::string, Entry> entries;  // sorted: KeyAt is stable
};

namespace rh::host {

// Most dimensions a state-dict tensor may have (the safetensors reader's cap).
constexpr int kMaxTensorDims = 64;

size_t dtype_bytes(DLDataType dtype);
// Copies a CPU DLPack tensor (any strides) into a C-contiguous entry. The
// tensor comes from a plugin through the ABI, so its description is checked
// before anything is allocated or read: 0..kMaxTensorDims dimensions, none
// negative, a whole number of bytes per element, and an element count and
// byte size that do not overflow (a bad shape is an RH_ERROR_INVALID_ARGUMENT
// error naming `key`, never a short buffer). Strides and data are trusted.
rh_StateDict::Entry copy_tensor_entry(const DLManagedTensor& tensor, const std::string& key);

}  // namespace rh::host
