#include "comm/ShmAllReduce.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <utility>

#include "common/FaultInjection.hpp"

namespace rh::comm::detail {

// One cache line per rank, written only by that rank: `posted` = the piece
// whose data is in its slot, `consumed` = the piece it is done reading every
// slot of (all_reduce: its share is reduced into the result slot).
struct alignas(64) ShmAllReduce::Control {
  std::atomic<uint32_t> posted;
  std::atomic<uint32_t> consumed;
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> collective;  // ShmCollective::id of the call `posted` belongs to
  std::atomic<uint64_t> call_bytes;  // and its size; both written before `posted` (release)
};

// What a call is, for the check that every rank runs the same one and for
// messages.
struct ShmCollective {
  uint32_t id;
  const char* name;      // "all-reduce"
  const char* verb;      // "reduces": rank 1 reduces N bytes where ...
  const char* consumed;  // what a rank has not done yet when others wait in the second phase
};

namespace {

constexpr ShmCollective kAllReduce{1, "all-reduce", "reduces", "reduced its share"};
constexpr ShmCollective kReduceScatter{2, "reduce-scatter", "reduce-scatters", "reduced its chunk"};
constexpr ShmCollective kAllGather{3, "all-gather", "gathers", "copied the others' data out"};

static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain memory");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex words are 32-bit");

using Clock = std::chrono::steady_clock;

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string link_target(const char* path) {
  char buf[256];
  ssize_t n = ::readlink(path, buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("?");
}

// Gone, or a zombie nobody reaped yet: either way it will not post again.
bool process_alive(int32_t pid) {
  if (pid <= 0) return true;  // not published yet
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;  // no /proc: trust kill()
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return true;
  const char state = text[paren + 2];
  return state != 'Z' && state != 'X';
}

// Has `value` reached `target`? Sequence numbers wrap around.
bool reached(uint32_t value, uint32_t target) { return static_cast<int32_t>(value - target) >= 0; }

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds limit) {
  timespec ts{static_cast<time_t>(limit.count() / 1000000000),
              static_cast<long>(limit.count() % 1000000000)};
  // Shared futex (no FUTEX_PRIVATE_FLAG): the waker is another process.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Test-only fault injection (common/FaultInjection.hpp): `shm_full` makes
// rank 0's reservation of the segment fail with ENOSPC, as on a /dev/shm too
// small to hold it.
// posix_fallocate, or ENOSPC under RH_FAULT_INJECT=shm_full.
int reserve(int fd, off_t bytes) {
  if (common::fault_injected("shm_full")) return ENOSPC;
  return ::posix_fallocate(fd, 0, bytes);
}

std::string random_segment_name() {
  std::random_device rd;
  char name[64];
  std::snprintf(name, sizeof(name), "/rh-allreduce-%d-%08x%08x", static_cast<int>(::getpid()), rd(),
                rd());
  return name;
}

}  // namespace

std::string ShmAllReduce::host_identity() {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  return std::string(host) + " boot " + first_line("/proc/sys/kernel/random/boot_id") + " " +
         link_target("/proc/self/ns/ipc") + " " + link_target("/proc/self/ns/pid");
}

std::unique_ptr<ShmAllReduce> ShmAllReduce::connect(const ShmRendezvous& store, int rank, int size,
                                                    std::vector<int> global_ranks,
                                                    const std::string& host_identity,
                                                    std::chrono::milliseconds timeout,
                                                    std::string* why_not) {
  auto fail = [&](const std::string& why) -> std::unique_ptr<ShmAllReduce> {
    if (why_not != nullptr) *why_not = why;
    return nullptr;
  };
  const size_t n = static_cast<size_t>(size);
  const size_t control_bytes = n * sizeof(Control);
  const size_t bytes = control_bytes + (n + 1) * kSlotBytes;

  // Whatever way we leave (a peer that never comes makes store.get throw):
  // rank 0's name is unlinked, and a mapping nobody took over is unmapped.
  struct Cleanup {
    std::string name;
    int fd = -1;
    void* base = MAP_FAILED;
    size_t bytes = 0;
    ~Cleanup() {
      if (fd >= 0) ::close(fd);
      if (!name.empty()) ::shm_unlink(name.c_str());
      if (base != MAP_FAILED) ::munmap(base, bytes);
    }
  } cleanup;
  cleanup.bytes = bytes;
  int& fd = cleanup.fd;

  // 1. Are we all on one host? Rank 0 decides, and names the segment.
  store.set("shm/host/" + std::to_string(rank), host_identity);
  std::string decision;
  if (rank == 0) {
    for (int r = 1; r < size && decision.empty(); ++r)
      if (store.get("shm/host/" + std::to_string(r)) != host_identity)
        decision =
            "-rank " + std::to_string(global_ranks[static_cast<size_t>(r)]) + " is on another host";
    if (decision.empty()) {
      const std::string name = random_segment_name();
      fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0) {
        decision = "-shm_open(" + name + "): " + std::strerror(errno);
      } else if (int e = reserve(fd, static_cast<off_t>(bytes)); e != 0) {
        // Reserved now: a full /dev/shm is an error here, not a SIGBUS later.
        decision = "-cannot reserve " + std::to_string(bytes >> 20) +
                   " MiB in /dev/shm: " + std::strerror(e);
        ::close(fd);
        fd = -1;
        ::shm_unlink(name.c_str());
      } else {
        decision = name;
        cleanup.name = name;
      }
    }
    store.set("shm/name", decision);
  } else {
    decision = store.get("shm/name");
  }
  if (decision.empty() || decision[0] == '-')
    return fail(decision.empty() ? "?" : decision.substr(1));

