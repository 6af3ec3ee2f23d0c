// rh/cpp/torch.hpp — DLPack <-> at::Tensor for plugins that link LibTorch,
// and the native ABI tag such plugins must declare.
//
// Zero-copy both ways. Only valid when the plugin and the host use the same
// LibTorch build, which is what the native tag guarantees: declare
// RH_NATIVE_TAG_TORCH in rh_PluginInfo and the host refuses a mismatch.
#pragma once

// ATen's bundled dlpack.h must come first: it and <dlpack/dlpack.h> share an
// include guard, and ATen expects its own (possibly newer) copy.
#include <cstring>
#include <string>
#include <vector>

#include "rh/cpp/error.hpp"
#include "rh/cpp/torch_compat.hpp"
#include "rh/rh_plugin.h"

#ifndef RH_TORCH_DEVICE
#error "RH_TORCH_DEVICE is not defined: build the plugin with rh_add_plugin(... TORCH)"
#endif

#define RH_DETAIL_STR2(x) #x
#define RH_DETAIL_STR(x) RH_DETAIL_STR2(x)

// Native tag of a plugin built against this LibTorch.
#define RH_NATIVE_TAG_TORCH                                                    \
  {                                                                            \
    RH_NATIVE_TAG_STRUCT_SIZE, RH_STR(TORCH_VERSION), RH_STR(RH_TORCH_DEVICE), \
        _GLIBCXX_USE_CXX11_ABI                                                 \
  }

namespace rh {

// A non-owning at::Tensor view of a borrowed DLPack tensor (the usual case:
// arguments of a call). The view must not outlive the borrow.
inline at::Tensor borrow_tensor(const DLManagedTensor* t) {
  const DLTensor& dl = t->dl_tensor;
  at::IntArrayRef sizes(dl.shape, dl.ndim);
  auto options =
      at::TensorOptions()
          .dtype(at::toScalarType(dl.dtype))
          .device(dl.device.device_type == kDLCUDA
                      ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(dl.device.device_id))
                      : at::Device(at::kCPU));
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  if (dl.strides != nullptr)
    return at::from_blob(data, sizes, at::IntArrayRef(dl.strides, dl.ndim), options);
  return at::from_blob(data, sizes, options);
}

// Takes ownership of `t` (its deleter runs when the tensor's storage dies).
inline at::Tensor adopt_tensor(DLManagedTensor* t) { return compat::from_dlpack_owning(t); }

// A DLPack tensor sharing `t`'s storage; ownership passes to the receiver,
// who must call its deleter.
inline DLManagedTensor* export_tensor(const at::Tensor& t) { return at::toDLPack(t); }

// Hands `t` to parameter `index` through a host entry that takes ownership
// of an exported tensor when it succeeds (rh_ModelApi's Model_SetParamData,
// Model_BindGrad): on an error the export is released (it stayed the
// caller's) and the error thrown, so nothing leaks either way.
inline void hand_param_tensor(const rh_HostApi* host,
                              rh_Error* (*entry)(rh_Model*, size_t, DLManagedTensor*),
                              rh_Model* model, size_t index, const at::Tensor& t) {
  DLManagedTensor* dl = export_tensor(t);
  rh_Error* err = entry(model, index, dl);
  if (err != nullptr) dl->deleter(dl);
  check(host, err);
}

// A strategy's or hook's own state entries of 1-d int64 (layouts, counters):
// `who` names the component in errors ("strategy 'ddp'"), `prefix` the key
// the host stores them under ("strategy.").
inline void put_longs(const rh_HostApi* host, rh_StateDict* dict, const char* key,
                      const std::vector<int64_t>& values) {
  at::Tensor t = at::tensor(at::ArrayRef<int64_t>(values), at::kLong);
  DLManagedTensor* dl = export_tensor(t);
  rh_Error* err = host->StateDict_PutTensor(dict, key, std::strlen(key), dl);
  dl->deleter(dl);
  check(host, err);
}

// False when `key` is absent; an entry of another kind is an error.
inline bool get_longs(const rh_HostApi* host, const rh_StateDict* dict, const char* key,
                      std::vector<int64_t>& out, const std::string& who,
                      const std::string& prefix = "strategy.") {
  const DLManagedTensor* dl = nullptr;
  rh_Error* err = host->StateDict_GetTensor(dict, key, std::strlen(key), &dl);
  if (err != nullptr && host->Error_Code(err) == RH_ERROR_NOT_FOUND) {
    host->Error_Destroy(err);
    return false;
  }
  check(host, err);
  const at::Tensor t = borrow_tensor(dl);
  if (t.scalar_type() != at::kLong || t.dim() != 1)
    throw Exception(RH_ERROR_INVALID_ARGUMENT, who + ": checkpoint entry '" + prefix + key +
                                                   "' must be a 1-d int64 tensor, got " +
                                                   std::string(c10::toString(t.scalar_type())) +
                                                   " with " + std::to_string(t.dim()) +
                                                   " dimension(s)");
  const at::Tensor c = t.cpu().contiguous();
  out.assign(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  return true;
}

}  // namespace rh
