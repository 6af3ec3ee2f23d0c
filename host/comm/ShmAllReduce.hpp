// All-reduce between the ranks of one host through a POSIX shared-memory
// segment: each rank copies its data into its slot once, reduces 1/P of the
// elements over every slot, and copies the reduced result out once. No
// kernel, no TCP: over loopback TCP the same all-reduce costs two kernel
// copies per byte plus the TCP stack and the wake-ups of gloo's device
// thread, on the cores that also compute (rh_bench_comm compares the two).
//
// The gloo communicator uses it for all_reduce when every member of the
// communicator is on this host; the other collectives and other worlds take
// gloo's TCP path. Waits are bounded by the collective timeout and notice a
// dead peer (its process is gone) within ~50 ms. No LibTorch headers.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/Reduce.hpp"

namespace rh::comm::detail {

// The key-value store of the rendezvous, under the communicator's prefix.
struct ShmRendezvous {
  std::function<void(const std::string& key, const std::string& value)> set;
  std::function<std::string(const std::string& key)> get;  // blocks until set (or throws)
};

class ShmAllReduce {
 public:
  // Slot of each rank: tensors are reduced in pieces of at most this many
  // bytes. The segment holds P + 1 slots (~6 MiB for 2 ranks).
  static constexpr size_t kSlotBytes = size_t{2} << 20;

  // Collective over the communicator's `size` members (`rank` is this one's
  // place, `global_ranks` names them in errors). `host_identity` is what must
  // be equal on every member (host_identity() below). Returns null on every
  // member alike when the members are not all on one host or one of them
  // could not map the segment; `why_not` then says why.
  static std::unique_ptr<ShmAllReduce> connect(const ShmRendezvous& store, int rank, int size,
                                               std::vector<int> global_ranks,
                                               const std::string& host_identity,
                                               std::chrono::milliseconds timeout,
                                               std::string* why_not);
  ~ShmAllReduce();
  ShmAllReduce(const ShmAllReduce&) = delete;
  ShmAllReduce& operator=(const ShmAllReduce&) = delete;

  // data[i] = fn-reduction over the ranks of data[i], in place, `count`
  // elements of `element_size` bytes. Every member calls it in the same
  // order. Throws std::runtime_error ("timed out ..." or "rank N ... exited")
  // when a peer does not arrive in time or died; the segment is unusable
  // afterwards (the communicator cancels its later collectives).
  void all_reduce(void* data, size_t count, size_t element_size, ReduceFn fn);

  // Host, boot and the IPC and PID namespaces of this process: members with
  // equal identities can share a segment and see each other's processes.
  static std::string host_identity();

 private:
  struct Control;
  ShmAllReduce() = default;
  void wait_all(uint32_t target, bool reduced_phase);
  void publish(bool reduced_phase, uint32_t value);

  int rank_ = 0;
  int size_ = 0;
  std::vector<int> global_ranks_;
  std::chrono::milliseconds timeout_{0};
  void* base_ = nullptr;  // the mapping
  size_t bytes_ = 0;
  Control* control_ = nullptr;      // size_ entries, one cache line each
  unsigned char* slots_ = nullptr;  // size_ slots, then the result slot
  uint32_t sequence_ = 0;           // pieces done so far (the same on every member)
};

}  // namespace rh::comm::detail
