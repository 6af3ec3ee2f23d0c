#include <gtest/gtest.h>
#include <torch/torch.h>

#include "host/model/ModelTestUtil.hpp"

namespace rh::model::test {
namespace {

const char* const kTinyVit =
    "type: vit\nimage_size: 8\npatch_size: 4\ndim: 16\ndepth: 1\nheads: 2\nnum_classes: 3";

TEST(VitTest, NamesEmbedBlocksAndHead) {
  auto model = build(kTinyVit);
  EXPECT_EQ(param_names(*model), (std::vector<std::string>{"embed.patch.weight",
                                                           "embed.patch.bias",
                                                           "embed.cls_token",
                                                           "embed.pos_embed",
                                                           "blocks.0.norm1.weight",
                                                           "blocks.0.norm1.bias",
                                                           "blocks.0.attn.qkv.weight",
                                                           "blocks.0.attn.qkv.bias",
                                                           "blocks.0.attn.proj.weight",
                                                           "blocks.0.attn.proj.bias",
                                                           "blocks.0.norm2.weight",
                                                           "blocks.0.norm2.bias",
                                                           "blocks.0.mlp.fc1.weight",
                                                           "blocks.0.mlp.fc1.bias",
                                                           "blocks.0.mlp.fc2.weight",
                                                           "blocks.0.mlp.fc2.bias",
                                                           "head.norm.weight",
                                                           "head.norm.bias",
                                                           "head.fc.weight",
                                                           "head.fc.bias"}));
  const std::vector<NamedTensor> params = model->named_parameters();
  EXPECT_EQ(params[3].tensor.sizes(), at::IntArrayRef({1, 5, 16}));  // 2×2 patches + cls
  EXPECT_EQ(params[12].tensor.sizes(), at::IntArrayRef({32, 16}));   // mlp_ratio 2
}

TEST(VitTest, DefaultsAreATinyCifarVit) {
  auto model = build("type: vit\nnum_classes: 10");
  EXPECT_EQ(unit_names(*model), (std::vector<std::string>{"embed", "blocks.0", "blocks.1",
                                                          "blocks.2", "blocks.3", "head"}));
  EXPECT_EQ(model->named_parameters()[3].tensor.sizes(), at::IntArrayRef({1, 65, 64}));
}

TEST(VitTest, ClassTokenSeesEveryPatch) {
  auto model = build(kTinyVit);
  model->train(false);
  torch::NoGradGuard no_grad;
  at::Tensor x = torch::randn({1, 3, 8, 8});
  const at::Tensor before = model->forward(x);
  x.index_put_({0, 0, 7, 7}, 5.0);  // the last patch only
  EXPECT_FALSE(torch::allclose(model->forward(x), before));
}

// model.mlp_ratio: every block's MLP is dim x mlp_ratio wide (rounded).
TEST(VitTest, MlpRatioSetsTheHiddenWidthOfEveryBlock) {
  auto model = build(
      "type: vit\nimage_size: 8\npatch_size: 4\ndim: 16\ndepth: 2\nheads: 2\nnum_classes: 3\n"
      "mlp_ratio: 3");
  int seen = 0;
  for (const NamedTensor& p : model->named_parameters()) {
    if (p.name.find(".mlp.fc1.weight") != std::string::npos) {
      EXPECT_EQ(p.tensor.sizes(), at::IntArrayRef({48, 16})) << p.name;
      ++seen;
    }
    if (p.name.find(".mlp.fc2.weight") != std::string::npos) {
      EXPECT_EQ(p.tensor.sizes(), at::IntArrayRef({16, 48})) << p.name;
    }
  }
  EXPECT_EQ(seen, 2);
  auto rounded = build(std::string(kTinyVit) + "\nmlp_ratio: 1.5");
  EXPECT_EQ(rounded->named_parameters()[12].tensor.sizes(), at::IntArrayRef({24, 16}));
}

// model.heads: the attention is split into that many heads. The weights
// are the same for 1, 2 and 4 heads (one seed, same shapes); the logits are not.
TEST(VitTest, HeadsSplitTheAttention) {
  const std::string base =
      "type: vit\nimage_size: 8\npatch_size: 4\ndim: 16\ndepth: 1\nnum_classes: 3\nheads: ";
  auto one = build(base + "1");
  auto two = build(base + "2");
  auto four = build(base + "4");
  for (auto* m : {one.get(), two.get(), four.get()}) m->train(false);
  const std::vector<at::Tensor> w1 = snapshot(*one), w2 = snapshot(*two);
  ASSERT_EQ(w1.size(), w2.size());
  for (size_t i = 0; i < w1.size(); ++i) EXPECT_TRUE(torch::equal(w1[i], w2[i])) << i;
  const at::Tensor x = torch::randn({2, 3, 8, 8});
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(torch::allclose(one->forward(x), two->forward(x)));
  EXPECT_FALSE(torch::allclose(two->forward(x), four->forward(x)));
}

// model.dropout: random in training (two forwards of one input differ),
// none in evaluation.
TEST(VitTest, DropoutActsOnlyInTraining) {
  auto model = build(std::string(kTinyVit) + "\ndropout: 0.5");
  const at::Tensor x = torch::randn({2, 3, 8, 8});
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(torch::allclose(model->forward(x), model->forward(x)));
  model->train(false);
  EXPECT_TRUE(torch::equal(model->forward(x), model->forward(x)));
  auto plain = build(kTinyVit);  // default 0: training is deterministic too
  EXPECT_TRUE(torch::equal(plain->forward(x), plain->forward(x)));
}

TEST(VitTest, OtherImageSizesAreAnError) {
  auto model = build(kTinyVit);
  try {
    model->forward(torch::randn({1, 3, 16, 16}));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "vit: expected input (B, 3, 8, 8), got [1, 3, 16, 16] (model.image_size)");
  }
}

}  // namespace
}  // namespace rh::model::test
