// Which CUDA device a rank computes on: the one rule that the runner, the
// NCCL communicator and (through rh_SetupEnvArgs.rank_device) every strategy
// use, so that a rank's tensors and its communicator never disagree.
#pragma once

namespace rh::comm {

// The CUDA device index of a rank that sees `visible_devices` devices:
//   0 devices  -> -1 (no GPU: the rank runs on the CPU);
//   1 device   -> 0, whatever the local rank: one visible GPU per rank, as
//                 `srun --gpus-per-task=1` or a per-rank CUDA_VISIBLE_DEVICES
//                 gives (cuda:<local_rank> would not exist there);
//   N devices  -> local_rank (torchrun's convention), which must be < N.
// Throws std::runtime_error naming the rank, its local rank and the count
// when several devices are visible but fewer than the local ranks.
int rank_cuda_device(int rank, int local_rank, int visible_devices);

}  // namespace rh::comm
