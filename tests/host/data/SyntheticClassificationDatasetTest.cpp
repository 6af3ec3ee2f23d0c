#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>
#include <tuple>

#include "data/DataLoader.hpp"
#include "data/SyntheticClassificationDataset.hpp"
#include "host/data/DataTestUtil.hpp"

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

// FNV-1a over every example's float bytes and int64 label, in index order.
uint64_t fingerprint(const Dataset& d) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto add = [&h](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      h ^= static_cast<const unsigned char*>(p)[i];
      h *= 0x100000001b3ULL;
    }
  };
  for (size_t i = 0; i < d.size(); ++i) {
    const Example e = d.get(i);
    add(e.input.data_ptr<float>(), static_cast<size_t>(e.input.numel()) * sizeof(float));
    const int64_t label = e.target.item<int64_t>();
    add(&label, sizeof label);
  }
  return h;
}

void expect_example(const Dataset& d, size_t index, int64_t label,
                    const std::vector<float>& input) {
  const Example e = d.get(index);
  EXPECT_EQ(e.target.item<int64_t>(), label) << "example " << index;
  ASSERT_EQ(e.input.numel(), static_cast<int64_t>(input.size()));
  // Bit for bit (memcmp, not ==: -0.0 and 0.0 would compare equal).
  EXPECT_EQ(std::memcmp(e.input.data_ptr<float>(), input.data(), input.size() * sizeof(float)), 0)
      << "example " << index << ": " << e.input;
}

// The data every figure and test is built on. These values were recorded
// from the generator as it was before examples were cached (issue 14):
// caching, or any speed-up, must not change one bit of them.
TEST(SyntheticClassificationDataset, GeneratesThePinnedData) {
  SyntheticClassificationOptions other;
  other.num_samples = 2000;
  other.num_features = 4;
  other.num_classes = 12;
  other.seed = 7;
  other.noise = 0.3;
  other.split = Split::Test;
  for (int pass = 0; pass < 2; ++pass) {  // pass 1 is served from the cache
    SCOPED_TRACE("pass " + std::to_string(pass));
    static const SyntheticClassificationDataset train(quickstart(Split::Train, 8192));
    static const SyntheticClassificationDataset val(quickstart(Split::Val, 2048));
    static const SyntheticClassificationDataset test(other);
    expect_example(
        train, 0, 5,
        {-0x1.2179a6p-6f, 0x1.6f1ccap+0f,  -0x1.fbfa7ap+0f, 0x1.5b9b0ep-1f,  -0x1.ccdf74p-3f,
         -0x1.86a60ap-1f, 0x1.0e128cp-1f,  0x1.b6092p-2f,   -0x1.5a9e82p-1f, -0x1.d25daep-1f,
         0x1.54e51ap+0f,  0x1.6a78f6p-3f,  -0x1.42bcd6p-1f, 0x1.1d26acp+0f,  0x1.b65a5ep+0f,
         0x1.5cf3dp-1f,   0x1.4fdb2ep+0f,  -0x1.4110bcp-1f, -0x1.10ae7ap+1f, 0x1.429b1ep-2f,
         -0x1.d0a278p-1f, 0x1.be29f8p-1f,  -0x1.0d25bp-1f,  -0x1.7f7eb4p-1f, -0x1.be5fbap-2f,
         0x1.fde6b8p-2f,  -0x1.bbd83ap-3f, 0x1.423a0cp-3f,  -0x1.2a622ep-1f, 0x1.756b6ap+1f,
         0x1.5668e2p+0f,  -0x1.782a14p-1f});
    expect_example(
        train, 8191, 9,
        {0x1.385ec8p+0f,  0x1.2f6f86p+0f,  0x1.b5390ep-7f,  0x1.5aa4d8p-1f,  -0x1.0868p+1f,
         -0x1.8a68b6p-1f, -0x1.8f720ap-1f, -0x1.eed666p-1f, 0x1.a6806p-5f,   0x1.61c8d4p-2f,
         -0x1.f9a55ap-1f, 0x1.17c9b4p-1f,  0x1.f3e646p+0f,  0x1.a3e5b2p-1f,  0x1.e31b08p-1f,
         -0x1.c47958p+0f, -0x1.c3fa7cp-5f, 0x1.ce0a4ap-1f,  0x1.2df75p-2f,   -0x1.a9508p+0f,
         0x1.19ab52p+1f,  -0x1.79be5p-7f,  0x1.ac4f42p-1f,  0x1.87482p-1f,   0x1.634a5cp+0f,
         -0x1.ef864ap-1f, -0x1.2d88d4p+0f, 0x1.21ce5ep+1f,  -0x1.015038p+1f, -0x1.38fc06p+0f,
         -0x1.b3d7dcp-1f, 0x1.033f4cp-1f});
    expect_example(val, 1, 1, {-0x1.5da9e6p-2f, -0x1.757b5p+0f,  0x1.3e749ep-1f,  -0x1.dd4a62p-3f,
                               -0x1.179cbap-3f, -0x1.0d7d9ap-2f, -0x1.0ce6e4p+0f, -0x1.027e74p+0f,
                               -0x1.99a8f8p-2f, -0x1.312744p+0f, -0x1.beeea6p-3f, -0x1.2ec86p-2f,
                               -0x1.a170dap-5f, -0x1.2bb49p+0f,  -0x1.793d2ap-2f, -0x1.91481ap-2f,
                               0x1.fdcf44p-6f,  -0x1.8fe838p-1f, -0x1.c4d3b2p-2f, -0x1.38c3f8p-2f,
                               -0x1.469a64p-1f, -0x1.2e8eap-1f,  -0x1.e4c6p-1f,   0x1.9a1ef2p-1f,
                               -0x1.414e6ap-4f, -0x1.61e37cp+0f, -0x1.8e775ap-3f, 0x1.4b6b84p-5f,
                               0x1.31a9p-6f,    -0x1.745a84p+0f, -0x1.029cd4p-4f, 0x1.a4916ep-2f});
    expect_example(test, 1, 11, {-0x1.232dfp-1f, -0x1.6da522p+0f, -0x1.4007b2p+0f, 0x1.e6f6cap-1f});
    // Every example of the three splits, through a fingerprint.
    EXPECT_EQ(fingerprint(train), 0x2cddfc264755a68dULL);
    EXPECT_EQ(fingerprint(val), 0x1f14c84a7fe50b32ULL);
    EXPECT_EQ(fingerprint(test), 0xfcaf5a3c6e34808dULL);
  }
}

