#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <iostream>
#include <tuple>

#include "data/DataLoader.hpp"
#include "data/DataTestUtil.hpp"
#include "data/SyntheticClassificationDataset.hpp"

namespace rh::data {
namespace {

using Split = SyntheticClassificationOptions::Split;

// The quickstart job's data (configs/quickstart.yaml).
SyntheticClassificationOptions quickstart(Split split, size_t n) {
  SyntheticClassificationOptions o;
  o.num_samples = n;
  o.num_features = 32;
  o.num_classes = 10;
  o.split = split;
  return o;
}

// All examples stacked: inputs (N, F), targets (N).
std::pair<torch::Tensor, torch::Tensor> stacked(const Dataset& d) {
  std::vector<torch::Tensor> x, y;
  for (size_t i = 0; i < d.size(); ++i) {
    Example e = d.get(i);
    x.push_back(e.input);
    y.push_back(e.target);
  }
  return {torch::stack(x), torch::stack(y)};
}

double accuracy(const torch::Tensor& logits, const torch::Tensor& y) {
  return logits.argmax(1).eq(y).to(torch::kDouble).mean().item<double>();
}

TEST(SyntheticClassificationDataset, ExamplesHaveTheDocumentedShapes) {
  SyntheticClassificationDataset d(quickstart(Split::Train, 100));
  EXPECT_EQ(d.size(), 100u);
  EXPECT_EQ(d.num_classes(), 10);
  EXPECT_EQ(d.task(), model::Task::Classification);
  const Example e = d.get(3);
  EXPECT_EQ(e.input.sizes(), (std::vector<int64_t>{32}));
  EXPECT_EQ(e.input.scalar_type(), torch::kFloat);
  EXPECT_EQ(e.target.dim(), 0);
  EXPECT_EQ(e.target.scalar_type(), torch::kLong);
  EXPECT_THROW(d.get(100), std::out_of_range);
}

TEST(SyntheticClassificationDataset, IsDeterministicPerSeedSplitAndIndex) {
  SyntheticClassificationDataset a(quickstart(Split::Train, 50));
  SyntheticClassificationDataset b(quickstart(Split::Train, 50));
  for (size_t i : {0, 7, 49}) {
    EXPECT_TRUE(torch::equal(a.get(i).input, b.get(i).input));
    EXPECT_TRUE(torch::equal(a.get(i).target, b.get(i).target));
    EXPECT_TRUE(torch::equal(a.get(i).input, a.get(i).input));
  }
  EXPECT_FALSE(torch::equal(a.get(0).input, a.get(1).input));

  SyntheticClassificationDataset val(quickstart(Split::Val, 50));
  SyntheticClassificationDataset test(quickstart(Split::Test, 50));
  EXPECT_FALSE(torch::equal(a.get(0).input, val.get(0).input));
  EXPECT_FALSE(torch::equal(val.get(0).input, test.get(0).input));
  SyntheticClassificationOptions other = quickstart(Split::Train, 50);
  other.seed = 1;
  EXPECT_FALSE(torch::equal(a.get(0).input, SyntheticClassificationDataset(other).get(0).input));
  // The same number of samples is a prefix: size does not change example i.
  SyntheticClassificationDataset longer(quickstart(Split::Train, 500));
  EXPECT_TRUE(torch::equal(a.get(7).input, longer.get(7).input));
}

TEST(SyntheticClassificationDataset, ClassesAreBalancedAndCentred) {
  const auto [x, y] = stacked(SyntheticClassificationDataset(quickstart(Split::Train, 4000)));
  const torch::Tensor counts = torch::bincount(y, {}, 10);
  EXPECT_GT(counts.min().item<int64_t>(), 300) << counts;
  EXPECT_LT(counts.max().item<int64_t>(), 500) << counts;
  // Every class has mean ~0: what makes linear classifiers fail.
  for (int64_t k = 0; k < 10; ++k) {
    const torch::Tensor mean = x.index({y.eq(k)}).mean(0);
    EXPECT_LT(mean.abs().max().item<double>(), 0.25) << "class " << k;
  }
}

TEST(SyntheticClassificationDataset, MoreClassesThanFeaturesWork) {
  SyntheticClassificationOptions o;
  o.num_samples = 2000;
  o.num_features = 4;
  o.num_classes = 12;
  const auto [x, y] = stacked(SyntheticClassificationDataset(o));
  EXPECT_EQ(x.size(1), 4);
  EXPECT_EQ(torch::bincount(y, {}, 12).gt(0).sum().item<int64_t>(), 12);
  EXPECT_LT(y.max().item<int64_t>(), 12);
}

TEST(SyntheticClassificationDataset, RejectsBadOptions) {
  SyntheticClassificationOptions o = quickstart(Split::Train, 10);
  o.num_classes = 1;
  EXPECT_THROW(SyntheticClassificationDataset{o}, std::invalid_argument);
  o = quickstart(Split::Train, 10);
  o.noise = -1;
  EXPECT_THROW(SyntheticClassificationDataset{o}, std::invalid_argument);
}

// A linear classifier (multinomial logistic regression, trained to
// convergence with L-BFGS on the quickstart's train split) stays near chance.
TEST(SyntheticClassificationDataset, IsNotLinearlySeparable) {
  torch::manual_seed(0);
  torch::Tensor x, y, vx, vy;
  std::tie(x, y) = stacked(SyntheticClassificationDataset(quickstart(Split::Train, 8192)));
  std::tie(vx, vy) = stacked(SyntheticClassificationDataset(quickstart(Split::Val, 2048)));
  torch::nn::Linear linear(32, 10);
  torch::optim::LBFGS lbfgs(linear->parameters(), torch::optim::LBFGSOptions(1.0)
                                                      .max_iter(1000)
                                                      .tolerance_grad(1e-9)
                                                      .tolerance_change(1e-12)
                                                      .line_search_fn("strong_wolfe"));
  lbfgs.step([&] {
    lbfgs.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(linear(x), y);
    loss.backward();
    return loss;
  });
  torch::NoGradGuard no_grad;
  const double train_acc = accuracy(linear(x), y);
  const double val_acc = accuracy(linear(vx), vy);
  std::cout << "[ linear   ] train accuracy " << train_acc << ", val accuracy " << val_acc
            << std::endl;
  RecordProperty("linear_val_accuracy", std::to_string(val_acc));
  EXPECT_LT(val_acc, 0.70);
}

// The quickstart recipe: MLP [128, 128], AdamW lr 2e-3 (weight decay 0.01),
// batch 64, 10 epochs over 8192 samples, through the DataLoader.
TEST(SyntheticClassificationDataset, SmallMlpLearnsItInTenEpochs) {
  torch::manual_seed(0);
  const auto start = std::chrono::steady_clock::now();
  auto train = std::make_shared<SyntheticClassificationDataset>(quickstart(Split::Train, 8192));
  const auto [vx, vy] = stacked(SyntheticClassificationDataset(quickstart(Split::Val, 2048)));
  torch::nn::Sequential mlp(torch::nn::Linear(32, 128), torch::nn::ReLU(),
                            torch::nn::Linear(128, 128), torch::nn::ReLU(),
                            torch::nn::Linear(128, 10));
  torch::optim::AdamW adamw(mlp->parameters(), torch::optim::AdamWOptions(2e-3).weight_decay(0.01));
  LoaderOptions lo;
  lo.batch_size = 64;
  lo.shuffle = true;
  DataLoader loader(train, lo, 0, 1);

  double val_acc = 0;
  std::string curve;
  for (int64_t epoch = 0; epoch < 10; ++epoch) {
    loader.start_epoch(epoch);
    while (std::optional<Batch> b = loader.next()) {
      adamw.zero_grad();
      torch::nn::functional::cross_entropy(mlp->forward(b->input), b->target).backward();
      adamw.step();
    }
    torch::NoGradGuard no_grad;
    val_acc = accuracy(mlp->forward(vx), vy);
    curve += (epoch > 0 ? " " : "") + std::to_string(val_acc).substr(0, 5);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ mlp      ] val accuracy per epoch: " << curve << " (" << seconds << " s, "
            << torch::get_num_threads() << " threads)" << std::endl;
  RecordProperty("mlp_val_accuracy", std::to_string(val_acc));
  RecordProperty("mlp_seconds", std::to_string(seconds));
  EXPECT_GE(val_acc, 0.90);
}

TEST(SyntheticClassificationDataset, BuildsFromConfig) {
  auto cfg = test::yaml(
      "dataset: {type: synthetic_classification, num_samples: 20, num_features: 5, "
      "num_classes: 3, seed: 4, split: test, noise: 0}");
  auto d = build_dataset(*cfg->find("dataset"), "/nowhere");
  EXPECT_EQ(d->size(), 20u);
  EXPECT_EQ(d->num_classes(), 3);
  SyntheticClassificationOptions o;
  o.num_samples = 20;
  o.num_features = 5;
  o.num_classes = 3;
  o.seed = 4;
  o.split = Split::Test;
  o.noise = 0;
  EXPECT_TRUE(torch::equal(d->get(11).input, SyntheticClassificationDataset(o).get(11).input));
}

}  // namespace
}  // namespace rh::data
