// The one rule for a rank's CUDA device (comm/RankDevice.hpp), shared by the
// runner, the nccl communicator and (rh_SetupEnvArgs.rank_device) strategies.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "comm/RankDevice.hpp"

namespace {

using rh::comm::rank_cuda_device;

TEST(RankDeviceTest, NoVisibleGpuMeansTheCpu) { EXPECT_EQ(rank_cuda_device(3, 1, 0), -1); }

TEST(RankDeviceTest, OneVisibleGpuPerRankIsDeviceZeroWhateverTheLocalRank) {
  // srun --gpus-per-task=1 / a per-rank CUDA_VISIBLE_DEVICES: cuda:<local
  // rank> would not exist for local ranks > 0.
  EXPECT_EQ(rank_cuda_device(0, 0, 1), 0);
  EXPECT_EQ(rank_cuda_device(5, 3, 1), 0);
}

TEST(RankDeviceTest, SeveralVisibleGpusAreIndexedByTheLocalRank) {
  EXPECT_EQ(rank_cuda_device(9, 1, 8), 1);
  EXPECT_EQ(rank_cuda_device(15, 7, 8), 7);
}

TEST(RankDeviceTest, FewerVisibleGpusThanLocalRanksIsAnErrorNamingTheRank) {
  try {
    rank_cuda_device(6, 2, 2);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 6 (local rank 2) sees 2 CUDA devices"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
