#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>

#include "host/model/ModelTestUtil.hpp"

namespace rh::model::test {
namespace {

const char* const kTinyGpt =
    "type: gpt\nvocab_size: 11\nblock_size: 6\ndim: 16\ndepth: 1\nheads: 2";

TEST(GptTest, NamesEmbedBlocksAndHead) {
  auto model = build(kTinyGpt);
  const std::vector<std::string> names = param_names(*model);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 2),
            (std::vector<std::string>{"embed.token.weight", "embed.position.weight"}));
  EXPECT_EQ(std::vector<std::string>(names.end() - 3, names.end()),
            (std::vector<std::string>{"head.norm.weight", "head.norm.bias", "head.fc.weight"}));
  EXPECT_EQ(model->named_parameters().back().tensor.sizes(), at::IntArrayRef({11, 16}));
  EXPECT_EQ(model->task(), Task::LanguageModel);
}

TEST(GptTest, LogitsAtTDoNotDependOnLaterTokens) {
  auto model = build(kTinyGpt);
  expect_causal(*model, /*vocab=*/11, /*batch=*/2, /*tokens=*/6);
}

TEST(GptTest, ShorterSequencesWork) {
  auto model = build(kTinyGpt);
  EXPECT_EQ(model->forward(torch::randint(0, 11, {3, 2})).sizes(), at::IntArrayRef({3, 2, 11}));
}

TEST(GptTest, MoreTokensThanBlockSizeIsAnError) {
  auto model = build(kTinyGpt);
  try {
    model->forward(torch::randint(0, 11, {1, 7}));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "gpt: input has T=7 tokens, more than block_size=6 (raise model.block_size or "
                 "feed shorter sequences)");
  }
  EXPECT_THROW(model->forward(torch::zeros({1, 3})), std::invalid_argument);  // float ids
}

// model.mlp_ratio and model.dropout, as for vit: the blocks' MLP width, and
// dropout only while training.
TEST(GptTest, MlpRatioSetsTheHiddenWidthAndDropoutActsOnlyInTraining) {
  auto wide = build(std::string(kTinyGpt) + "\nmlp_ratio: 2");
  bool found = false;
  for (const NamedTensor& p : wide->named_parameters())
    if (p.name == "blocks.0.mlp.fc1.weight") {
      EXPECT_EQ(p.tensor.sizes(), at::IntArrayRef({32, 16}));
      found = true;
    }
  EXPECT_TRUE(found);
  auto dropped = build(std::string(kTinyGpt) + "\ndropout: 0.5");
  const at::Tensor tokens = torch::randint(0, 11, {2, 6});
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(torch::allclose(dropped->forward(tokens), dropped->forward(tokens)));
  dropped->train(false);
  EXPECT_TRUE(torch::equal(dropped->forward(tokens), dropped->forward(tokens)));
}

TEST(GptTest, TiedHeadSharesTheTokenEmbedding) {
  auto untied = build(kTinyGpt);
  auto tied = build(std::string(kTinyGpt) + "\ntie_weights: true");
  const std::vector<std::string> names = param_names(*tied);
  EXPECT_EQ(names.size(), param_names(*untied).size() - 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "head.fc.weight"), 0);
  const std::vector<Unit> units = tied->units();
  EXPECT_EQ(units.back().param_names,
            (std::vector<std::string>{"head.norm.weight", "head.norm.bias"}));
  EXPECT_EQ(units.front().param_names[0], "embed.token.weight");

  // The head reads the embedding: rows of tokens absent from the input get a
  // gradient only through it, and an edit of the weight changes the logits.
  const at::Tensor tokens = torch::zeros({1, 4}, torch::kLong);
  const at::Tensor embedding = tied->named_parameters()[0].tensor;
  tied->forward(tokens).sum().backward();
  EXPECT_GT(embedding.grad().slice(0, 1).abs().sum().item<double>(), 0.0);
  untied->forward(tokens).sum().backward();
  EXPECT_EQ(untied->named_parameters()[0].tensor.grad().slice(0, 1).abs().sum().item<double>(),
            0.0);
  torch::NoGradGuard no_grad;
  const at::Tensor before = tied->forward(tokens);
  embedding[5].mul_(3.0);  // token 5 is not in the input
  EXPECT_FALSE(torch::allclose(tied->forward(tokens).select(2, 5), before.select(2, 5)));
}

}  // namespace
}  // namespace rh::model::test
