#include "torch/TorchServices.hpp"

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <ATen/Parallel.h>

#include "plugins/HostApi.hpp"
#include "plugins/HostError.hpp"

namespace rh::host {
namespace {

rh_Error* Tensor_Alloc(rh_Context*, const int64_t* shape, int32_t ndim, DLDataType dtype,
                       DLDevice device, DLManagedTensor** out) {
  try {
    if (out == nullptr || ndim < 0 || (ndim > 0 && shape == nullptr))
      return new_error(RH_ERROR_INVALID_ARGUMENT, "Tensor_Alloc: bad shape or NULL out");
    at::Device dev = device.device_type == kDLCUDA
                         ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device.device_id))
                         : at::Device(at::kCPU);
    if (device.device_type != kDLCPU && device.device_type != kDLCUDA)
      return new_error(RH_ERROR_INVALID_ARGUMENT, "Tensor_Alloc: unsupported device type " +
                                                      std::to_string(device.device_type));
    at::Tensor t = at::empty(at::IntArrayRef(shape, static_cast<size_t>(ndim)),
                             at::TensorOptions().dtype(at::toScalarType(dtype)).device(dev));
    *out = at::toDLPack(t);
    return nullptr;
  } catch (const std::exception& e) {
    return new_error(RH_ERROR_INVALID_ARGUMENT, std::string("Tensor_Alloc: ") + e.what());
  }
}

}  // namespace

void install_torch_services(HostServices& services) {
  services.mutable_api().Tensor_Alloc = &Tensor_Alloc;
}

void set_torch_threads(int threads) {
  if (threads > 0) at::set_num_threads(threads);
}

}  // namespace rh::host
