#include "torch_services/TorchServices.hpp"

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <ATen/Parallel.h>

#ifdef RH_WITH_C10_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "abi/HostApi.hpp"
#include "abi/HostError.hpp"

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

// The stream LibTorch queues work on for this rank's device, so that a
// plugin's own CUDA work is ordered with the host's. LibTorch's default
// stream has the handle 0, which the ABI reserves for "on the CPU": it is
// handed out as cudaStreamLegacy, the same stream under its explicit name.
void* Stream_Current(rh_Context* context) {
#ifdef RH_WITH_C10_CUDA
  if (context == nullptr || context->services == nullptr) return nullptr;
  const DLDevice d = context->services->device();
  if (d.device_type != kDLCUDA) return nullptr;
  try {
    cudaStream_t s =
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(d.device_id)).stream();
    return s != nullptr ? static_cast<void*>(s) : static_cast<void*>(cudaStreamLegacy);
  } catch (const std::exception&) {
    return nullptr;  // no such device: the entry has no error channel
  }
#else
  (void)context;  // a CPU-only LibTorch: every device is the CPU
  return nullptr;
#endif
}

}  // namespace

void install_torch_services(HostServices& services) {
  services.mutable_api().Tensor_Alloc = &Tensor_Alloc;
  services.mutable_api().Stream_Current = &Stream_Current;
}

void set_torch_threads(int threads) {
  if (threads > 0) at::set_num_threads(threads);
}

}  // namespace rh::host