  // 2. Everyone maps it and says whether that worked; rank 0 unlinks the name
  // once all have it open (Cleanup, on return: the memory lives until the
  // last unmap, and no name outlives the rendezvous).
  std::string mine = "ok";
  if (rank != 0) {
    fd = ::shm_open(decision.c_str(), O_RDWR, 0600);
    if (fd < 0)
      mine = "shm_open(" + decision + ") on rank " +
             std::to_string(global_ranks[static_cast<size_t>(rank)]) + ": " + std::strerror(errno);
  }
  if (fd >= 0) {
    cleanup.base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (cleanup.base == MAP_FAILED)
      mine = "mmap on rank " + std::to_string(global_ranks[static_cast<size_t>(rank)]) + ": " +
             std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  store.set("shm/mapped/" + std::to_string(rank), mine);
  std::string failure;
  for (int r = 0; r < size; ++r) {
    std::string s = r == rank ? mine : store.get("shm/mapped/" + std::to_string(r));
    if (s != "ok" && failure.empty()) failure = s;
  }
  if (!failure.empty()) return fail(failure);

  std::unique_ptr<ShmAllReduce> s(new ShmAllReduce());
  s->rank_ = rank;
  s->size_ = size;
  s->global_ranks_ = std::move(global_ranks);
  s->timeout_ = timeout;
  s->base_ = std::exchange(cleanup.base, MAP_FAILED);
  s->bytes_ = bytes;
  s->control_ = static_cast<Control*>(s->base_);
  s->slots_ = static_cast<unsigned char*>(s->base_) + control_bytes;
  // The segment starts zeroed (sequence 0 everywhere); only the pid is ours.
  s->control_[rank].pid.store(static_cast<int32_t>(::getpid()), std::memory_order_release);
  return s;
}

ShmAllReduce::~ShmAllReduce() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

void ShmAllReduce::publish(bool consumed_phase, uint32_t value) {
  std::atomic<uint32_t>& word = consumed_phase ? control_[rank_].consumed : control_[rank_].posted;
  word.store(value, std::memory_order_release);
  futex_wake_all(&word);
}

// Until every rank's posted (or consumed) counter reached `target`. Spins a
// few microseconds first (a peer that is running will be there soon), then
// sleeps on the peer's futex word in 50 ms slices, checking the deadline and
// whether the peer still exists.
void ShmAllReduce::wait_all(const ShmCollective& what, uint32_t target, bool consumed_phase) {
  const auto deadline = Clock::now() + timeout_;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    Control& peer = control_[r];
    std::atomic<uint32_t>& word = consumed_phase ? peer.consumed : peer.posted;
    for (int spin = 0; spin < 256 && !reached(word.load(std::memory_order_acquire), target); ++spin)
      cpu_relax();
    for (;;) {
      const uint32_t v = word.load(std::memory_order_acquire);
      if (reached(v, target)) break;
      futex_wait(&word, v, std::chrono::milliseconds(50));
      if (reached(word.load(std::memory_order_acquire), target)) break;
      const int global = global_ranks_[static_cast<size_t>(r)];
      if (Clock::now() > deadline)
        throw std::runtime_error("timed out waiting for rank " + std::to_string(global) +
                                 " in the shared-memory " + what.name + " (it has not " +
                                 (consumed_phase ? what.consumed : "posted its data") + " yet)");
      const int32_t pid = peer.pid.load(std::memory_order_acquire);
      if (!process_alive(pid))
        throw std::runtime_error("rank " + std::to_string(global) + " (pid " + std::to_string(pid) +
                                 ") exited during the shared-memory " + what.name);
    }
  }
}

