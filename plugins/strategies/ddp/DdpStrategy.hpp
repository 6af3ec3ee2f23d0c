// Strategy `ddp`: data parallel, every rank holds the whole model.
//
// The host has already verified that every rank built the same parameters
// and broadcast rank 0's weights (lifecycle step 3). This strategy groups
// gradients into buckets (GradBucket.hpp) and all-reduces each bucket
// asynchronously as soon as its last gradient is ready *during* backward, so
// communication overlaps the rest of backward; SyncGradients waits for them.
// Each gradient is copied into its bucket already divided by the world size
// (the average costs no pass of its own) and then *is* its slice of the
// bucket (Model_BindGrad, like PyTorch's gradient_as_bucket_view), so the
// summed values need no copy back. Gradient-accumulation steps
// (BeforeBackward(sync = 0)) do not communicate.
//
// A world of one rank communicates nothing: no gradient callbacks, no
// buckets (no copy, no memory), no buffer broadcast, no metrics; each
// gradient stays where backward wrote it, as under `single` (issue 30: ddp
// on 1 rank cost 1.06-1.30 x single on a GPU). The bucket plan is still
// made and saved, so a checkpoint moves to more ranks as any other.
//
// The bucket plan is rebuilt once, from the order gradients arrived in the
// first synchronised step, and saved with the checkpoint (StateExport): a
// resumed run sums in the same buckets, hence the same order, as the
// uninterrupted one (with 3+ ranks a ring all-reduce's result depends on the
// bucket layout).
//
// clang-format off
//   strategy:
//     type: ddp
//     bucket_cap_mb: 25               # later buckets: each closes once it holds this much (the
//                                     # parameter that crosses it included, as PyTorch's DDP)
//     first_bucket_mb: 1              # the first bucket's, small so that communication starts early
//     find_unused_parameters: false   # true: parameters may go unused (see before_backward):
//                                     # one small all-reduce per step finds them; they no longer
//                                     # hold back later buckets, and keep no gradient where no
//                                     # rank used them
//     broadcast_buffers: true         # rank 0's buffers (batch-norm statistics) after every step, one broadcast
//     device: auto                    # auto (cuda:LOCAL_RANK when LibTorch sees GPUs, else cpu) | cpu | cuda
//     tensor_parallel: {size: 1, plan: ...}  # ddp x tensor parallel (TensorParallelMesh.hpp)
// clang-format on
//
// Metrics of every step that synchronises: ddp/comm_bytes (bytes this rank
// handed to collectives: the gradient buckets, plus the buffers' broadcast,
// find_unused_parameters' usage exchange and late gradients, and the bucket
// order broadcast once after the first step) and ddp/comm_ms (time the
// training thread spent in communication calls: issuing buckets, waiting
// for them, blocking collectives; the communication *not* hidden behind
// compute), ddp/grad_bytes (the buckets, which hold every gradient).
// Profiler ranges (hook `profiler`): ddp::all_reduce where a
// bucket is copied in and issued, async:ddp::all_reduce bucket <b> from
// issue until its wait returns (an async track in the trace: the time in
// flight, which the communicator's own threads cannot show, since the
// profiler records only LibTorch's threads), ddp::wait, ddp::broadcast_buffers,
// ddp::usage_exchange, ddp::late_gradients, ddp::rebuild_buckets.
//
// Internal to the plugin (not installed). The class is defined over several
// files: DdpStrategy.cpp (configuration, lifecycle, the bucket plan, the
// vtable), DdpReduce.cpp (the all-reduces), DdpCheckpoint.cpp (StateExport,
// StateImport).
#pragma once

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "GradBucket.hpp"
#include "TensorParallelMesh.hpp"
#include "rh/rh_plugin.h"

namespace rh::ddp {

using Clock = std::chrono::steady_clock;

// Adds the time of its scope to `total_s` (communication time of the step).
class CommTimer {
 public:
  explicit CommTimer(double& total_s) : total_s_(total_s), start_(Clock::now()) {}
  ~CommTimer() { total_s_ += std::chrono::duration<double>(Clock::now() - start_).count(); }
  CommTimer(const CommTimer&) = delete;
  CommTimer& operator=(const CommTimer&) = delete;