// An example is drawn once: later epochs copy the cached result.
TEST(SyntheticClassificationDataset, DrawsEachExampleOnce) {
  SyntheticClassificationDataset d(quickstart(Split::Train, 300));
  ASSERT_TRUE(d.caches_examples());
  EXPECT_EQ(d.examples_drawn(), 0u);
  const uint64_t first = fingerprint(d);
  EXPECT_EQ(d.examples_drawn(), 300u);
  EXPECT_EQ(fingerprint(d), first);
  EXPECT_EQ(d.examples_drawn(), 300u);
  // The returned tensors are copies: writing one leaves the cache intact.
  d.get(5).input.fill_(42);
  EXPECT_EQ(fingerprint(d), first);
}

// Loader threads fill the cache concurrently; a dataset too large to cache
// draws every get() and gives the same examples.
TEST(SyntheticClassificationDataset, ConcurrentAndUncachedGetsAgree) {
  SyntheticClassificationDataset cached(quickstart(Split::Train, 2000));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&cached, t] {
      for (size_t i = 0; i < cached.size(); ++i)
        cached.get((i * 7 + static_cast<size_t>(t)) % 2000);
    });
  for (auto& th : threads) th.join();
  EXPECT_GE(cached.examples_drawn(), 2000u);
  const size_t huge = SyntheticClassificationDataset::kMaxCacheBytes / (32 * sizeof(float)) + 1;
  SyntheticClassificationDataset uncached(quickstart(Split::Train, huge));
  EXPECT_FALSE(uncached.caches_examples());
  for (size_t i : {0, 1, 999, 1999}) {
    EXPECT_TRUE(torch::equal(cached.get(i).input, uncached.get(i).input)) << i;
    EXPECT_TRUE(torch::equal(cached.get(i).target, uncached.get(i).target)) << i;
  }
  EXPECT_EQ(uncached.examples_drawn(), 8u);
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
  // A training-quality threshold: measured 97.9% here, 0.90 leaves 8 points.
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
