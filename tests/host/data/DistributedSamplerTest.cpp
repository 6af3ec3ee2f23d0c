#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <tuple>
#include <vector>

#include "data/DistributedSampler.hpp"

namespace rh::data {
namespace {

std::vector<std::vector<size_t>> all_ranks(size_t n, int world, bool shuffle, bool drop_last,
                                           int64_t epoch = 0, uint64_t seed = 7) {
  std::vector<std::vector<size_t>> ranks;
  for (int r = 0; r < world; ++r) {
    DistributedSampler s(n, r, world, shuffle, seed, drop_last);
    s.set_epoch(epoch);
    ranks.push_back(s.indices());
    EXPECT_EQ(ranks.back().size(), s.num_samples());
  }
  return ranks;
}

class SamplerCoverage : public ::testing::TestWithParam<std::tuple<int, size_t, bool>> {};

TEST_P(SamplerCoverage, RanksAreDisjointAndCoverTheDatasetOncePerEpoch) {
  const auto [world, n, shuffle] = GetParam();
  const size_t w = static_cast<size_t>(world);

  // Without drop_last: ceil(n / world) each, everything seen, the padding
  // repeats the epoch's first indices.
  {
    const auto ranks = all_ranks(n, world, shuffle, /*drop_last=*/false);
    std::map<size_t, int> seen;
    for (const auto& r : ranks) {
      EXPECT_EQ(r.size(), (n + w - 1) / w);
      for (size_t i : r) ++seen[i];
    }
    EXPECT_EQ(seen.size(), n);
    size_t repeats = 0;
    for (const auto& [index, count] : seen) {
      EXPECT_LT(index, n);
      EXPECT_LE(static_cast<size_t>(count), (ranks[0].size() * w + n - 1) / n);
      repeats += static_cast<size_t>(count - 1);
    }
    EXPECT_EQ(repeats, ranks[0].size() * w - n);
  }
  // With drop_last: floor(n / world) each, no index twice.
  {
    const auto ranks = all_ranks(n, world, shuffle, /*drop_last=*/true);
    std::set<size_t> seen;
    for (const auto& r : ranks) {
      EXPECT_EQ(r.size(), n / w);
      for (size_t i : r) EXPECT_TRUE(seen.insert(i).second) << "index " << i << " twice";
    }
    EXPECT_EQ(seen.size(), (n / w) * w);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldsAndSizes, SamplerCoverage,
                         ::testing::Combine(::testing::Values(1, 2, 3),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{2},
                                                              size_t{10}, size_t{11}, size_t{12},
                                                              size_t{100}),
                                            ::testing::Bool()));

TEST(DistributedSampler, RanksInterleaveOneSharedPermutation) {
  // Rank r takes positions r, r + world, ... of the same epoch order.
  const auto ranks = all_ranks(12, 3, true, false, 5);
  DistributedSampler whole(12, 0, 1, true, 7, false);
  whole.set_epoch(5);
  const std::vector<size_t> order = whole.indices();
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(ranks[k % 3][k / 3], order[k]) << k;
}

TEST(DistributedSampler, PaddingRepeatsFromTheStart) {
  DistributedSampler whole(10, 0, 1, true, 3, false);
  const std::vector<size_t> order = whole.indices();
  // 10 over 4 ranks: 3 each, 12 in all; positions 10, 11 repeat positions 0, 1.
  const auto ranks = all_ranks(10, 4, true, false, 0, 3);
  EXPECT_EQ(ranks[2][2], order[0]);
  EXPECT_EQ(ranks[3][2], order[1]);
  // More ranks than examples: the order repeats as often as needed.
  const std::vector<size_t> order2 = DistributedSampler(2, 0, 1, true, 3, false).indices();
  const auto many = all_ranks(2, 5, true, false, 0, 3);
  for (size_t r = 0; r < 5; ++r) EXPECT_EQ(many[r], std::vector<size_t>{order2[r % 2]}) << r;
}

// A resume with another global batch: from position `start` of the same
// epoch order, rank r takes start + r, start + r + world, ..., equally many
// on every rank; the real samples are those before the order's end.
TEST(DistributedSampler, IndicesFromAStartPositionContinueTheSameOrder) {
  DistributedSampler whole(20, 0, 1, true, 7, false);
  whole.set_epoch(2);
  const std::vector<size_t> order = whole.indices();
  for (int world : {1, 2, 3}) {
    for (size_t start : {size_t{0}, size_t{5}, size_t{11}}) {
      for (int r = 0; r < world; ++r) {
        DistributedSampler s(20, r, world, true, 7, false);
        s.set_epoch(2);
        const std::vector<size_t> mine = s.indices(start);
        const size_t total = s.num_samples() * static_cast<size_t>(world);
        EXPECT_EQ(mine.size(), (total - start + world - 1) / world) << world << " " << start;
        EXPECT_EQ(s.num_samples(start), mine.size()) << world << " " << start;
        for (size_t j = 0; j < mine.size(); ++j)
          EXPECT_EQ(mine[j], order[(start + r + j * world) % 20]) << world << " " << start;
        size_t real = 0;
        for (size_t j = 0; j < mine.size(); ++j) real += start + r + j * world < 20 ? 1 : 0;
        EXPECT_EQ(s.num_real_samples(start), real) << world << " " << start << " " << r;
        if (start == 0) {
          EXPECT_EQ(mine, s.indices());
        }
      }
    }
  }
}

TEST(DistributedSampler, WithoutShuffleRanksStrideThroughTheIndices) {
  DistributedSampler s(7, 1, 3, false, 0, false);
  s.set_epoch(9);  // no effect without shuffle
  EXPECT_EQ(s.indices(), (std::vector<size_t>{1, 4, 0}));
  DistributedSampler dropped(7, 1, 3, false, 0, true);
  EXPECT_EQ(dropped.indices(), (std::vector<size_t>{1, 4}));
}

TEST(DistributedSampler, DeterministicPerEpochAndDifferentAcrossEpochs) {
  DistributedSampler a(100, 1, 2, true, 42, false);
  DistributedSampler b(100, 1, 2, true, 42, false);
  a.set_epoch(3);
  b.set_epoch(3);
  EXPECT_EQ(a.indices(), b.indices());
  EXPECT_EQ(a.indices(), a.indices());
  const std::vector<size_t> epoch3 = a.indices();
  a.set_epoch(4);
  EXPECT_NE(a.indices(), epoch3);
  DistributedSampler other_seed(100, 1, 2, true, 43, false);
  other_seed.set_epoch(3);
  EXPECT_NE(other_seed.indices(), epoch3);
}

TEST(DistributedSampler, OrderIsTheSameOnEveryPlatform) {
  // mt19937_64 and our own bounded draw are fully specified: these are the
  // indices on any compiler and standard library.
  DistributedSampler s(10, 0, 1, true, 0, false);
  EXPECT_EQ(s.indices(), (std::vector<size_t>{7, 2, 0, 8, 3, 9, 6, 1, 5, 4}));
  s.set_epoch(1);
  EXPECT_EQ(s.indices(), (std::vector<size_t>{1, 7, 3, 9, 4, 0, 5, 2, 6, 8}));
}

TEST(DistributedSampler, RejectsARankOutsideTheWorld) {
  EXPECT_THROW(DistributedSampler(10, 2, 2, false, 0, false), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(10, -1, 2, false, 0, false), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(10, 0, 0, false, 0, false), std::invalid_argument);
}

}  // namespace
}  // namespace rh::data
