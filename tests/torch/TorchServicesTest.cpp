// The host's LibTorch services: the native tag and Tensor_Alloc.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "plugins/HostApi.hpp"
#include "rh/cpp/torch.hpp"
#include "torch/TorchServices.hpp"

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
