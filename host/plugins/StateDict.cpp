#include "plugins/StateDict.hpp"

#include <cstring>
#include <limits>
#include <new>

#include "plugins/HostError.hpp"

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

rh_StateDict::Entry copy_tensor_entry(const DLManagedTensor& tensor, const std::string& key) {
  const DLTensor& t = tensor.dl_tensor;
  const std::string what = "StateDict_PutTensor: tensor '" + key + "'";
  auto invalid = [&](const std::string& why) {
    return HostError(RH_ERROR_INVALID_ARGUMENT, what + ": " + why);
  };
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
    throw HostError(RH_ERROR_UNIMPLEMENTED,
                    what +
                        ": only host-memory tensors can be stored; copy device tensors to the "
                        "CPU first");
  }
  if (t.ndim < 0 || t.ndim > kMaxTensorDims)
    throw invalid("ndim is " + std::to_string(t.ndim) + ", expected 0.." +
                  std::to_string(kMaxTensorDims));
  if (t.ndim > 0 && t.shape == nullptr) throw invalid("shape is NULL");
  if (t.dtype.bits == 0 || t.dtype.bits % 8 != 0 || t.dtype.lanes == 0)
    throw invalid("dtype has " + std::to_string(t.dtype.bits) + " bits and " +
                  std::to_string(t.dtype.lanes) +
                  " lanes; only whole bytes per element can be stored");
  size_t numel = 1;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      throw invalid("dimension " + std::to_string(i) + " is " + std::to_string(t.shape[i]));
    if (__builtin_mul_overflow(numel, static_cast<size_t>(t.shape[i]), &numel))
      throw invalid("the element count of its shape overflows");
  }
  const size_t elem = dtype_bytes(t.dtype);
  size_t size = 0;
  // PTRDIFF_MAX: the most a std::vector (and pointer arithmetic) can hold.
  if (__builtin_mul_overflow(numel, elem, &size) ||
      size > static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max()))
    throw invalid("its size in bytes (" + std::to_string(numel) + " elements of " +
                  std::to_string(elem) + " bytes) overflows");
  if (size > 0 && t.data == nullptr) throw invalid("data is NULL");
  rh_StateDict::Entry e;
  e.is_tensor = true;
  e.dtype = t.dtype;
  e.shape.assign(t.shape, t.shape + t.ndim);
  try {
    e.bytes.resize(size);
  } catch (const std::bad_alloc&) {
    throw HostError(RH_ERROR_INTERNAL,
                    what + ": cannot allocate " + std::to_string(size) + " bytes");
  }
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
  char* dst = reinterpret_cast<char*>(e.bytes.data());
  copy_strided(src, t.shape, strides.data(), t.ndim, elem, dst);
  return e;
}

}  // namespace rh::host
