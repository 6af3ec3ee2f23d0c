#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <thread>
#include <vector>

#include "data/DataLoader.hpp"
#include "host/data/CountingDataset.hpp"

namespace rh::data {
namespace {

using test::CountingDataset;

LoaderOptions options(size_t batch_size, int num_workers, bool shuffle = true,
                      bool drop_last = false, int prefetch = 2) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.num_workers = num_workers;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.prefetch = prefetch;
  o.seed = 11;
  return o;
}

// The example ids of every remaining batch of the epoch, one list per batch.
std::vector<std::vector<int64_t>> drain(DataLoader& loader) {
  std::vector<std::vector<int64_t>> batches;
  while (std::optional<Batch> b = loader.next()) {
    EXPECT_EQ(b->input.size(0), b->target.size(0));
    EXPECT_EQ(b->input.dim(), 2);
    EXPECT_EQ(b->target.dim(), 1);
    EXPECT_EQ(b->target.scalar_type(), torch::kLong);
    // The input is the example id too: inputs and targets stay paired.
    EXPECT_TRUE(torch::equal(b->input.squeeze(1).to(torch::kLong), b->target));
    const torch::Tensor t = b->target.contiguous();
    batches.emplace_back(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  }
  return batches;
}

std::vector<int64_t> flatten(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

std::vector<int64_t> sampler_order(size_t n, const LoaderOptions& o, int rank, int world,
                                   int64_t epoch) {
  DistributedSampler s(n, rank, world, o.shuffle, o.seed, o.drop_last);
  s.set_epoch(epoch);
  std::vector<int64_t> order;
  for (size_t i : s.indices()) order.push_back(static_cast<int64_t>(i));
  return order;
}

class LoaderWorkers : public ::testing::TestWithParam<int> {};

TEST_P(LoaderWorkers, BatchesFollowTheSamplerOrder) {
  const int workers = GetParam();
  auto dataset = std::make_shared<CountingDataset>(23, -1, /*jitter=*/workers > 0);
  const LoaderOptions o = options(4, workers);
  DataLoader loader(dataset, o, /*rank=*/1, /*world_size=*/2);
  EXPECT_EQ(loader.batches_per_epoch(), 3u);  // 12 indices per rank: 4 + 4 + 4

  for (int64_t epoch : {0, 1}) {
    loader.start_epoch(epoch);
    const auto batches = drain(loader);
    ASSERT_EQ(batches.size(), 3u);
    EXPECT_EQ(flatten(batches), sampler_order(23, o, 1, 2, epoch));
  }
}

TEST_P(LoaderWorkers, KeepsTheLastPartialBatchUnlessDropLast) {
  const int workers = GetParam();
  auto dataset = std::make_shared<CountingDataset>(10);
  DataLoader keep(dataset, options(4, workers, false), 0, 1);
  keep.start_epoch(0);
  const auto kept = drain(keep);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[2], (std::vector<int64_t>{8, 9}));

  DataLoader drop(dataset, options(4, workers, false, /*drop_last=*/true), 0, 1);
  EXPECT_EQ(drop.batches_per_epoch(), 2u);
  drop.start_epoch(0);
  EXPECT_EQ(flatten(drain(drop)), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST_P(LoaderWorkers, SkippedBatchesAreNeverRead) {
  const int workers = GetParam();
  auto dataset = std::make_shared<CountingDataset>(40);
  const LoaderOptions o = options(4, workers);
  DataLoader loader(dataset, o, 0, 1);
  loader.start_epoch(2, /*skip_batches=*/3);
  const std::vector<int64_t> rest = flatten(drain(loader));

  const std::vector<int64_t> order = sampler_order(40, o, 0, 1, 2);
  EXPECT_EQ(rest, std::vector<int64_t>(order.begin() + 12, order.end()));
  EXPECT_EQ(dataset->reads(), 28u);
  const std::multiset<size_t> read = dataset->read_indices();
  for (size_t k = 0; k < 12; ++k) {
    EXPECT_EQ(read.count(static_cast<size_t>(order[k])), 0u) << "skipped example read";
  }
}

TEST_P(LoaderWorkers, SkippingTheWholeEpochGivesNoBatches) {
  auto dataset = std::make_shared<CountingDataset>(8);
  DataLoader loader(dataset, options(4, GetParam()), 0, 1);
  loader.start_epoch(0, 2);
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_EQ(dataset->reads(), 0u);
  EXPECT_THROW(loader.start_epoch(0, 3), std::out_of_range);
}

TEST_P(LoaderWorkers, AWorkersErrorReachesNextAndEndsTheEpoch) {
  auto dataset = std::make_shared<CountingDataset>(12, /*throw_at=*/6);
  DataLoader loader(dataset, options(4, GetParam(), /*shuffle=*/false), 0, 1);
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next().has_value());  // examples 0..3
  try {
    loader.next();  // examples 4..7
    FAIL() << "expected the dataset's error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "cannot decode example 6");
  }
  EXPECT_FALSE(loader.next().has_value());
  // The next epoch starts afresh.
  loader.start_epoch(1);
  ASSERT_TRUE(loader.next().has_value());
}

TEST_P(LoaderWorkers, StartingAnEpochMidwayCancelsThePreviousOne) {
  auto dataset = std::make_shared<CountingDataset>(64, -1, /*jitter=*/true);
  const LoaderOptions o = options(4, GetParam());
  DataLoader loader(dataset, o, 0, 1);
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next().has_value());
  loader.start_epoch(1);
  EXPECT_EQ(flatten(drain(loader)), sampler_order(64, o, 0, 1, 1));
}

TEST_P(LoaderWorkers, NextWithoutStartEpochRunsEpochZero) {
  auto dataset = std::make_shared<CountingDataset>(9);
  const LoaderOptions o = options(2, GetParam());
  DataLoader loader(dataset, o, 0, 1);
  EXPECT_EQ(flatten(drain(loader)), sampler_order(9, o, 0, 1, 0));
  EXPECT_FALSE(loader.next().has_value());  // stays at the end until start_epoch
}

INSTANTIATE_TEST_SUITE_P(Workers, LoaderWorkers, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "Workers"; });

TEST(DataLoader, OrderDoesNotDependOnThreadTiming) {
  auto dataset = std::make_shared<CountingDataset>(50, -1, /*jitter=*/true);
  const LoaderOptions serial_options = options(3, 0);
  DataLoader serial(dataset, serial_options, 0, 1);
  serial.start_epoch(4);
  const auto expected = drain(serial);
  for (int prefetch : {1, 2, 5}) {
    DataLoader threaded(dataset, options(3, 4, true, false, prefetch), 0, 1);
    threaded.start_epoch(4);
    EXPECT_EQ(drain(threaded), expected) << "prefetch " << prefetch;
  }
}

TEST(DataLoader, WorkersPrepareAtMostPrefetchBatchesAhead) {
  auto dataset = std::make_shared<CountingDataset>(100);
  DataLoader loader(dataset, options(5, 3, true, false, /*prefetch=*/2), 0, 1);
  loader.start_epoch(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LE(dataset->reads(), 10u);
  ASSERT_TRUE(loader.next().has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LE(dataset->reads(), 15u);
}

TEST(DataLoader, DestructionMidEpochJoinsTheWorkers) {
  auto dataset = std::make_shared<CountingDataset>(400, -1, /*jitter=*/true);
  {
    DataLoader loader(dataset, options(8, 3), 0, 1);
    loader.start_epoch(0);
    ASSERT_TRUE(loader.next().has_value());
  }  // must neither hang nor leave a thread touching the dataset
  const size_t reads = dataset->reads();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(dataset->reads(), reads);
  EXPECT_LT(reads, 400u);
}

TEST(DataLoader, StacksExamplesIntoBatches) {
  auto dataset = std::make_shared<CountingDataset>(6);
  DataLoader loader(dataset, options(6, 1, false), 0, 1);
  std::optional<Batch> b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->input.sizes(), (std::vector<int64_t>{6, 1}));
  EXPECT_EQ(b->target.sizes(), (std::vector<int64_t>{6}));
  EXPECT_TRUE(torch::equal(b->target, torch::arange(6, torch::kLong)));
}

TEST(DataLoader, RejectsBadOptions) {
  auto dataset = std::make_shared<CountingDataset>(6);
  EXPECT_THROW(DataLoader(dataset, options(0, 1), 0, 1), std::invalid_argument);
  EXPECT_THROW(DataLoader(dataset, options(1, -1), 0, 1), std::invalid_argument);
  EXPECT_THROW(DataLoader(dataset, options(1, 1, true, false, 0), 0, 1), std::invalid_argument);
  EXPECT_THROW(DataLoader(dataset, options(1, 1), 2, 2), std::invalid_argument);
  EXPECT_THROW(DataLoader(nullptr, options(1, 1), 0, 1), std::invalid_argument);
}

}  // namespace
}  // namespace rh::data
