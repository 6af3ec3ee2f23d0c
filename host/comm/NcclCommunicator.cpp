// The nccl backend: CUDA tensors, NCCL called directly. Built when CMake
// found CUDA and NCCL (RH_HAVE_NCCL), whether or not a GPU is present.
//
// - The world: rank 0 makes the NCCL unique id and hands it out through the
//   run's c10d store; communicators are non-blocking (config.blocking = 0)
//   so that initialisation, like every collective, is bounded by timeout_s.
// - Collectives run on one CUDA stream per communicator, after the work
//   already queued on the legacy default stream (where LibTorch computes
//   unless told otherwise); each returns a Work holding a CUDA event.
// - Work::wait() blocks the calling thread until the event completed,
//   polling the event and ncclCommGetAsyncError; after timeout_s (counted
//   from the issue) it aborts the communicator (ncclCommAbort) and throws
//   RH_ERROR_TIMEOUT. An aborted communicator cancels everything after.
// - Groups: ncclCommSplit (collective over the parent; non-members pass
//   NCCL_SPLIT_NOCOLOR).
// - A collective that times out or fails with an NCCL error (whose text
//   names no peer: "remote process exited or there was a network error")
//   asks the heartbeat of the world (Heartbeat.hpp, through the store, as
//   gloo does) which ranks stopped, and on which host, and says so.
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "comm/Backends.hpp"
#include "comm/CommInternal.hpp"
#include "comm/Heartbeat.hpp"
#include "comm/RankDevice.hpp"

namespace rh::comm::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::string nccl_text(ncclResult_t r) { return ncclGetErrorString(r); }
std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

void check_cuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw host::HostError(RH_ERROR_INTERNAL, what + ": " + cuda_text(e));
}

ncclDataType_t nccl_dtype(DLDataType t, const char* what) {
  element_size(t, what);  // throws for unsupported dtypes
  switch (t.code) {
    case kDLFloat:
      return t.bits == 16 ? ncclFloat16 : t.bits == 32 ? ncclFloat32 : ncclFloat64;
    case kDLBfloat:
      return ncclBfloat16;
    case kDLInt:
      if (t.bits == 8) return ncclInt8;
      if (t.bits == 32) return ncclInt32;
      if (t.bits == 64) return ncclInt64;
      break;
    case kDLUInt:
    case kDLBoolCode:
      return ncclUint8;
    default:
      break;
  }
  throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                        std::string(what) + ": NCCL has no " + dtype_name(t) + " type");
}

ncclRedOp_t nccl_op(ReduceOp op, DLDataType t, const char* what) {
  if (op == ReduceOp::Avg && is_integer(t))
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                          std::string(what) + ": op avg is not defined for integer dtype " +
                              dtype_name(t) + " (use sum and divide)");
  if (op == ReduceOp::Sum && is_bool(t))
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                          std::string(what) +
                              ": op sum is not defined for bool (use max for "
                              "'any', min for 'all')");
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
  }
  return ncclSum;
}

// What a communicator and its works share: the NCCL handle and its fate.
struct State {
  ncclComm_t comm = nullptr;
  int device = 0;
  double timeout_s = 300;
  Identity who;
  std::mutex mutex;      // serialises NCCL calls on `comm` and guards below
  std::string failure;   // first failure; later collectives are cancelled
  bool aborted = false;  // ncclCommAbort was called
  // Every rank's pulse, shared by the world and its groups; null in a world
  // of one.
  std::shared_ptr<Heartbeat> heartbeat;

  // Under `mutex`.
  void abort_locked(const std::string& why) {
    if (failure.empty()) failure = why;
    if (!aborted && comm != nullptr) {
      aborted = true;
      ncclCommAbort(comm);
    }
  }
};