template <class Post, class Consume, class After>
void ShmAllReduce::run_pieces(const ShmCollective& what, uint64_t call_bytes, size_t pieces,
                              Post&& post, Consume&& consume, After&& after) {
  Control& mine = control_[rank_];
  for (size_t k = 0; k < pieces; ++k) {
    const uint32_t seq = ++sequence_;
    // Every rank consumed the previous piece (wait_all below): our slot may
    // be overwritten.
    post(k, slot(static_cast<size_t>(rank_)));
    mine.collective.store(what.id, std::memory_order_relaxed);
    mine.call_bytes.store(call_bytes, std::memory_order_relaxed);
    publish(false, seq);
    wait_all(what, seq, false);
    // Ranks in different collectives, or in one with different sizes, would
    // from here on combine pieces of different calls: an error instead
    // (checked on every piece: the sizes may share their first pieces).
    for (int r = 0; r < size_; ++r)
      if (control_[r].collective.load(std::memory_order_relaxed) != what.id ||
          control_[r].call_bytes.load(std::memory_order_relaxed) != call_bytes)
        throw_disagreement(what, call_bytes, r);
    consume(k);
    publish(true, seq);
    wait_all(what, seq, true);
    after(k);
  }
}

void ShmAllReduce::throw_disagreement(const ShmCollective& what, uint64_t call_bytes, int r) const {
  const uint32_t their_collective = control_[r].collective.load(std::memory_order_relaxed);
  const uint64_t their_bytes = control_[r].call_bytes.load(std::memory_order_relaxed);
  const std::string them = "rank " + std::to_string(global_ranks_[static_cast<size_t>(r)]);
  const std::string us = "rank " + std::to_string(global_ranks_[static_cast<size_t>(rank_)]);
  if (their_collective != what.id) {
    const char* their_name = "other collective";
    for (const ShmCollective* c : {&kAllReduce, &kReduceScatter, &kAllGather})
      if (c->id == their_collective) their_name = c->name;
    throw std::runtime_error(them + " runs the shared-memory " + their_name + " where " + us +
                             " runs the " + what.name +
                             " (every rank must run the same collectives in the same order)");
  }
  throw std::runtime_error(them + " " + what.verb + " " + std::to_string(their_bytes) +
                           " bytes where " + us + " " + what.verb + " " +
                           std::to_string(call_bytes) +
                           " (every rank must pass the same size and dtype)");
}

