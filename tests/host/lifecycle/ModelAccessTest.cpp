// The model as strategies see it (ModelAccess behind rh_ModelApi): one DLPack
// view per tensor however often a strategy asks (ddp asks for every buffer
// every step), and a view that follows a tensor whose storage is replaced.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "abi/HostError.hpp"
#include "host/model/ModelTestUtil.hpp"
#include "lifecycle/ModelAccess.hpp"
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

// The view Model_GetGrad lends owns its gradient. It is valid "until the
// optimizer's zero_grad", and the train step ends every such borrow there
// (end_gradient_borrows): otherwise the views kept the previous step's
// gradients (4 bytes a parameter) alive through the next forward after
// zero_grad had dropped them (issue 39: ddp's peak above PyTorch DDP's).
TEST(ModelAccessTest, ZeroGradEndsTheGradientBorrowsAndFreesTheGradients) {
  auto model = small_convnet();
  ModelAccess access(*model);
  rh_Model* m = access.handle();
  const size_t params = access.api()->Model_NumParams(m);
  model->forward(at::randn({2, 3, 8, 8})).sum().backward();
  std::vector<at::Tensor> grads;  // our own references, to count the others
  for (size_t i = 0; i < params; ++i) {
    DLManagedTensor* view = nullptr;
    ASSERT_EQ(access.api()->Model_GetGrad(m, i, &view), nullptr);
    ASSERT_NE(view, nullptr);
    grads.push_back(model->named_parameters()[i].tensor.grad());
  }
  const size_t held = access.held_views();
  // zero_grad (set to none), as OptimWrapper::zero_grad does it.
  for (auto& p : model->named_parameters()) p.tensor.mutable_grad() = at::Tensor();
  for (size_t i = 0; i < params; ++i)
    EXPECT_EQ(grads[i].use_count(), 2) << "param " << i << ": ours and the lent view's";
  access.end_gradient_borrows();
  for (size_t i = 0; i < params; ++i)
    EXPECT_EQ(grads[i].use_count(), 1) << "param " << i << ": the view still holds it";
  EXPECT_EQ(access.held_views(), held - params);
}

// ---- ABI 1.3: what sharding strategies use ------------------------------------

std::string take_message(rh_Error* err) {
  std::string m = err->message;
  delete err;
  return m;
}

std::unique_ptr<rh::model::Model> small_mlp() {
  return rh::model::test::build(
      "type: mlp\nin_features: 4\nhidden: [6, 6]\nnum_classes: 3\nfrozen: [layers.1]");
}

// Freed: the storage holds no memory (0 bytes), the tensor keeps its shape;
// restored and refilled before backward, the gradients are exactly those of
// a model that never freed anything (autograd's saved tensors share the
// storage).
TEST(ModelAccessTest, FreedStorageRestoredBeforeBackwardGivesExactGradients) {
  auto plain = small_mlp();
  auto sharded = small_mlp();
  ModelAccess access(*sharded);
  rh_Model* m = access.handle();
  const rh_ModelApi* api = access.api();
  const at::Tensor x = torch::randn({5, 4});
  plain->forward(x).sum().backward();
  at::Tensor out = sharded->forward(x);
  const size_t n = api->Model_NumParams(m);
  std::vector<at::Tensor> saved;
  for (size_t i = 0; i < n; ++i) {
    saved.push_back(sharded->named_parameters()[i].tensor.detach().clone());
    ASSERT_EQ(api->Model_FreeParamStorage(m, i), nullptr);
    EXPECT_EQ(sharded->named_parameters()[i].tensor.storage().nbytes(), 0u);
    EXPECT_EQ(sharded->named_parameters()[i].tensor.sizes(), saved[i].sizes());
  }
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(api->Model_RestoreParamStorage(m, i), nullptr);
    rh::borrow_tensor(param_info(access, m, i, false).data).copy_(saved[i]);
  }
  out.sum().backward();
  for (size_t i = 0; i < n; ++i) {
    const auto& a = plain->named_parameters()[i].tensor;
    const auto& b = sharded->named_parameters()[i].tensor;
    ASSERT_EQ(a.grad().defined(), b.grad().defined()) << i;
    if (a.grad().defined()) {
      EXPECT_TRUE(a.grad().equal(b.grad())) << i;
    }
  }
}

