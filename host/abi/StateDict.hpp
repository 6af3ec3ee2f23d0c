// Behind the opaque rh_StateDict: named tensors (host-owned CPU copies) and
// byte blobs, the content of a checkpoint file.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct rh_StateDict {
  struct Entry {
    bool is_tensor = false;
    DLDataType dtype{};
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;  // tensor data (C-contiguous) or the blob, owned
    // Or memory held elsewhere, `bytes` empty: a tensor the host lends for a
    // save (checkpoint::put_tensor_view), a buffer of StateDict_AllocTensor
    // (host::allocate_entry), or the Destination it placed a tensor in.
    // `owner` keeps it alive (empty for a Destination, whose memory the
    // caller keeps alive while the dict is).
    std::shared_ptr<const void> owner;
    const uint8_t* borrowed = nullptr;
    size_t borrowed_size = 0;
    // The CRC-32 of data() as the checkpoint-IO plugin computed it while
    // writing it (StateDict_SetChecksum); none: the host computes it.
    std::optional<uint32_t> crc32;
    DLManagedTensor view{};  // borrowed view handed out by GetTensor

    const uint8_t* data() const { return borrowed != nullptr ? borrowed : bytes.data(); }
    size_t size() const { return borrowed != nullptr ? borrowed_size : bytes.size(); }
  };
  // Load: where a tensor is going (a model parameter). StateDict_AllocTensor
  // hands out this memory for a tensor of exactly this dtype and shape, so
  // the plugin reads the file straight into it; the caller keeps it alive
  // and unchanged until the load returns, and then copies nothing.
  struct Destination {
    void* data = nullptr;
    DLDataType dtype{};
    std::vector<int64_t> shape;
  };
  std::map<std::string, Entry> entries;  // sorted: KeyAt is stable
  std::map<std::string, Destination> destinations;
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
// The byte size of a tensor of `dtype` and `shape` described through the
// ABI, checked as copy_tensor_entry checks it; `what` starts the message.
size_t checked_tensor_bytes(DLDataType dtype, const int64_t* shape, int32_t ndim,
                            const std::string& what);
// StateDict_AllocTensor: entry `key` of `dict` with `size` writable bytes,
// uninitialised: the destination registered for `key` when its dtype and
// shape are these, else a fresh buffer (allocate_entry).
uint8_t* alloc_tensor_entry(rh_StateDict& dict, const std::string& key, DLDataType dtype,
                            const std::vector<int64_t>& shape, size_t size);
// Gives `e` a fresh buffer of `size` bytes, uninitialised (not zero-filled:
// the caller writes every byte), and returns it. Buffers of 2 MiB and more
// are 2 MiB-aligned and asked for as transparent huge pages: a load fills
// hundreds of MB of fresh memory, and 4 KiB page faults cost more than the
// copy (measured on a VM: 1.5 s against 0.1 s for 437 MB,
// docs/checkpoint-format.md). Throws HostError (RH_ERROR_INTERNAL) when
// the memory cannot be had.
uint8_t* allocate_entry(rh_StateDict::Entry& e, size_t size);

}  // namespace rh::host
