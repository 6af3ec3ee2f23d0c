// The model as strategies see it (ModelAccess behind rh_ModelApi): one DLPack
// view per tensor however often a strategy asks (ddp asks for every buffer
// every step), and a view that follows a tensor whose storage is replaced.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lifecycle/ModelAccess.hpp"
#include "model/ModelTestUtil.hpp"
#include "rh/cpp/torch.hpp"

namespace {

using rh::lifecycle::ModelAccess;

rh_ParamInfo param_info(const ModelAccess& access, rh_Model* m, size_t i, bool buffer) {
  rh_ParamInfo info{};
  info.struct_size = RH_PARAM_INFO_STRUCT_SIZE;
  const rh_ModelApi* api = access.api();
  rh_Error* err = buffer ? api->Model_GetBuffer(m, i, &info) : api->Model_GetParam(m, i, &info);
  EXPECT_EQ(err, nullptr);
  return info;
}

// A convnet with batch norm: parameters and buffers (running statistics).
std::unique_ptr<rh::model::Model> small_convnet() {
  return rh::model::test::build("type: convnet\nnum_classes: 3\nwidth: 4\nblocks: [1]");
}

TEST(ModelAccessTest, OneViewPerTensorOver1000StepsOfRequests) {
  auto model = small_convnet();
  ModelAccess access(*model);
  rh_Model* m = access.handle();
  const size_t params = access.api()->Model_NumParams(m);
  const size_t buffers = access.api()->Model_NumBuffers(m);
  ASSERT_GT(buffers, 0u);
  std::vector<DLManagedTensor*> first;
  for (size_t i = 0; i < params; ++i) first.push_back(param_info(access, m, i, false).data);
  for (size_t i = 0; i < buffers; ++i) first.push_back(param_info(access, m, i, true).data);
  const size_t held = access.held_views();
  EXPECT_EQ(held, params + buffers);
  // What ddp does every step (broadcast_buffers), 1000 times, while training
  // updates the tensors in place.
  for (int step = 0; step < 1000; ++step) {
    {
      torch::NoGradGuard no_grad;
      model->named_parameters()[0].tensor.add_(1.0);
    }
    for (size_t i = 0; i < params; ++i)
      ASSERT_EQ(param_info(access, m, i, false).data, first[i]) << "param " << i;
    for (size_t i = 0; i < buffers; ++i)
      ASSERT_EQ(param_info(access, m, i, true).data, first[params + i]) << "buffer " << i;
  }
  EXPECT_EQ(access.held_views(), held);
  // The cached view shows the current values.
  const at::Tensor p0 = model->named_parameters()[0].tensor;
  EXPECT_TRUE(rh::borrow_tensor(first[0]).equal(p0.detach()));
}

TEST(ModelAccessTest, AViewFollowsAReplacedStorage) {
  auto model = small_convnet();
  ModelAccess access(*model);
  rh_Model* m = access.handle();
  DLManagedTensor* before = param_info(access, m, 0, false).data;
  const std::vector<int64_t> old_shape(before->dl_tensor.shape,
                                       before->dl_tensor.shape + before->dl_tensor.ndim);
  at::Tensor p0 = model->named_parameters()[0].tensor;
  // What a sharding strategy does: the parameter keeps its identity, its
  // storage (and shape) change.
  p0.set_data(at::arange(6, at::kFloat).reshape({2, 3}));
  DLManagedTensor* after = param_info(access, m, 0, false).data;
  ASSERT_NE(after, before);
  EXPECT_EQ(static_cast<char*>(after->dl_tensor.data) + after->dl_tensor.byte_offset,
            p0.data_ptr());
  EXPECT_TRUE(rh::borrow_tensor(after).equal(p0.detach()));
  // The old view stays valid (the ABI lends it until the end of the run).
  EXPECT_EQ(std::vector<int64_t>(before->dl_tensor.shape,
                                 before->dl_tensor.shape + before->dl_tensor.ndim),
            old_shape);
  const size_t held = access.held_views();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(param_info(access, m, 0, false).data, after);
  EXPECT_EQ(access.held_views(), held);
}

TEST(ModelAccessTest, OneGradientViewPerGradient) {
  auto model = small_convnet();
  ModelAccess access(*model);
  rh_Model* m = access.handle();
  at::Tensor x = at::randn({2, 3, 8, 8});
  model->forward(x).sum().backward();
  DLManagedTensor* grad = nullptr;
  ASSERT_EQ(access.api()->Model_GetGrad(m, 0, &grad), nullptr);
  ASSERT_NE(grad, nullptr);
  const size_t held = access.held_views();
  for (int i = 0; i < 1000; ++i) {
    DLManagedTensor* again = nullptr;
    ASSERT_EQ(access.api()->Model_GetGrad(m, 0, &again), nullptr);
    ASSERT_EQ(again, grad);
  }
  EXPECT_EQ(access.held_views(), held);
}

}  // namespace