// Completes a non-blocking NCCL call: while it is in progress, polls `poll`
// (the communicator being made, or the one called), at most until
// `deadline`. Under state.mutex.
void settle(State& s, ncclComm_t poll, ncclResult_t r, const char* collective,
            const std::string& step, Clock::time_point deadline) {
  while (r == ncclInProgress) {
    if (Clock::now() > deadline) {
      auto err = collective_error(s.who, collective, true, s.timeout_s, step, "");
      if (poll != nullptr && poll != s.comm) ncclCommAbort(poll);
      s.abort_locked(err.what());
      throw err;
    }
    std::this_thread::yield();
    if (poll == nullptr || ncclCommGetAsyncError(poll, &r) != ncclSuccess) break;
  }
  if (r != ncclSuccess) {
    auto err =
        collective_error(s.who, collective, false, s.timeout_s, step, "NCCL: " + nccl_text(r));
    if (poll != nullptr && poll != s.comm) ncclCommAbort(poll);
    s.abort_locked(err.what());
    throw err;
  }
}

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<State> state, cudaEvent_t done, const char* name, std::string step)
      : state_(std::move(state)),
        done_(done),
        name_(name),
        step_(std::move(step)),
        deadline_(deadline_after(state_->timeout_s)) {}
  ~NcclWork() override {
    if (done_ != nullptr) cudaEventDestroy(done_);
  }

  void wait() override {
    std::lock_guard<std::mutex> lock(wait_mutex_);
    if (finished_) {
      if (error_) std::rethrow_exception(error_);
      return;
    }
    cudaSetDevice(state_->device);
    for (unsigned spins = 0;; ++spins) {
      cudaError_t e = cudaEventQuery(done_);
      std::string detail;  // a failure's, when there is one
      bool timed_out = false;
      {
        std::unique_lock<std::mutex> state_lock(state_->mutex);
        // An aborted communicator's kernels end early: their events complete
        // without the data, so abort wins over completion.
        if (state_->aborted) fail(cancelled_error(state_->who, name_, step_, state_->failure));
        if (e == cudaSuccess) break;
        ncclResult_t async = ncclSuccess;
        if (e != cudaErrorNotReady)
          detail = "CUDA: " + cuda_text(e);
        else if (ncclCommGetAsyncError(state_->comm, &async) == ncclSuccess &&
                 async != ncclSuccess && async != ncclInProgress)
          detail = "NCCL: " + nccl_text(async);
        else
          timed_out = Clock::now() > deadline_;
      }
      if (!detail.empty() || timed_out) {
        // Which ranks stopped (outside the lock: it reads the store for a
        // few heartbeat periods), then the failure.
        if (state_->heartbeat) {
          const std::string lost = state_->heartbeat->explain_loss();
          if (!lost.empty()) detail += (detail.empty() ? "" : "; ") + lost;
        }
        std::unique_lock<std::mutex> state_lock(state_->mutex);
        if (state_->aborted) fail(cancelled_error(state_->who, name_, step_, state_->failure));
        fail(collective_error(state_->who, name_, timed_out, state_->timeout_s, step_, detail));
      }
      if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    finished_ = true;
  }

  bool completed() override {
    std::lock_guard<std::mutex> lock(wait_mutex_);
    if (finished_) return true;
    cudaSetDevice(state_->device);
    if (cudaEventQuery(done_) != cudaErrorNotReady) return true;
    std::lock_guard<std::mutex> state_lock(state_->mutex);
    return state_->aborted;
  }

 private:
  // Under both locks: records the error, aborts the communicator, throws.
  [[noreturn]] void fail(const host::HostError& error) {
    if (error.code() != RH_ERROR_CANCELLED) state_->abort_locked(error.what());
    finished_ = true;
    error_ = std::make_exception_ptr(error);
    throw error;
  }

  std::shared_ptr<State> state_;
  cudaEvent_t done_;
  const char* name_;
  std::string step_;
  Clock::time_point deadline_;
  std::mutex wait_mutex_;
  bool finished_ = false;
  std::exception_ptr error_;
};

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

class NcclCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (already initialised).
  NcclCommunicator(ncclComm_t comm, int device, double timeout_s, Identity who, int rank, int size,
                   std::vector<int> members, std::shared_ptr<Heartbeat> heartbeat)
      : state_(std::make_shared<State>()), rank_(rank), size_(size), members_(std::move(members)) {
    state_->heartbeat = std::move(heartbeat);
    state_->comm = comm;
    state_->device = device;
    state_->timeout_s = timeout_s;
    state_->who = std::move(who);
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc");
  }

  ~NcclCommunicator() override {
    cudaSetDevice(state_->device);
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (!state_->aborted && state_->comm != nullptr) {
        // Flush what was issued, bounded like any collective; abort otherwise.
        ncclResult_t r = ncclCommFinalize(state_->comm);
        auto deadline = deadline_after(state_->timeout_s);
        while (r == ncclInProgress && Clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::microseconds(100));
          if (ncclCommGetAsyncError(state_->comm, &r) != ncclSuccess) break;
        }
        if (r == ncclSuccess)
          ncclCommDestroy(state_->comm);
        else
          ncclCommAbort(state_->comm);
      }
      state_->aborted = true;  // works still alive see a dead communicator
      if (state_->failure.empty()) state_->failure = "the communicator was destroyed";
      state_->comm = nullptr;
    }
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (ready_ != nullptr) cudaEventDestroy(ready_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string all_reduce_transport() const override { return "nccl"; }

  std::shared_ptr<Work> all_reduce(Buffer b, ReduceOp op, bool async) override {
    const char* what = "all_reduce";
    check_device(b, what);
    ncclDataType_t t = nccl_dtype(b.dtype, what);
    ncclRedOp_t o = nccl_op(op, b.dtype, what);
    return launch(what, async, [&](ncclComm_t c) {
      return ncclAllReduce(b.data, b.data, b.count, t, o, c, stream_);
    });
  }

  std::shared_ptr<Work> all_gather(Buffer in, Buffer out, bool async) override {
    const char* what = "all_gather";
    check_device(in, what);
    check_device(out, what);
    check_pair(in, out, what);
    if (out.count != in.count * static_cast<size_t>(size_))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) + ": output has " + std::to_string(out.count) +
                                " elements, expected " + std::to_string(size_) + " x " +
                                std::to_string(in.count) + " (size() x input)");
    ncclDataType_t t = nccl_dtype(in.dtype, what);
    return launch(what, async, [&](ncclComm_t c) {
      return ncclAllGather(in.data, out.data, in.count, t, c, stream_);
    });
  }

  std::shared_ptr<Work> reduce_scatter(Buffer in, Buffer out, ReduceOp op, bool async) override {
    const char* what = "reduce_scatter";
    check_device(in, what);
    check_device(out, what);
    check_pair(in, out, what);
    if (in.count != out.count * static_cast<size_t>(size_))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) + ": input has " + std::to_string(in.count) +
                                " elements, expected " + std::to_string(size_) + " x " +
                                std::to_string(out.count) + " (size() x output)");
    ncclDataType_t t = nccl_dtype(in.dtype, what);
    ncclRedOp_t o = nccl_op(op, in.dtype, what);
    return launch(what, async, [&](ncclComm_t c) {
      return ncclReduceScatter(in.data, out.data, out.count, t, o, c, stream_);
    });
  }

  std::shared_ptr<Work> broadcast(Buffer b, int root, bool async) override {
    const char* what = "broadcast";
    check_device(b, what);
    if (root < 0 || root >= size_)
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) + ": root " + std::to_string(root) +
                                " is not in [0, " + std::to_string(size_) + ")");
    ncclDataType_t t = nccl_dtype(b.dtype, what);
    return launch(what, async, [&](ncclComm_t c) {
      return ncclBroadcast(b.data, b.data, b.count, t, root, c, stream_);
    });
  }

  void barrier() override {
    launch("barrier", false, [&](ncclComm_t c) {
      return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, c, stream_);
    });
  }

  std::unique_ptr<Communicator> new_group(const std::vector<int>& ranks) override {
    check_group_ranks(ranks, size_);
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    const bool member = it != ranks.end();
    std::string step = step_description();
    ncclComm_t group = nullptr;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      throw_if_failed("new_group", step);
      check_cuda(cudaSetDevice(state_->device), "cudaSetDevice");
      ncclConfig_t config = nonblocking_config();
      const auto deadline = deadline_after(state_->timeout_s);
      ncclResult_t r =
          ncclCommSplit(state_->comm, member ? 0 : NCCL_SPLIT_NOCOLOR,
                        member ? static_cast<int>(it - ranks.begin()) : 0, &group, &config);
      // Non-blocking split (NVIDIA/nccl#1472): the split is the parent's
      // operation, and `group` is filled only once the parent's status
      // leaves ncclInProgress; the new communicator then finishes its own
      // initialisation, and a collective issued on it before that fails
      // with "invalid argument". Wait for both, within one timeout.
      try {
        settle(*state_, state_->comm, r, "new_group", step, deadline);
      } catch (...) {
        if (group != nullptr) ncclCommAbort(group);  // half made: not ours to keep
        throw;
      }
      if (member) {
        if (group == nullptr)
          throw host::HostError(RH_ERROR_INTERNAL,
                                "new_group: ncclCommSplit completed without a communicator on "
                                "rank " +
                                    std::to_string(rank_));
        ncclResult_t own = ncclInProgress;
        if (ncclCommGetAsyncError(group, &own) != ncclSuccess) own = ncclInternalError;
        settle(*state_, group, own, "new_group", step, deadline);
      }
    }
    if (!member) return nullptr;
    std::vector<int> members;
    for (int r : ranks) members.push_back(members_[static_cast<size_t>(r)]);
    Identity who;
    who.global_rank = state_->who.global_rank;
    who.group_ranks = members;
    return std::make_unique<NcclCommunicator>(group, state_->device, state_->timeout_s,
                                              std::move(who), static_cast<int>(it - ranks.begin()),
                                              static_cast<int>(ranks.size()), std::move(members),
                                              state_->heartbeat);
  }

 private:
  void check_device(const Buffer& b, const char* what) const {
    if (b.device.device_type != kDLCUDA || b.device.device_id != state_->device)
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) + ": the nccl communicator of this rank takes " +
                                device_name(DLDevice{kDLCUDA, state_->device}) + " tensors, got " +
                                device_name(b.device));
    if (b.count > 0 && b.data == nullptr)
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT, std::string(what) + ": NULL data");
  }
  static void check_pair(const Buffer& in, const Buffer& out, const char* what) {
    if (!same_dtype(in.dtype, out.dtype))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT, std::string(what) + ": input is " +
                                                           dtype_name(in.dtype) + ", output is " +
                                                           dtype_name(out.dtype));
  }
  // Under state_->mutex.
  void throw_if_failed(const char* what, const std::string& step) const {
    if (!state_->failure.empty() || state_->aborted)
      throw cancelled_error(
          state_->who, what, step,
          state_->failure.empty() ? "the communicator was aborted" : state_->failure);
  }

  template <class Call>
  std::shared_ptr<Work> launch(const char* what, bool async, Call&& call) {
    std::string step = step_description();
    cudaEvent_t done = nullptr;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      throw_if_failed(what, step);
      check_cuda(cudaSetDevice(state_->device), "cudaSetDevice");
      // After what the legacy default stream has queued (the inputs).
      check_cuda(cudaEventRecord(ready_, cudaStreamLegacy), "cudaEventRecord");
      check_cuda(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
      settle(*state_, state_->comm, call(state_->comm), what, step,
             deadline_after(state_->timeout_s));
      check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
      cudaError_t e = cudaEventRecord(done, stream_);
      if (e != cudaSuccess) {
        cudaEventDestroy(done);
        check_cuda(e, "cudaEventRecord");
      }
    }
    auto work = std::make_shared<NcclWork>(state_, done, what, std::move(step));
    if (!async) work->wait();
    return work;
  }

  std::shared_ptr<State> state_;
  int rank_;
  int size_;
  std::vector<int> members_;  // global rank of each rank of this communicator
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  void* scratch_ = nullptr;  // barrier's element
};