TEST(ModelAccessTest, SetParamDataKeepsTheShapeAndRefusesADtypeChangeAfterCallbacks) {
  auto model = small_mlp();
  ModelAccess access(*model);
  rh_Model* m = access.handle();
  const rh_ModelApi* api = access.api();
  const at::Tensor p0 = model->named_parameters()[0].tensor;
  DLManagedTensor* wrong = rh::export_tensor(torch::zeros({1, 2}));
  rh_Error* err = api->Model_SetParamData(m, 0, wrong);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(take_message(err).find("the shape must stay"), std::string::npos);
  wrong->deleter(wrong);  // on error it stays with the caller
  // bf16 before any callback: allowed, and the model computes with it.
  DLManagedTensor* bf16 = rh::export_tensor(p0.detach().to(at::kBFloat16));
  ASSERT_EQ(api->Model_SetParamData(m, 0, bf16), nullptr);
  EXPECT_EQ(model->named_parameters()[0].tensor.scalar_type(), at::kBFloat16);
  ASSERT_EQ(api->Model_AddGradReadyCallback(
                m, 0, [](void*, size_t) {}, nullptr),
            nullptr);
  DLManagedTensor* f32 = rh::export_tensor(p0.detach().to(at::kFloat));
  err = api->Model_SetParamData(m, 0, f32);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(take_message(err).find("grad-ready callback"), std::string::npos);
  f32->deleter(f32);
}

// A unit callback that appends "<phase letter><unit>" to the
// std::vector<std::string> it is given: F/f before/after forward, B/b
// before/after backward.
rh_Error* record_phase(void* user, int32_t unit, rh_UnitPhase phase) {
  static const char* names[] = {"F", "f", "B", "b"};
  static_cast<std::vector<std::string>*>(user)->push_back(names[phase] + std::to_string(unit));
  return nullptr;
}

// Every phase, in the order a strategy relies on; POST_BACKWARD also for the
// frozen unit (no gradient) when backward returns.
TEST(ModelAccessTest, UnitCallbacksFireAroundForwardAndBackward) {
  auto model = small_mlp();
  ModelAccess access(*model);
  rh_Model* m = access.handle();
  const rh_ModelApi* api = access.api();
  std::vector<std::string> events;
  const int32_t units = static_cast<int32_t>(api->Model_NumUnits(m));
  ASSERT_EQ(units, 3);
  for (int32_t u = 0; u < units; ++u)
    for (rh_UnitPhase ph :
         {RH_UNIT_PRE_FORWARD, RH_UNIT_POST_FORWARD, RH_UNIT_PRE_BACKWARD, RH_UNIT_POST_BACKWARD})
      ASSERT_EQ(api->Model_AddUnitCallback(m, u, ph, record_phase, &events), nullptr);
  at::Tensor out = model->forward(torch::randn({2, 4}));
  access.begin_backward();
  out.sum().backward();
  access.end_backward();
  // Forward in order; backward in reverse, each unit's POST after its PRE;
  // unit 1 (frozen) gets its POST_BACKWARD at the end.
  const std::vector<std::string> expected = {"F0", "f0", "F1", "f1", "F2", "f2",
                                             "B2", "b2", "B1", "B0", "b0", "b1"};
  EXPECT_EQ(events, expected);
}