 private:
  double& total_s_;
  Clock::time_point start_;
};

inline int64_t bytes_of(const at::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

class DdpStrategy {
 public:
  explicit DdpStrategy(const rh_CreateArgs& args);
  ~DdpStrategy() { release_works(); }
  void traits(rh_StrategyTraits& t) const { t.needs_comm = 1; }
  void setup_env(rh_SetupEnvArgs& args);
  // --estimate-memory (ABI 1.9): the whole model and its optimizer, the
  // flat gradient arena, the autograd gradients waiting for their bucket,
  // the buffers' broadcast copy (DdpStrategy.cpp).
  // With tensor_parallel: the same for this rank's blocks of the planned
  // parameters, over the data-parallel group.
  void estimate_memory(const rh_MemoryEstimateArgs& args, rh_MemoryEstimate& out) const;
  // ABI 1.11: `tensor_parallel` (TensorParallelMesh.hpp): the plan, and
  // its group; the buckets are reduced over the data-parallel group.
  void tensor_parallel_plan(rh_TensorParallelPlanArgs& args) const { mesh_.fill(args); }
  void wrap(const rh_WrapArgs& args);
  void before_backward(bool sync);
  void sync_gradients(bool sync);
  void after_optimizer_step();
  void broadcast_buffers();
  void put_comm_metrics();
  void state_export(rh_StateDict* dict);
  void state_import(const rh_StateDict* dict);

 private:
  // DdpStrategy.cpp: the estimate of a data-parallel group, the bucket plan, parameters
  void estimate_data_parallel(const rh_MemoryEstimateArgs& args, rh_MemoryEstimate& out) const;
  at::Tensor grad_of(size_t index);
  std::string param_name(size_t index);
  at::Tensor slice_of(size_t i);
  void set_plan(BucketPlan plan);
  void release_works();
  void log(rh_LogLevel level, const std::string& message);

  // DdpReduce.cpp: buckets and their all-reduces
  static void on_grad_ready(void* self, size_t index);
  void grad_ready(size_t index);
  void launch_ready_buckets();
  void launch(size_t b);
  void bind_grad(size_t i, const at::Tensor& slice);
  void wait_bucket(size_t b);
  void start_usage_exchange();
  void finish_usage_exchange();
  void add_late_gradients(const std::vector<size_t>& params);
  void publish_gradients();
  void warn_about_unused_parameters();
  void rebuild_from_observed_order();

  // DdpCheckpoint.cpp: state dict entries
  void put_longs(rh_StateDict* dict, const char* key, const std::vector<int64_t>& values);
  bool get_longs(const rh_StateDict* dict, const char* key, std::vector<int64_t>& out);

  bool alone() const { return world_size_ == 1; }

  const rh_HostApi* host_;
  rh_Context* context_;
  size_t cap_bytes_ = 0;
  size_t first_cap_bytes_ = 0;
  bool find_unused_ = false;
  bool broadcast_buffers_ = true;
  std::string device_;

  // The ranks the gradients are averaged over: the world, or with
  // tensor_parallel its data-parallel group (world_size_ its size).
  rh_Comm* world_ = nullptr;
  rh::strategies::TensorParallelMesh mesh_;
  rh_Model* model_ = nullptr;
  const rh_ModelApi* api_ = nullptr;
  std::vector<size_t> trainable_;
  std::vector<int64_t> numel_;
  std::vector<std::vector<int64_t>> shapes_;
  int world_size_ = 1;
  at::Tensor world_size_tensor_;  // 0-dim divisor of the average
  bool can_bind_ = false;         // the host has Model_BindGrad (ABI >= 1.2)
  bool can_release_ = false;      // the host has Model_ReleaseGrad (ABI >= 1.3)
  std::vector<size_t> bytes_;
  at::ScalarType dtype_ = at::kFloat;
  at::Device device_of_params_ = at::kCPU;

  BucketPlan plan_;
  at::Tensor arena_;               // every bucket, side by side (set_plan)
  std::vector<at::Tensor> flats_;  // the buckets: slices of arena_
  std::vector<size_t> ready_;
  std::vector<rh_CommWork*> works_;
  std::vector<DLManagedTensor*> dl_;
  // Per bucket: its profiler range while its all-reduce is in flight (empty
  // when no profiler is on).
  std::vector<std::unique_ptr<at::RecordFunction>> in_flight_;
  int64_t comm_bytes_ = 0;  // this step's communication (put_comm_metrics)
  double comm_s_ = 0;
  size_t next_launch_ = 0;
  bool sync_ = true;
  bool in_backward_ = false;
  size_t launched_in_backward_ = 0;
  bool record_order_ = false;  // rebuild the plan after this step (the first synchronised one)
  // The plan follows an observed gradient order (saved: a resumed run does
  // not rebuild it again). Never alone: one rank observes nothing, so more
  // ranks resuming its checkpoint still rebuild theirs.
  bool rebuilt_ = false;
  std::vector<size_t> observed_;
  std::vector<int64_t> offset_in_bucket_;  // parameter -> first element in its bucket
  std::vector<char> seen_;                 // this backward: parameter's gradient arrived
  std::vector<char> predicted_unused_;     // this backward: counted ready up-front
  std::vector<char> late_;                 // predicted unused, arrived after its bucket left
  std::vector<char> bound_;                // this step: its gradient is its bucket slice
  // find_unused_parameters: no rank had a gradient for it in the last
  // synchronised step (saved with the checkpoint: the next step's prediction).
  std::vector<char> unused_everywhere_;
  at::Tensor usage_;  // the usage exchange in flight
  DLManagedTensor* usage_dl_ = nullptr;
  rh_CommWork* usage_work_ = nullptr;
  at::Tensor buffer_bytes_;  // every buffer's bytes, broadcast from rank 0
  int64_t twice_ = -1;       // first parameter whose gradient arrived twice
  bool warned_unused_ = false;
};

}  // namespace rh::ddp
