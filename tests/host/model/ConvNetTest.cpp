#include <gtest/gtest.h>
#include <torch/torch.h>

#include <regex>

#include "host/model/ModelTestUtil.hpp"

namespace rh::model::test {
namespace {

// The rule paramwise norm_decay_mult relies on (Layers.hpp).
bool is_norm_name(const std::string& name) {
  static const std::regex rule(R"((^|\.)norm[^.]*\.)");
  return std::regex_search(name, rule);
}

TEST(ConvNetTest, NamesItsLayersAndNormsByTheRule) {
  auto model = build("type: convnet\nnum_classes: 10\nwidth: 4\nblocks: [1, 1]");
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"stem.conv.weight",
                                                           "stem.norm.weight",
                                                           "stem.norm.bias",
                                                           "stages.0.0.conv1.weight",
                                                           "stages.0.0.norm1.weight",
                                                           "stages.0.0.norm1.bias",
                                                           "stages.0.0.conv2.weight",
                                                           "stages.0.0.norm2.weight",
                                                           "stages.0.0.norm2.bias",
                                                           "stages.1.0.conv1.weight",
                                                           "stages.1.0.norm1.weight",
                                                           "stages.1.0.norm1.bias",
                                                           "stages.1.0.conv2.weight",
                                                           "stages.1.0.norm2.weight",
                                                           "stages.1.0.norm2.bias",
                                                           "stages.1.0.shortcut.conv.weight",
                                                           "stages.1.0.shortcut.norm.weight",
                                                           "stages.1.0.shortcut.norm.bias",
                                                           "head.weight",
                                                           "head.bias"}));
  for (const NamedTensor& p : model->named_parameters()) {
    const bool norm = p.name.find("norm") != std::string::npos;
    EXPECT_EQ(is_norm_name(p.name), norm) << p.name;
    if (norm) {
      EXPECT_EQ(p.tensor.dim(), 1) << p.name;
    }
  }
  // Stage 1 doubles the width: (8, 4, 3, 3).
  EXPECT_EQ(model->named_parameters()[9].tensor.sizes(), at::IntArrayRef({8, 4, 3, 3}));
}

TEST(ConvNetTest, DefaultsToThreeStagesOfWidth32) {
  auto model = build("type: convnet\nnum_classes: 10");
  EXPECT_EQ(unit_names(*model),
            (std::vector<std::string>{"stem", "stages.0.0", "stages.1.0", "stages.2.0", "head"}));
  const std::vector<NamedTensor> params = model->named_parameters();
  EXPECT_EQ(params.back().name, "head.bias");
  EXPECT_EQ(params[params.size() - 2].tensor.sizes(), at::IntArrayRef({10, 128}));
  EXPECT_EQ(model->forward(torch::randn({2, 3, 32, 32})).sizes(), at::IntArrayRef({2, 10}));
}

TEST(ConvNetTest, BatchNormKeepsRunningStatisticsAsBuffers) {
  auto model = build("type: convnet\nnum_classes: 3\nwidth: 4\nblocks: [1]");
  const std::vector<NamedTensor> buffers = model->named_buffers();
  ASSERT_EQ(buffers.size(), 9u);  // stem.norm, norm1, norm2
  EXPECT_EQ(buffers[0].name, "stem.norm.running_mean");
  EXPECT_EQ(buffers[1].name, "stem.norm.running_var");
  EXPECT_EQ(buffers[2].name, "stem.norm.num_batches_tracked");
  for (const NamedTensor& b : buffers) EXPECT_TRUE(is_norm_name(b.name)) << b.name;
  const at::Tensor x = torch::randn({4, 3, 8, 8}) * 3 + 1;
  model->forward(x);
  EXPECT_EQ(buffers[2].tensor.item<int64_t>(), 1);
  EXPECT_FALSE(torch::equal(buffers[0].tensor, torch::zeros({4})));
  // Evaluation uses the running statistics: one sample's logits do not
  // depend on the rest of the batch, and the buffers stay put.
  model->train(false);
  const at::Tensor mean = buffers[0].tensor.clone();
  torch::NoGradGuard no_grad;
  const at::Tensor all = model->forward(x);
  // Not bit for bit: a convolution may take another algorithm or blocking
  // for 1 image than for 4. Each output sums K products (27 in the stem, 36
  // in each 3x3 conv of 4 channels, then a mean of 64 positions and 4 in
  // the head): ~170u of the sums of |w·x| apart at worst (u = 2^-24), and
  // with inputs up to ~10 those sums stay below ~10: 1e-4 absolute.
  // Measured 1.2e-7 (logits up to 0.6); normalising with the batch's own
  // statistics in eval, the bug this guards, moves logits by 0.1 or more.
  EXPECT_TRUE(torch::allclose(model->forward(x.slice(0, 0, 1)), all.slice(0, 0, 1), 0, 1e-4));
  EXPECT_TRUE(torch::equal(buffers[0].tensor, mean));
  EXPECT_EQ(buffers[2].tensor.item<int64_t>(), 1);
}

TEST(ConvNetTest, GroupNormAndNoNorm) {
  auto group = build("type: convnet\nnum_classes: 3\nwidth: 4\nblocks: [1]\nnorm: group");
  EXPECT_TRUE(group->named_buffers().empty());
  EXPECT_EQ(param_names(*group)[1], "stem.norm.weight");
  auto none = build("type: convnet\nnum_classes: 3\nwidth: 4\nblocks: [1]\nnorm: none");
  EXPECT_TRUE(none->named_buffers().empty());
  EXPECT_EQ(param_names(*none), (std::vector<std::string>{
                                    "stem.conv.weight", "stem.conv.bias", "stages.0.0.conv1.weight",
                                    "stages.0.0.conv1.bias", "stages.0.0.conv2.weight",
                                    "stages.0.0.conv2.bias", "head.weight", "head.bias"}));
  for (auto* model : {group.get(), none.get()}) {
    EXPECT_EQ(model->forward(torch::randn({2, 3, 8, 12})).sizes(), at::IntArrayRef({2, 3}));
  }
}

TEST(ConvNetTest, AnyImageSizeFromEight) {
  auto model = build("type: convnet\nnum_classes: 3\nin_channels: 1\nwidth: 4");
  EXPECT_EQ(model->forward(torch::randn({2, 1, 8, 8})).sizes(), at::IntArrayRef({2, 3}));
  EXPECT_EQ(model->forward(torch::randn({2, 1, 20, 36})).sizes(), at::IntArrayRef({2, 3}));
  EXPECT_THROW(model->forward(torch::randn({2, 3, 8, 8})), std::invalid_argument);
}

}  // namespace
}  // namespace rh::model::test
