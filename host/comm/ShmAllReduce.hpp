// Collectives between the ranks of one host through a POSIX shared-memory
// segment (named for the first of them, all_reduce). Each rank has a slot;
// every collective runs in pieces of at most one slot, with the same steps:
// each rank copies its piece in, every rank reads what it needs from every
// slot, and the piece ends once all are done reading. No kernel, no TCP:
// over loopback TCP the same collective costs two kernel copies per byte
// plus the TCP stack and the wake-ups of gloo's device thread, on the cores
// that also compute (rh_bench_comm compares the two).
//
//   all_reduce      each rank reduces 1/P of the piece over every slot into
//                   the result slot; every rank copies the result out
//   reduce_scatter  each rank reduces its own chunk over every slot straight
//                   into its output (the same summation order as all_reduce)
//   all_gather      each rank copies every slot out
//
// The gloo communicator uses it when every member of the communicator is on
// this host; broadcast, barrier and other worlds take gloo's TCP path. Waits
// are bounded by the collective timeout and notice a dead peer (its process
// is gone) within ~50 ms. No LibTorch headers.
//
// Tests only: RH_FAULT_INJECT=shm_full makes the segment's reservation fail
// with ENOSPC (a full /dev/shm): the communicator falls back to TCP.
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

// Which collective a call is (ShmAllReduce.cpp).
struct ShmCollective;

class ShmAllReduce {
 public:
  // Slot of each rank: collectives run in pieces of at most this many bytes
  // per rank. The segment holds P + 1 slots (~6 MiB for 2 ranks).
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
  // elements of `element_size` bytes. Every member calls the collectives in
  // the same order with the same sizes. Throws std::runtime_error ("timed
  // out ...", "rank N ... exited", or different sizes or collectives on the
  // ranks) when a peer does not arrive in time, died or disagrees; the
  // segment is unusable afterwards (the communicator cancels its later
  // collectives).
  void all_reduce(void* data, size_t count, size_t element_size, ReduceFn fn);

  // out[j] = fn-reduction over the ranks of in[rank * count + j], j < count:
  // `in` holds size() chunks of `count` elements. Each element is reduced in
  // rank order, exactly as all_reduce reduces it, so both give the same bits.
  // `out` may be this rank's chunk of `in`, and must not overlap it otherwise.
  void reduce_scatter(const void* in, void* out, size_t count, size_t element_size, ReduceFn fn);

  // out = every rank's `in` (`count` elements), in rank order. `in` may be
  // this rank's part of `out`, and must not overlap it otherwise.
  void all_gather(const void* in, void* out, size_t count, size_t element_size);

  // Host, boot and the IPC and PID namespaces of this process: members with
  // equal identities can share a segment and see each other's processes.
  static std::string host_identity();

 private:
  struct Control;
  ShmAllReduce() = default;
  // The steps every collective shares, for each of `pieces` pieces: `post`
  // fills this rank's slot, `consume` reads every rank's slot once all
  // posted, `after` runs once every rank consumed (the slots are free again).
  template <class Post, class Consume, class After>
  void run_pieces(const ShmCollective& what, uint64_t call_bytes, size_t pieces, Post&& post,
                  Consume&& consume, After&& after);
  void wait_all(const ShmCollective& what, uint32_t target, bool consumed_phase);
  void publish(bool consumed_phase, uint32_t value);
  [[noreturn]] void throw_disagreement(const ShmCollective& what, uint64_t call_bytes, int r) const;
  unsigned char* slot(size_t r) const { return slots_ + r * kSlotBytes; }
  void reduce_over_slots(unsigned char* out, size_t offset, size_t count, ReduceFn fn) const;

  int rank_ = 0;
  int size_ = 0;
  std::vector<int> global_ranks_;
  std::chrono::milliseconds timeout_{0};
  void* base_ = nullptr;  // the mapping
  size_t bytes_ = 0;
  Control* control_ = nullptr;      // size_ entries, one cache line each
  unsigned char* slots_ = nullptr;  // size_ slots, then all_reduce's result slot
  uint32_t sequence_ = 0;           // pieces done so far (the same on every member)
};

}  // namespace rh::comm::detail
