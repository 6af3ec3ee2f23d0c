// The host's communicator: collectives between the ranks of a run (the world)
// or of a subgroup of it. No LibTorch headers here: tensors arrive as plain
// (pointer, count, dtype, device) buffers, and the backends (gloo for CPU
// tensors, NCCL for CUDA tensors) live in .cpp files.
//
// Errors are thrown as host::HostError: RH_ERROR_INVALID_ARGUMENT for a bad
// call (thrown by the call itself), RH_ERROR_TIMEOUT when a collective made no
// progress for the rendezvous timeout (dist.timeout_s), RH_ERROR_IO when a
// peer closed the connection, RH_ERROR_CANCELLED for collectives queued behind
// a failed one (after a failure the communicator refuses new work: the ranks
// no longer agree on what was exchanged).
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rh/rh_host.h"

namespace rh::host {
class HostServices;
}

namespace rh::comm {

enum class ReduceOp { Sum, Avg, Max, Min };

// `count` contiguous elements of `dtype` at `data` on `device`. Supported
// dtypes: float16/32/64, bfloat16, int8/16/32/64, uint8, bool (DLPack code 6,
// 8 bits; lanes == 1; nccl has no int16). Avg is refused for integer dtypes
// and bool, Sum for bool (Max is "any", Min is "all").
struct Buffer {
  void* data;
  size_t count;
  DLDataType dtype;
  DLDevice device;
};

// A collective in flight.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective finished; rethrows its error (every call).
  virtual void wait() = 0;
  // Non-blocking: true once finished, successfully or not.
  virtual bool completed() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Each returns a Work; `async == false` waits before returning (and
  // throws the collective's error). Collectives on one communicator run in
  // issue order on background threads of the communicator, one at a time
  // (gloo over TCP: two all-reduces on different bytes may run together),
  // so async calls from the autograd thread are fine. Buffers of an async
  // call must stay alive and untouched until the Work finished.
  virtual std::shared_ptr<Work> all_reduce(Buffer inout, ReduceOp op, bool async) = 0;
  // out.count == size() * in.count; out holds every rank's `in`, in rank order.
  virtual std::shared_ptr<Work> all_gather(Buffer in, Buffer out, bool async) = 0;
  // in.count == size() * out.count; rank r gets the reduction of every
  // rank's chunk r of `in`.
  virtual std::shared_ptr<Work> reduce_scatter(Buffer in, Buffer out, ReduceOp op, bool async) = 0;
  // In place; `root` is a rank of this communicator.
  virtual std::shared_ptr<Work> broadcast(Buffer inout, int root, bool async) = 0;
  // Blocks until every rank reached it (and every collective issued before it ran).
  virtual void barrier() = 0;
  // A subgroup of `ranks` (ranks of this communicator, strictly ascending).
  // Every rank of this communicator calls it with the same list, in the same
  // order relative to other new_group calls; ranks not in the list get
  // nullptr. The subgroup is independent of *this (own connections and
  // background thread) and may outlive it.
  virtual std::unique_ptr<Communicator> new_group(const std::vector<int>& ranks) = 0;
  // How all_reduce, reduce_scatter and all_gather move data (all three the
  // same way), for logs and tests: "tcp ring", "shared memory", "nccl".
  virtual std::string all_reduce_transport() const = 0;

  // What the host is doing, for error messages: a phrase such as
  // "at train iteration 12", giving "all_reduce timed out after 30 s at train
  // iteration 12 on rank 1 (...)". Called once per collective when it is
  // issued, on the issuing thread (so it must be thread-safe); an empty
  // result or an unset function leaves the phrase out.
  void set_step_description(std::function<std::string()> f);

 protected:
  // The current description ("" when unset); never throws.
  std::string step_description() const;

 private:
  mutable std::mutex step_mutex_;
  std::shared_ptr<const std::function<std::string()>> step_description_;
};

struct RendezvousOptions {
  std::string master_addr = "127.0.0.1";
  // 0: rank 0's store listens on a port the kernel picks (a world of one only).
  int master_port = 29500;
  // Where master_port came from ("--master-port", "MASTER_PORT",
  // "dist.master_port at job.yaml:9:30", ...), for the message when it is
  // taken; "" leaves it out.
  std::string master_port_from;
  // The job: rank 0 publishes its id and description in the store; every
  // other rank compares the id with its own before it joins, and stops with
  // an error naming both jobs when they differ (it reached another job's
  // store). Every key of the run then carries the id. "": no prefix, and
  // only ranks with no id either may join.
  std::string job_id;
  // "job 5e3a... (made by the runner-host launcher, pid 200; config a.yaml)",
  // for messages.
  std::string job_description;
  // false: the store is hosted by someone else at master_addr:master_port
  // (torchrun's agent, TORCHELASTIC_USE_AGENT_STORE=True): rank 0 connects
  // to it as a client too.
  bool rank0_hosts_store = true;
  // Every key under this prefix first ("/worker/attempt_0" under torchrun's
  // agent store, as PyTorch's workers do); "" for none.
  std::string store_prefix;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // picks the CUDA device of the nccl backend
  double timeout_s = 300;
  std::string backend = "gloo";  // "gloo" | "nccl"
  // gloo: all_reduce, reduce_scatter and all_gather through shared memory
  // when every member of a communicator is on this host (ShmAllReduce.hpp);
  // false: always TCP.
  bool shared_memory = true;
};

// Joins the world: rank 0 hosts a c10d TCPStore on master_addr:master_port
// (unless rank0_hosts_store is false), every rank connects to it, rank 0
// publishes the job (job_id, job_description) and every other rank checks it
// reached its own job's store, rank 0 waits until every rank joined, then the
// backend connects the ranks. Throws HostError: RH_ERROR_INVALID_ARGUMENT for
// bad options (unknown backend, "nccl" in a build without NCCL),
// RH_ERROR_TIMEOUT when the other ranks did not join within timeout_s,
// RH_ERROR_FAILED_PRECONDITION when rank 0's port is taken (the message says
// so, where the port came from and how to give another: --master-port) or a
// rank reached another job's store (naming both jobs), RH_ERROR_IO for
// network failures.
std::unique_ptr<Communicator> create_world(const RendezvousOptions& o);

// Fills rh_HostApi's Comm_* and CommWork_* entries so that plugins reach
// `world` (Comm_World) and the groups made from it (Comm_NewGroup; owned by
// these services until the next install_comm_api call). With world ==
// nullptr the entries are cleared (NULL: "not provided") and the groups made
// so far are destroyed: call install_comm_api(services, nullptr) before
// destroying the world.
void install_comm_api(host::HostServices& services, Communicator* world);
// The communicator behind a handle the installed API gave (the world, or a
// group a strategy made with Comm_NewGroup): the host issuing collectives on
// a strategy's group itself (a tensor-parallel plan's). Throws HostError
// (INVALID_ARGUMENT) naming `what` for NULL.
Communicator& communicator_of(const rh_Comm* handle, const char* what);

}  // namespace rh::comm
