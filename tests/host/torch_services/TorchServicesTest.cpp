// The host's LibTorch services: the native tag and Tensor_Alloc.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "abi/HostApi.hpp"
#include "rh/cpp/torch.hpp"
#include "torch_services/TorchServices.hpp"

namespace {

TEST(TorchServicesTest, NativeTagNamesThisLibTorch) {
  auto tag = rh::host::host_native_tag();
  EXPECT_EQ(tag.torch_version, TORCH_VERSION);
  EXPECT_EQ(tag.cxx11_abi, _GLIBCXX_USE_CXX11_ABI);
  EXPECT_TRUE(tag.device == "cpu" || tag.device == "cuda");
}

TEST(TorchServicesTest, TensorAllocHandsOverAnOwnedTensor) {
  rh::host::HostServices services;
  rh::host::install_torch_services(services);
  const rh_HostApi* api = services.api();
  ASSERT_NE(api->Tensor_Alloc, nullptr);
  int64_t shape[2] = {3, 4};
  DLManagedTensor* t = nullptr;
  ASSERT_EQ(
      api->Tensor_Alloc(nullptr, shape, 2, DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0}, &t),
      nullptr);
  at::Tensor view = rh::borrow_tensor(t);
  EXPECT_EQ(view.sizes(), at::IntArrayRef({3, 4}));
  EXPECT_EQ(view.scalar_type(), at::kFloat);
  view.fill_(2.0);
  at::Tensor owned = rh::adopt_tensor(t);  // takes over the deleter
  EXPECT_EQ(owned.sum().item<float>(), 24.0f);
  rh_Error* bad =
      api->Tensor_Alloc(nullptr, shape, 2, DLDataType{kDLFloat, 32, 1}, DLDevice{kDLOpenCL, 0}, &t);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(api->Error_Code(bad), RH_ERROR_INVALID_ARGUMENT);
  api->Error_Destroy(bad);
}

// Stream_Current: NULL while the rank computes on the CPU; on a GPU the
// stream LibTorch queues on, never NULL (the default stream comes as
// cudaStreamLegacy, 0x1).
TEST(TorchServicesTest, StreamCurrentIsNullOnTheCpuAndAStreamOnAGpu) {
  rh::host::HostServices services;
  rh::host::install_torch_services(services);
  const rh_HostApi* api = services.api();
  ASSERT_NE(api->Stream_Current, nullptr);
  rh_Context* ctx = services.new_context("test", "stream");
  EXPECT_EQ(api->Stream_Current(ctx), nullptr);
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU: the CUDA half needs one";
  services.set_device(DLDevice{kDLCUDA, 0});
  void* stream = api->Stream_Current(ctx);
  EXPECT_NE(stream, nullptr) << "a CUDA rank must get a stream (" << RH_TORCH_DEVICE << " build)";
}

TEST(TorchServicesTest, DlpackRoundTripSharesStorage) {
  at::Tensor a = torch::arange(6, torch::kFloat).reshape({2, 3});
  DLManagedTensor* dl = rh::export_tensor(a);
  at::Tensor b = rh::adopt_tensor(dl);
  EXPECT_EQ(a.data_ptr(), b.data_ptr());
  DLManagedTensor* strided = rh::export_tensor(a.t());
  at::Tensor c = rh::borrow_tensor(strided);  // a view: no copy, no ownership
  EXPECT_EQ(c.data_ptr(), a.data_ptr());
  EXPECT_TRUE(torch::equal(c, a.t()));
  strided->deleter(strided);
}

}  // namespace
