#include "comm/RankDevice.hpp"

#include <stdexcept>
#include <string>

namespace rh::comm {

int rank_cuda_device(int rank, int local_rank, int visible_devices) {
  if (visible_devices <= 0) return -1;
  if (visible_devices == 1) return 0;
  if (local_rank < 0 || local_rank >= visible_devices)
    throw std::runtime_error(
        "rank " + std::to_string(rank) + " (local rank " + std::to_string(local_rank) + ") sees " +
        std::to_string(visible_devices) +
        " CUDA devices, fewer than the ranks of its node: start at most one rank per visible "
        "GPU, or give each rank one GPU (CUDA_VISIBLE_DEVICES, srun --gpus-per-task=1)");
  return local_rank;
}

}  // namespace rh::comm
