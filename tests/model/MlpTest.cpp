#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/ModelTestUtil.hpp"

namespace rh::model::test {
namespace {

TEST(MlpTest, NamesOneUnitPerLinear) {
  auto model = build("type: mlp\nin_features: 3\nhidden: [5, 6]\nnum_classes: 2");
  EXPECT_EQ(param_names(*model),
            (std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.1.weight",
                                      "layers.1.bias", "head.weight", "head.bias"}));
  EXPECT_EQ(unit_names(*model), (std::vector<std::string>{"layers.0", "layers.1", "head"}));
  EXPECT_EQ(model->named_parameters()[0].tensor.sizes(), at::IntArrayRef({5, 3}));
  EXPECT_TRUE(model->named_buffers().empty());
}

TEST(MlpTest, DefaultsToOneHiddenLayerOf128) {
  auto model = build("type: mlp\nin_features: 3\nnum_classes: 2");
  EXPECT_EQ(unit_names(*model), (std::vector<std::string>{"layers.0", "head"}));
  EXPECT_EQ(model->named_parameters()[0].tensor.sizes(), at::IntArrayRef({128, 3}));
}

TEST(MlpTest, NoHiddenLayersIsALinearModel) {
  auto model = build("type: mlp\nin_features: 3\nhidden: []\nnum_classes: 2");
  EXPECT_EQ(unit_names(*model), (std::vector<std::string>{"head"}));
}

TEST(MlpTest, FitsSixtyFourRandomPoints) {
  torch::manual_seed(0);
  auto model = build("type: mlp\nin_features: 8\nhidden: [64]\nnum_classes: 4\nactivation: tanh");
  const at::Tensor x = torch::randn({64, 8});
  const at::Tensor y = torch::randint(0, 4, {64});
  const auto [first, last] = fit(*model, x, y, /*steps=*/200, /*lr=*/2e-2);
  EXPECT_LT(last, 0.1 * first);
  torch::NoGradGuard no_grad;
  const double accuracy =
      (model->forward(x).argmax(1) == y).to(torch::kFloat).mean().item<double>();
  EXPECT_GE(accuracy, 0.95);
}

TEST(MlpTest, DropoutOnlyInTraining) {
  auto model = build(
      "type: mlp\nin_features: 8\nhidden: [32]\nnum_classes: 4\ndropout: 0.5\n"
      "activation: gelu");
  const at::Tensor x = torch::randn({4, 8});
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(torch::equal(model->forward(x), model->forward(x)));
  model->train(false);
  EXPECT_TRUE(torch::equal(model->forward(x), model->forward(x)));
}

TEST(MlpTest, WrongInputWidthNamesTheExpectedShape) {
  auto model = build("type: mlp\nin_features: 8\nnum_classes: 4");
  try {
    model->forward(torch::randn({2, 7}));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "mlp: expected input (B, 8), got [2, 7]");
  }
}

}  // namespace
}  // namespace rh::model::test