// The model's per-unit work is installed when a plugin first asks for a
// unit phase, and the PreBackward hook on each unit's output only once a
// PRE_BACKWARD callback exists (an autograd hook per unit per forward costs
// allocations). Each step sees exactly the phases asked for so far.
TEST(ModelAccessTest, UnitPhasesFireFromTheForwardAfterTheyAreAskedFor) {
  auto model = small_mlp();
  ModelAccess access(*model);
  rh_Model* m = access.handle();
  const rh_ModelApi* api = access.api();
  std::vector<std::string> events;
  auto step = [&] {
    events.clear();
    at::Tensor out = model->forward(torch::randn({2, 4}));
    access.begin_backward();
    out.sum().backward();
    access.end_backward();
    return events;
  };
  EXPECT_EQ(step(), std::vector<std::string>{});
  ASSERT_EQ(api->Model_AddUnitCallback(m, 0, RH_UNIT_PRE_FORWARD, record_phase, &events), nullptr);
  EXPECT_EQ(step(), std::vector<std::string>{"F0"});
  ASSERT_EQ(api->Model_AddUnitCallback(m, 2, RH_UNIT_PRE_BACKWARD, record_phase, &events), nullptr);
  EXPECT_EQ(step(), (std::vector<std::string>{"F0", "B2"}));
  ASSERT_EQ(api->Model_AddUnitCallback(m, 0, RH_UNIT_POST_BACKWARD, record_phase, &events),
            nullptr);
  EXPECT_EQ(step(), (std::vector<std::string>{"F0", "B2", "b0"}));
}

TEST(ModelAccessTest, ReleaseGradDropsTheGradientAndItsView) {
  auto model = small_mlp();
  ModelAccess access(*model);
  rh_Model* m = access.handle();
  const rh_ModelApi* api = access.api();
  model->forward(torch::randn({2, 4})).sum().backward();
  DLManagedTensor* view = nullptr;
  ASSERT_EQ(api->Model_GetGrad(m, 0, &view), nullptr);
  ASSERT_NE(view, nullptr);
  const size_t held = access.held_views();
  ASSERT_EQ(api->Model_ReleaseGrad(m, 0), nullptr);
  EXPECT_FALSE(model->named_parameters()[0].tensor.grad().defined());
  EXPECT_EQ(access.held_views(), held - 1);
}

// A model with a parameter outside every unit (`scale`, used after them).
class RootParamModel final : public rh::model::Model {
 public:
  at::Tensor forward(const at::Tensor& x) override {
    enter_unit(0);
    at::Tensor h = exit_unit(0, x.matmul(a_));
    enter_unit(1);
    h = exit_unit(1, h.matmul(b_));
    return h * scale_;
  }
  std::vector<rh::model::NamedTensor> named_parameters() override {
    return {{"a.w", a_}, {"b.w", b_}, {"scale", scale_}};
  }
  std::vector<rh::model::NamedTensor> named_buffers() override { return {}; }
  std::vector<rh::model::Unit> units() const override {
    return {{"a", {"a.w"}, {}}, {"b", {"b.w"}, {}}};
  }
  void train(bool) override {}
  void to(const at::Device&) override {}
  rh::model::Task task() const override { return rh::model::Task::Classification; }

 private:
  at::Tensor a_ = torch::randn({3, 3}).requires_grad_();
  at::Tensor b_ = torch::randn({3, 2}).requires_grad_();
  at::Tensor scale_ = torch::ones({1}).requires_grad_();
};

// One rule for a parameter no unit declares (ABI 1.8): unit -1, as fsdp and
// the host's checkpoints treat it (the root), and its gradient holds back no
// unit's POST_BACKWARD.
TEST(ModelAccessTest, AParameterInNoUnitIsUnitMinusOne) {
  RootParamModel model;
  ModelAccess access(model);
  rh_Model* m = access.handle();
  EXPECT_EQ(param_info(access, m, 0, false).unit, 0);
  EXPECT_EQ(param_info(access, m, 1, false).unit, 1);
  EXPECT_EQ(param_info(access, m, 2, false).unit, -1);
  std::vector<std::string> events;
  for (int32_t u = 0; u < 2; ++u)
    ASSERT_EQ(
        access.api()->Model_AddUnitCallback(m, u, RH_UNIT_POST_BACKWARD, &record_phase, &events),
        nullptr);
  access.begin_backward();
  model.forward(torch::randn({4, 3})).sum().backward();
  access.end_backward();
  EXPECT_EQ(events, (std::vector<std::string>{"b1", "b0"}));
}

}  // namespace