void ShmAllReduce::all_reduce(void* data, size_t count, size_t element_size, ReduceFn fn) {
  auto* bytes = static_cast<unsigned char*>(data);
  const size_t es = element_size;
  const size_t per_piece = kSlotBytes / es;
  const size_t n = static_cast<size_t>(size_);
  unsigned char* result = slot(n);
  auto piece_len = [&](size_t k) { return std::min(per_piece, count - k * per_piece); };
  run_pieces(
      kAllReduce, uint64_t{count} * es, (count + per_piece - 1) / per_piece,
      [&](size_t k, unsigned char* own) {
        std::memcpy(own, bytes + k * per_piece * es, piece_len(k) * es);
      },
      [&](size_t k) {
        // Our share: elements [lo, hi), reduced over the slots in rank order
        // (the same order whichever rank reduces it). 16-element shares keep
        // the vector loops aligned.
        const size_t len = piece_len(k);
        const size_t share = (len + n - 1) / n;
        const size_t aligned = (share + 15) / 16 * 16;
        const size_t lo = std::min(len, static_cast<size_t>(rank_) * aligned);
        const size_t hi = std::min(len, lo + aligned);
        if (hi > lo) reduce_over_slots(result + lo * es, lo * es, hi - lo, fn);
      },
      [&](size_t k) { std::memcpy(bytes + k * per_piece * es, result, piece_len(k) * es); });
}

// A piece holds the same stretch of every chunk, chunk c at c * stride in
// the slot (64-byte aligned for the vector loops).
void ShmAllReduce::reduce_scatter(const void* in, void* out, size_t count, size_t element_size,
                                  ReduceFn fn) {
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  const size_t es = element_size;
  const size_t n = static_cast<size_t>(size_);
  const size_t stride = kSlotBytes / n / 64 * 64;
  const size_t per_piece = stride / es;
  auto piece_len = [&](size_t k) { return std::min(per_piece, count - k * per_piece); };
  run_pieces(
      kReduceScatter, uint64_t{count} * n * es, (count + per_piece - 1) / per_piece,
      [&](size_t k, unsigned char* own) {
        for (size_t c = 0; c < n; ++c)
          std::memcpy(own + c * stride, src + (c * count + k * per_piece) * es, piece_len(k) * es);
      },
      [&](size_t k) {
        // Straight into `out`: when it is our chunk of `in`, this piece of it
        // is in our slot already and later pieces lie beyond it.
        reduce_over_slots(dst + k * per_piece * es, static_cast<size_t>(rank_) * stride,
                          piece_len(k), fn);
      },
      [](size_t) {});
}

void ShmAllReduce::all_gather(const void* in, void* out, size_t count, size_t element_size) {
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  const size_t es = element_size;
  const size_t per_piece = kSlotBytes / es;
  auto piece_len = [&](size_t k) { return std::min(per_piece, count - k * per_piece); };
  run_pieces(
      kAllGather, uint64_t{count} * es, (count + per_piece - 1) / per_piece,
      [&](size_t k, unsigned char* own) {
        std::memcpy(own, src + k * per_piece * es, piece_len(k) * es);
      },
      [&](size_t k) {
        for (size_t r = 0; r < static_cast<size_t>(size_); ++r) {
          unsigned char* to = dst + (r * count + k * per_piece) * es;
          // Our own part from `in` (cache-warm), nothing when it is `in`.
          const unsigned char* from =
              r == static_cast<size_t>(rank_) ? src + k * per_piece * es : slot(r);
          if (from != to) std::memcpy(to, from, piece_len(k) * es);
        }
      },
      [](size_t) {});
}

// out = fn over every rank's slot, at `offset` bytes into each, `count`
// elements: slot 0 (op) slot 1, then (op) slot 2, ... in rank order.
void ShmAllReduce::reduce_over_slots(unsigned char* out, size_t offset, size_t count,
                                     ReduceFn fn) const {
  fn(out, slot(0) + offset, slot(1) + offset, count);
  for (size_t r = 2; r < static_cast<size_t>(size_); ++r) fn(out, out, slot(r) + offset, count);
}

}  // namespace rh::comm::detail
