#include "plugins/StateDict.hpp"

#include <cstring>

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

rh_StateDict::Entry copy_tensor_entry(const DLManagedTensor& tensor) {
  const DLTensor& t = tensor.dl_tensor;
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
    throw HostError(RH_ERROR_UNIMPLEMENTED,
                    "StateDict_PutTensor: only host-memory tensors can be stored; copy device "
                    "tensors to the CPU first");
  }
  rh_StateDict::Entry e;
  e.is_tensor = true;
  e.dtype = t.dtype;
  e.shape.assign(t.shape, t.shape + t.ndim);
  size_t numel = 1;
  for (int i = 0; i < t.ndim; ++i) numel *= static_cast<size_t>(t.shape[i]);
  const size_t elem = dtype_bytes(t.dtype);
  e.bytes.resize(numel * elem);
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