std::string uuid_text(const cudaUUID_t& uuid) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : uuid.bytes) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

// NCCL allows one rank per GPU in a communicator; two ranks on one GPU fail
// inside ncclCommInitRankConfig with "invalid usage". Every rank publishes
// its host and GPU (by UUID: one visible GPU per rank, as srun
// --gpus-per-task=1 gives, is still a different GPU per rank) through the
// store, and every rank refuses the world before NCCL starts when two ranks
// of one host share a GPU, naming them, the counts and the fixes.
void refuse_shared_gpus(c10d::Store& store, const RendezvousOptions& o, int device, int visible) {
  if (o.world_size <= 1) return;
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  const std::string mine = this_host() + "\n" + uuid_text(prop.uuid);
  const std::string prefix = "rh/nccl/gpu/";
  std::vector<std::string> seen(static_cast<size_t>(o.world_size));
  try {
    store.set(prefix + std::to_string(o.rank), std::vector<uint8_t>(mine.begin(), mine.end()));
    for (int r = 0; r < o.world_size; ++r) {
      const std::vector<uint8_t> v = store.get(prefix + std::to_string(r));
      seen[static_cast<size_t>(r)].assign(v.begin(), v.end());
    }
  } catch (const std::exception& e) {
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    throw host::HostError(
        RH_ERROR_TIMEOUT,
        "nccl: rank " + std::to_string(o.rank) + " did not learn every rank's GPU within " +
            format_seconds(o.timeout_s) +
            " s: " + (c10_error ? c10_error->what_without_backtrace() : e.what()));
  }
  // The first GPU two ranks would share, wherever it is: every rank refuses
  // (a rank on another GPU would otherwise wait in NCCL's initialisation).
  std::vector<int> sharing;
  for (int r = 0; r < o.world_size && sharing.size() < 2; ++r) {
    sharing.clear();
    for (int q = 0; q < o.world_size; ++q)
      if (seen[static_cast<size_t>(q)] == seen[static_cast<size_t>(r)]) sharing.push_back(q);
  }
  if (sharing.size() < 2) return;
  const std::string& where = seen[static_cast<size_t>(sharing.front())];
  const std::string host = where.substr(0, where.find('\n'));
  int on_host = 0;
  for (const std::string& s : seen)
    if (s.compare(0, host.size() + 1, host + "\n") == 0) ++on_host;
  std::string ranks;
  for (int r : sharing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  throw host::HostError(
      RH_ERROR_FAILED_PRECONDITION,
      "backend 'nccl': ranks " + ranks + " of host " + host + " would share one GPU (UUID " +
          where.substr(where.find('\n') + 1, 8) + "...), and NCCL takes one rank per GPU: host " +
          host + " runs " + std::to_string(on_host) + " rank(s); rank " + std::to_string(o.rank) +
          " sees " + std::to_string(visible) + " GPU(s)" +
          (env != nullptr ? std::string(" (CUDA_VISIBLE_DEVICES=") + env + ")" : std::string()) +
          ". Start at most one rank per GPU (--nproc-per-node " + std::to_string(visible) +
          "), give each rank a GPU of its own (CUDA_VISIBLE_DEVICES), or communicate through "
          "the CPU (dist.backend: gloo)");
}

}  // namespace

