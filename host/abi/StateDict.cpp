#include "abi/StateDict.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "abi/HostError.hpp"

namespace rh::host {

size_t dtype_bytes(DLDataType dtype) {
  return (static_cast<size_t>(dtype.bits) * dtype.lanes + 7) / 8;
}

namespace {
// Copies the elements of an n-d strided tensor in C order, one innermost row
// at a time (memcpy when the innermost stride is 1).
void copy_strided(const char* src, const int64_t* shape, const int64_t* strides, int ndim,
                  size_t elem, char*& dst) {
  if (ndim == 0) {
    std::memcpy(dst, src, elem);
    dst += elem;
    return;
  }
  if (ndim == 1) {
    if (strides[0] == 1) {
      std::memcpy(dst, src, shape[0] * elem);
      dst += shape[0] * elem;
    } else {
      for (int64_t i = 0; i < shape[0]; ++i, dst += elem)
        std::memcpy(dst, src + i * strides[0] * static_cast<int64_t>(elem), elem);
    }
    return;
  }
  for (int64_t i = 0; i < shape[0]; ++i)
    copy_strided(src + i * strides[0] * static_cast<int64_t>(elem), shape + 1, strides + 1,
                 ndim - 1, elem, dst);
}
}  // namespace

size_t checked_tensor_bytes(DLDataType dtype, const int64_t* shape, int32_t ndim,
                            const std::string& what) {
  auto invalid = [&](const std::string& why) {
    return HostError(RH_ERROR_INVALID_ARGUMENT, what + ": " + why);
  };
  if (ndim < 0 || ndim > kMaxTensorDims)
    throw invalid("ndim is " + std::to_string(ndim) + ", expected 0.." +
                  std::to_string(kMaxTensorDims));
  if (ndim > 0 && shape == nullptr) throw invalid("shape is NULL");
  if (dtype.bits == 0 || dtype.bits % 8 != 0 || dtype.lanes == 0)
    throw invalid("dtype has " + std::to_string(dtype.bits) + " bits and " +
                  std::to_string(dtype.lanes) +
                  " lanes; only whole bytes per element can be stored");
  size_t numel = 1;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] < 0)
      throw invalid("dimension " + std::to_string(i) + " is " + std::to_string(shape[i]));
    if (__builtin_mul_overflow(numel, static_cast<size_t>(shape[i]), &numel))
      throw invalid("the element count of its shape overflows");
  }
  const size_t elem = dtype_bytes(dtype);
  size_t size = 0;
  // PTRDIFF_MAX: the most a std::vector (and pointer arithmetic) can hold.
  if (__builtin_mul_overflow(numel, elem, &size) ||
      size > static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max()))
    throw invalid("its size in bytes (" + std::to_string(numel) + " elements of " +
                  std::to_string(elem) + " bytes) overflows");
  return size;
}

uint8_t* allocate_entry(rh_StateDict::Entry& e, size_t size) {
  constexpr size_t kHugePage = size_t{2} << 20;
  void* p = nullptr;
  if (size >= kHugePage) {
    const size_t rounded = (size + kHugePage - 1) / kHugePage * kHugePage;
    p = std::aligned_alloc(kHugePage, rounded);
    // Best effort: without THP (or with it set to "never") this is a no-op.
    if (p != nullptr) ::madvise(p, rounded, MADV_HUGEPAGE);
  } else {
    p = std::malloc(size > 0 ? size : 1);
  }
  if (p == nullptr)
    throw HostError(RH_ERROR_INTERNAL,
                    "cannot allocate " + std::to_string(size) + " bytes for a checkpoint tensor");
  e.bytes.clear();
  e.owner = std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); });
  e.borrowed = static_cast<const uint8_t*>(p);
  e.borrowed_size = size;
  return static_cast<uint8_t*>(p);
}

uint8_t* alloc_tensor_entry(rh_StateDict& dict, const std::string& key, DLDataType dtype,
                            const std::vector<int64_t>& shape, size_t size) {
  rh_StateDict::Entry e;
  e.is_tensor = true;
  e.dtype = dtype;
  e.shape = shape;
  uint8_t* data = nullptr;
  const auto dest = dict.destinations.find(key);
  if (dest != dict.destinations.end() && dest->second.dtype.code == dtype.code &&
      dest->second.dtype.bits == dtype.bits && dest->second.dtype.lanes == dtype.lanes &&
      dest->second.shape == shape && size > 0) {
    data = static_cast<uint8_t*>(dest->second.data);
    e.borrowed = data;
    e.borrowed_size = size;
  } else {
    data = allocate_entry(e, size);
  }
  dict.entries[key] = std::move(e);
  return size > 0 ? data : nullptr;
}

rh_StateDict::Entry copy_tensor_entry(const DLManagedTensor& tensor, const std::string& key) {
  const DLTensor& t = tensor.dl_tensor;
  const std::string what = "StateDict_PutTensor: tensor '" + key + "'";
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
    throw HostError(RH_ERROR_UNIMPLEMENTED,
                    what +
                        ": only host-memory tensors can be stored; copy device tensors to the "
                        "CPU first");
  }
  const size_t size = checked_tensor_bytes(t.dtype, t.shape, t.ndim, what);
  const size_t elem = dtype_bytes(t.dtype);
  const size_t numel = elem == 0 ? 0 : size / elem;
  if (size > 0 && t.data == nullptr)
    throw HostError(RH_ERROR_INVALID_ARGUMENT, what + ": data is NULL");
  rh_StateDict::Entry e;
  e.is_tensor = true;
  e.dtype = t.dtype;
  e.shape.assign(t.shape, t.shape + t.ndim);
  char* dst = reinterpret_cast<char*>(allocate_entry(e, size));
  if (numel == 0) return e;
  const char* src = static_cast<const char*>(t.data) + t.byte_offset;
  std::vector<int64_t> strides(t.ndim);
  if (t.strides != nullptr) {
    strides.assign(t.strides, t.strides + t.ndim);
  } else {
    int64_t s = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      strides[i] = s;
      s *= t.shape[i];
    }
  }
  copy_strided(src, t.shape, strides.data(), t.ndim, elem, dst);
  return e;
}

}  // namespace rh::host
