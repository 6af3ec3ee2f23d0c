// The ranks of a run as the lifecycle sees them (docs/architecture.md,
// "The world"): who this process is, the communicator the strategy is handed,
// the one device rule, and the runner's own small collectives — weight
// verification and broadcast at start, the logged-loss mean, exact metric
// sums, checkpoint status and resume agreement. In one process without a
// communicator every collective is the identity.
#pragma once

#include <ATen/core/Tensor.h>
#include <dlpack/dlpack.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rh/rh_host.h"

namespace rh::config {
class Node;
}
namespace rh::host {
class HostServices;
}
namespace rh::launch {
struct DistEnv;
}
namespace rh::config {
struct DistCfg;
}
namespace rh::comm {
class Communicator;
class Work;
struct Buffer;
}  // namespace rh::comm
namespace rh::model {
class Model;
}

namespace rh::lifecycle {

// What each rank tells the others every iteration, riding with the loss.
struct RankFlags {
  bool stop_signalled = false;  // it received SIGTERM / SIGUSR1
  bool save_finished = true;    // its part of a background checkpoint save is over (or none)
};
// How many ranks raised each flag.
struct FlagCounts {
  int stop_signalled = 0;
  int save_finished = 0;
};

// A scalar mean over the ranks (the logged loss), started after forward and
// read after the optimizer step, so it overlaps backward instead of adding a
// round trip. It also carries every rank's RankFlags.
class PendingMean {
 public:
  PendingMean(at::Tensor value, std::shared_ptr<comm::Work> work);
  // One process: the scalar itself and this process's flags, nothing to
  // reduce (no tensor built per iteration).
  PendingMean(at::Tensor scalar, RankFlags flags);
  PendingMean(PendingMean&&) noexcept;
  ~PendingMean();  // left unread (the step threw): waits, the collective writes value_
  // The mean, and how many ranks raised each flag.
  std::pair<double, FlagCounts> get();

 private:
  at::Tensor value_;
  std::shared_ptr<comm::Work> work_;  // null in one process, or once read
  bool local_ = false;                // one process: value_ is the scalar
  FlagCounts local_counts_;
};

// A contiguous tensor as the communicator takes it (its memory, count,
// dtype and device); World's collectives and a tensor-parallel plan's.
comm::Buffer comm_buffer(const at::Tensor& t);

class World {
 public:
  // Lifecycle step 2: joins the other ranks when the environment says there
  // are some (the built-in launcher, torchrun, srun, mpirun), or makes a
  // world of one when the strategy needs a communicator even alone. `job`
  // for its location (in messages), `dist` its dist keys.
  World(const config::Node& job, const config::DistCfg& dist, host::HostServices& services,
        bool needs_comm);
  // Uninstalls the Comm_* entries (destroying the groups made from them),
  // then the communicator. Destroy strategies and hooks first.
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_world_size() const { return local_world_size_; }
  int node_rank() const { return node_rank_; }
  // Tensor parallelism (a strategy's plan, TensorParallelPlan.hpp): groups
  // of `size` consecutive ranks compute on the same batch, so the data is
  // sharded over size() / size replicas. 1 (default): every rank is one.
  void set_tensor_parallel(int size) { tp_size_ = size; }
  int tp_size() const { return tp_size_; }
  int tp_rank() const { return rank_ % tp_size_; }
  // The data-parallel replica this rank computes for, and how many there are.
  int data_rank() const { return rank_ / tp_size_; }
  int data_size() const { return size_ / tp_size_; }
  // What the environment said about the launch (restarts, elastic world).
  const launch::DistEnv& env() const { return *env_; }
  // comm::rank_cuda_device's choice for this rank, or {kDLCPU, 0}.
  DLDevice rank_device() const { return rank_device_; }
  // The world as the strategy gets it (Comm_World); nullptr without one.
  rh_Comm* strategy_handle() const { return handle_; }

  // Lifecycle step 3, for every strategy: all ranks built the same
  // parameters and buffers (else an error names the first difference), then
  // every rank takes rank 0's values.
  void sync_initial_weights(model::Model& model);

  // Every rank's 1-D `bytes` (one length on all ranks) as the rows of a
  // (size, n) CPU tensor, on every rank.
  at::Tensor gather_rows(const at::Tensor& bytes);
  // Rank 0's values into every rank's `tensors` (the same shapes and dtypes
  // on every rank), in place.
  void broadcast_tensors(const std::vector<at::Tensor>& tensors);
  // Rank 0's text on every rank.
  std::string broadcast_string(const std::string& text);
  // Rank 0's value on every rank.
  int64_t broadcast_int(int64_t value);
  // Which ranks passed true, on every rank.
  std::vector<bool> gather_flags(bool mine);
  // Every rank's `mine`, in rank order, on every rank.
  std::vector<std::string> gather_strings(const std::string& mine);
  // Sums a CPU double tensor over the ranks, in place.
  void sum(at::Tensor& totals);
  // Starts the mean of `scalar` (any device) over the ranks.
  PendingMean start_mean(const at::Tensor& scalar, RankFlags flags);

 private:
  at::Tensor on_comm_device(const at::Tensor& t) const;

  host::HostServices& services_;
  std::unique_ptr<comm::Communicator> comm_;
  c10::Device comm_device_{c10::kCPU};  // where the communicator takes tensors
  rh_Comm* handle_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_world_size_ = 1;
  int node_rank_ = 0;
  int tp_size_ = 1;
  DLDevice rank_device_{kDLCPU, 0};
  std::unique_ptr<launch::DistEnv> env_;
};

}  // namespace rh::lifecycle
