#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

#include "host/model/ModelTestUtil.hpp"

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
  // Training-quality thresholds: measured a loss 9e-4 of the first (0.1
  // leaves 110x) and accuracy 1.0 (0.95 leaves 3 of 64 points).
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

// model.activation: the function between the layers, as the job names it
// (relu by default): the logits equal head(act(layers.0(x))) computed here
// from the same weights.
TEST(MlpTest, TheActivationBetweenLayersIsTheOneTheJobNames) {
  torch::manual_seed(3);
  const at::Tensor x = torch::randn({4, 3}) * 2;
  std::map<std::string, at::Tensor> logits;
  for (const std::string act : {"", "relu", "gelu", "tanh"}) {
    auto model = build("type: mlp\nin_features: 3\nhidden: [5]\nnum_classes: 2" +
                       (act.empty() ? std::string() : "\nactivation: " + act));
    const std::vector<NamedTensor> p = model->named_parameters();
    ASSERT_EQ(p[0].name, "layers.0.weight");
    torch::NoGradGuard no_grad;
    at::Tensor h = torch::addmm(p[1].tensor, x, p[0].tensor.t());
    h = act == "gelu" ? torch::gelu(h) : act == "tanh" ? torch::tanh(h) : torch::relu(h);
    const at::Tensor want = torch::addmm(p[3].tensor, h, p[2].tensor.t());
    logits[act] = model->forward(x);
    // Bit for bit: a layer on a 2-D input with a bias is at::linear, which is
    // this addmm, and the activation the same function.
    EXPECT_TRUE(torch::equal(logits[act], want)) << "activation '" << act << "'";
  }
  EXPECT_TRUE(torch::equal(logits[""], logits["relu"]));  // the default
  EXPECT_FALSE(torch::allclose(logits["relu"], logits["gelu"]));
  EXPECT_FALSE(torch::allclose(logits["relu"], logits["tanh"]));
  EXPECT_FALSE(torch::allclose(logits["gelu"], logits["tanh"]));
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
