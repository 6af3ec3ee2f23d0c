#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/ModelTestUtil.hpp"

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
