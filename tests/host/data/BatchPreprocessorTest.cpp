// The data_preprocessor (BatchPreprocessor.hpp): normalisation as
// MMPretrain's ClsDataPreprocessor computes it, Mixup and CutMix as its
// batch augments mix (checked on images whose pixels say which sample they
// are), and the draws repeating for the same (seed, iteration, rank).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "data/BatchPreprocessor.hpp"
#include "data/DataLoader.hpp"
#include "host/data/DataTestUtil.hpp"

namespace rh::data {
namespace {

std::unique_ptr<BatchPreprocessor> from(const std::string& job, int64_t classes = 4) {
  return BatchPreprocessor::from_job(*test::yaml(job), classes, 5, 0);
}

TEST(BatchPreprocessorTest, NormalisesEightBitImagesInRgb) {
  const auto p = from("data_preprocessor: {mean: [1, 2, 3], std: [2, 4, 8], to_rgb: true}");
  ASSERT_TRUE(p);
  // BGR pixel (10, 20, 30): RGB (30, 20, 10); ((30-1)/2, (20-2)/4, (10-3)/8).
  torch::Tensor x = torch::empty({1, 3, 1, 1}, torch::kByte);
  x[0][0] = 10;
  x[0][1] = 20;
  x[0][2] = 30;
  const torch::Tensor y = p->input(x, torch::kCPU);
  ASSERT_EQ(y.scalar_type(), torch::kFloat);
  EXPECT_FLOAT_EQ(y[0][0].item<float>(), 29.0f / 2);
  EXPECT_FLOAT_EQ(y[0][1].item<float>(), 18.0f / 4);
  EXPECT_FLOAT_EQ(y[0][2].item<float>(), 7.0f / 8);
  // A batch: the one-pass table on the CPU is the tensor arithmetic (a
  // GPU's path) bit for bit: one float32 subtraction and one division.
  const torch::Tensor batch = torch::randint(0, 256, {2, 3, 5, 7}, torch::kByte);
  const torch::Tensor mean = torch::tensor({1.0, 2.0, 3.0}, torch::kFloat).view({1, 3, 1, 1});
  const torch::Tensor sd = torch::tensor({2.0, 4.0, 8.0}, torch::kFloat).view({1, 3, 1, 1});
  EXPECT_TRUE(
      torch::equal(p->input(batch, torch::kCPU), (batch.to(torch::kFloat).flip({1}) - mean) / sd));
  // A float input (a dataset that normalises itself) passes unchanged.
  const torch::Tensor f = torch::rand({2, 3});
  EXPECT_TRUE(torch::equal(p->input(f, torch::kCPU), f));
  // Without the keys: float32 0..255, as ClsDataPreprocessor's defaults.
  const auto plain = from("model: {type: vit}");
  ASSERT_TRUE(plain);
  EXPECT_TRUE(torch::equal(plain->input(batch, torch::kCPU), batch.to(torch::kFloat)));
  EXPECT_THAT(test::config_error([] {
                from("data_preprocessor: {mean: [0, 0, 0]}\nmodel: {data_preprocessor: {}}");
              }),
              ::testing::HasSubstr("give it once"));
  EXPECT_THAT(test::config_error([] { from("data_preprocessor: {num_classes: 10}"); }),
              ::testing::HasSubstr("num_classes 10 but the model has 4"));
}

// 4 images of 6 x 10, image i filled with the value i, label i: a mixed
// pixel and a score row say which partner each image got.
Batch numbered() {
  Batch b;
  b.input = torch::arange(4, torch::kFloat).view({4, 1, 1, 1}).expand({4, 3, 6, 10}).contiguous();
  b.target = torch::arange(4, torch::kLong);
  b.num_real = 4;
  return b;
}

// Image i's partner: the other label its score row holds (i itself when the
// permutation left it in place).
int64_t partner(const torch::Tensor& score, int64_t i) {
  torch::Tensor row = score[i].clone();
  row[i] = -1;
  return row.max().item<double>() > 1e-6 ? row.argmax().item<int64_t>() : i;
}

TEST(BatchPreprocessorTest, MixupMixesEachImageWithOnePartnerByLambda) {
  const auto p = from("model: {train_cfg: {augments: [{type: Mixup, alpha: 0.8}]}}");
  int mixed = 0;
  for (int64_t it = 1; it <= 10; ++it) {
    const auto [x, score] = p->train(numbered(), torch::kCPU, it);
    ASSERT_EQ(score.sizes(), (std::vector<int64_t>{4, 4}));
    EXPECT_TRUE(torch::allclose(score.sum(1), torch::ones({4})));
    double lam = -1;
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t j = partner(score, i);
      if (j == i) continue;
      ++mixed;
      const double l = score[i][i].item<double>();
      if (lam >= 0) {
        EXPECT_NEAR(l, lam, 1e-6) << "one lambda per batch";
      }
      lam = l;
      // Every pixel of image i is lam i + (1 - lam) j (float32 arithmetic).
      const torch::Tensor expected = torch::full({3, 6, 10}, l * i + (1 - l) * j);
      EXPECT_TRUE(torch::allclose(x[i], expected, 0, 1e-5)) << "iteration " << it;
    }
  }
  EXPECT_GT(mixed, 10);  // 10 batches of 4 leave few in place
  // Repeatable for the same iteration, different for another.
  EXPECT_TRUE(torch::equal(p->train(numbered(), torch::kCPU, 3).first,
                           p->train(numbered(), torch::kCPU, 3).first));
  EXPECT_FALSE(torch::equal(p->train(numbered(), torch::kCPU, 3).first,
                            p->train(numbered(), torch::kCPU, 4).first));
}

TEST(BatchPreprocessorTest, CutMixPastesABoxAndScoresTheUncoveredShare) {
  const auto p = from("model: {train_cfg: {augments: [{type: CutMix, alpha: 1.0}]}}");
  int mixed = 0;
  for (int64_t it = 1; it <= 10; ++it) {
    const auto [x, score] = p->train(numbered(), torch::kCPU, it);
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t j = partner(score, i);
      const torch::Tensor img = x[i][0];
      // Each pixel is i or the partner's; the share still i is lambda
      // (correct_lam: from the clipped box), exactly: a count over 60.
      EXPECT_TRUE(torch::logical_or(img.eq(static_cast<float>(i)), img.eq(static_cast<float>(j)))
                      .all()
                      .item<bool>());
      if (j == i) continue;
      ++mixed;
      const double kept = img.eq(static_cast<float>(i)).sum().item<double>() / 60.0;
      EXPECT_NEAR(score[i][i].item<double>(), kept, 1e-6) << "iteration " << it;
    }
  }
  EXPECT_GT(mixed, 10);
}

TEST(BatchPreprocessorTest, ProbsLeaveTheRestOfTheBatchesUnmixed) {
  const auto p = from("model: {train_cfg: {augments: [{type: Mixup, alpha: 0.8}], probs: [0.0]}}");
  const auto [x, score] = p->train(numbered(), torch::kCPU, 1);
  EXPECT_TRUE(torch::equal(x, numbered().input));
  EXPECT_TRUE(torch::equal(score, torch::one_hot(numbered().target, 4).to(torch::kFloat)));
}

}  // namespace
}  // namespace rh::data