std::unique_ptr<Communicator> create_nccl_world(StorePtr store, const RendezvousOptions& o) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw host::HostError(RH_ERROR_FAILED_PRECONDITION,
                          "backend 'nccl' needs a CUDA device; none is visible on rank " +
                              std::to_string(o.rank) + " (use backend 'gloo' on CPU)");
  int device = 0;
  try {
    device = rank_cuda_device(o.rank, o.local_rank, devices);
  } catch (const std::runtime_error& e) {
    throw host::HostError(RH_ERROR_FAILED_PRECONDITION, std::string("backend 'nccl': ") + e.what());
  }
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  refuse_shared_gpus(*store, o, device, devices);

  Identity who;
  who.global_rank = o.rank;
  const std::string key = "rh/nccl/world/unique_id";
  ncclUniqueId id;
  try {
    if (o.rank == 0) {
      ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess)
        throw host::HostError(RH_ERROR_INTERNAL, "ncclGetUniqueId: " + nccl_text(r));
      const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
      store->set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
    } else {
      std::vector<uint8_t> bytes = store->get(key);
      if (bytes.size() != sizeof(id))
        throw host::HostError(RH_ERROR_INTERNAL, "the NCCL unique id in the store has " +
                                                     std::to_string(bytes.size()) + " bytes");
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
  } catch (const host::HostError&) {
    throw;
  } catch (const std::exception& e) {
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    throw host::HostError(
        RH_ERROR_TIMEOUT,
        "nccl: rank " + std::to_string(o.rank) +
            " did not get the NCCL unique id of rank 0 within " + format_seconds(o.timeout_s) +
            " s: " + (c10_error ? c10_error->what_without_backtrace() : e.what()));
  }

  ncclComm_t comm = nullptr;
  ncclConfig_t config = nonblocking_config();
  ncclResult_t r = ncclCommInitRankConfig(&comm, o.world_size, id, o.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress)
    throw host::HostError(RH_ERROR_IO, "ncclCommInitRankConfig on rank " + std::to_string(o.rank) +
                                           ": " + nccl_text(r));
  State init;
  init.comm = comm;
  init.device = device;
  init.timeout_s = o.timeout_s;
  init.who = who;
  try {
    std::lock_guard<std::mutex> lock(init.mutex);
    settle(init, comm, r, "rendezvous (ncclCommInitRankConfig)", "", deadline_after(o.timeout_s));
  } catch (...) {
    if (!init.aborted && comm != nullptr) ncclCommAbort(comm);
    throw;
  }
  std::vector<int> members(static_cast<size_t>(o.world_size));
  for (int i = 0; i < o.world_size; ++i) members[static_cast<size_t>(i)] = i;
  // The heartbeat as gloo's world has it (Heartbeat.hpp): after NCCL's own
  // rendezvous, so that a rank that never came fails there, naming it.
  std::shared_ptr<Heartbeat> heartbeat;
  if (o.world_size > 1) heartbeat = std::make_shared<Heartbeat>(o);
  return std::make_unique<NcclCommunicator>(comm, device, o.timeout_s, std::move(who), o.rank,
                                            o.world_size, std::move(members), std::move(heartbeat));
}

}  // namespace rh::comm::detail
