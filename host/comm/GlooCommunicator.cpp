// The gloo backend: CPU tensors over TCP, through the Gloo library itself
// (libgloo-dev), rendezvoused through the run's c10d store. all_reduce,
// reduce_scatter and all_gather go through shared memory instead when every
// member is on this host (ShmAllReduce.hpp); over TCP:
//
//   all_reduce      our ring over gloo's unbound buffers, in place
//                   (reduce-scatter + all-gather phases, 4 MiB segments,
//                   two in flight; ring_all_reduce says why not gloo's);
//                   up to 1 KiB over all ranks, one all-gather and the
//                   sum in rank order (small_all_reduce)
//   reduce_scatter  our ring over gloo's unbound buffers (below): every rank
//                   sends and receives (P-1)/P of the input once, half of
//                   what an all-reduce moves. Gloo's ReduceScatterHalvingDoubling
//                   is not used: it reduces in place into the input, runs the
//                   old bound-buffer API (new buffers and a handshake per
//                   call), needs extra steps off powers of two and has no
//                   bfloat16.
//   all_gather      gloo::allgather (ring)
//   broadcast       gloo::broadcast (binomial tree)
//   barrier         gloo::barrier
//
// Each communicator runs its collectives in issue order, one at a time, but
// for two all-reduces over TCP on different bytes, which may run together
// (GlooCommunicator::run); every wait inside gloo is bounded by the
// rendezvous timeout.
#include <arpa/inet.h>
#include <gloo/allgather.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>
#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>

#include "comm/Backends.hpp"
#include "comm/CommInternal.hpp"
#include "comm/Heartbeat.hpp"
#include "comm/Reduce.hpp"
#include "comm/ShmAllReduce.hpp"

namespace rh::comm::detail {
namespace {

using Millis = std::chrono::milliseconds;

// Segment of the pipelined rings (bytes), ours and gloo's all-reduce: big
// enough to amortise the per-message cost, small enough that reducing one
// segment overlaps the transfer of the next. Gloo's default is 1 MiB; 4 MiB
// was 10-15% faster for both on 2 ranks over loopback (rh_bench_comm), with
// 256 KiB .. 16 MiB tried.
constexpr size_t kSegmentBytes = size_t{4} << 20;
// Slot prefix of our reduce-scatter; gloo's own collectives use 0x01..0x08.
constexpr uint8_t kReduceScatterSlotPrefix = 0x21;
constexpr uint8_t kAllReduceSlotPrefix = 0x22;
// All-reduces whose every rank's buffers together are at most this size
// take one all-gather (small_all_reduce) instead of the ring.
constexpr size_t kSmallAllReduceBytes = size_t{1} << 10;

// gloo's rendezvous store over the run's c10d store, keys under `prefix`.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(StorePtr store, std::string prefix, Millis timeout)
      : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(prefix_ + key, std::vector<uint8_t>(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::vector<uint8_t> value = store_->get(prefix_ + key);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const Millis& timeout) override {
    std::vector<std::string> prefixed;
    prefixed.reserve(keys.size());
    for (const auto& k : keys) prefixed.push_back(prefix_ + k);
    store_->wait(prefixed, timeout);
  }

 private:
  StorePtr store_;
  std::string prefix_;
  Millis timeout_;
};

// The local address from which the master is reached (what a peer on the
// master's network can connect to); the host name when that fails.
std::string local_address_towards(const std::string& master_addr, int master_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  std::string port = std::to_string(master_port);
  if (getaddrinfo(master_addr.c_str(), port.c_str(), &hints, &found) == 0 && found != nullptr) {
    std::string result;
    for (addrinfo* ai = found; ai != nullptr && result.empty(); ai = ai->ai_next) {
      int fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
      if (fd < 0) continue;
      sockaddr_storage local{};
      socklen_t len = sizeof(local);
      if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
        char text[INET6_ADDRSTRLEN] = {0};
        const void* raw =
            local.ss_family == AF_INET
                ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&local)->sin_addr)
                : static_cast<const void*>(
                      &reinterpret_cast<const sockaddr_in6*>(&local)->sin6_addr);
        if (inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) result = text;
      }
      ::close(fd);
    }
    freeaddrinfo(found);
    if (!result.empty()) return result;
  }
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') return host;
  return "127.0.0.1";
}

std::shared_ptr<gloo::transport::Device> make_device(const RendezvousOptions& o) {
  gloo::transport::tcp::attr attr;
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname != nullptr && *ifname != '\0')
    attr.iface = ifname;
  else
    attr.hostname = local_address_towards(o.master_addr, o.master_port);
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw host::HostError(RH_ERROR_IO, "gloo: cannot listen on " +
                                           (attr.iface.empty() ? "address " + attr.hostname
                                                               : "interface " + attr.iface) +
                                           " on rank " + std::to_string(o.rank) + ": " + e.what() +
                                           " (set GLOO_SOCKET_IFNAME to pick one)");
  }
}

// "[file:line] message" -> "message".
std::string strip_location(const std::string& what) {
  if (!what.empty() && what[0] == '[') {
    size_t end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

bool mentions_timeout(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text.find("timed out") != std::string::npos || text.find("timeout") != std::string::npos;
}

size_t checked_bytes(const Buffer& b, size_t es, const char* what) {
  if (b.count > SIZE_MAX / es)
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, std::string(what) + ": count too large");
  if (b.count > 0 && b.data == nullptr)
    throw host::HostError(RH_ERROR_INVALID_ARGUMENT, std::string(what) + ": NULL data");
  return b.count * es;
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

// Ring reduce-scatter. `in` holds P chunks of `chunk` bytes; rank r ends with
// the reduction of every rank's chunk r in `out`. Step s = 0..P-2: send the
// partial sum of chunk (r-s-1) to rank r+1, receive the partial sum of chunk
// (r-s-2) from rank r-1 and add our own chunk to it. Step 0 sends straight
// from `in`; later steps send the partial sum of the previous step, which
// lives in `out` (the final step writes the result there). Every chunk is cut
// into segments, two in flight, so that reducing one segment overlaps the
// transfer of the next. Each rank sends and receives (P-1) chunks in all.
void ring_reduce_scatter(const std::shared_ptr<gloo::Context>& ctx, const uint8_t* in, uint8_t* out,
                         size_t chunk, size_t es, ReduceFn fn, Millis timeout) {
  const int P = ctx->size;
  const int r = ctx->rank;
  const int right = (r + 1) % P;
  const int left = (r + P - 1) % P;
  // >= 2 segments per chunk (one may be empty) so that a step's send of a
  // segment is issued after the previous step reduced it.
  const size_t seg_elems = std::max<size_t>(1, std::min(kSegmentBytes / es, (chunk / es + 1) / 2));
  const size_t seg = seg_elems * es;
  const size_t nseg = std::max<size_t>(2, (chunk + seg - 1) / seg);
  const size_t total = static_cast<size_t>(P - 1) * nseg;
  auto seg_len = [&](size_t j) -> size_t {
    size_t off = j * seg;
    return off >= chunk ? 0 : std::min(seg, chunk - off);
  };
  auto send_chunk = [&](size_t s) { return static_cast<size_t>((r + 2 * P - 1 - int(s)) % P); };
  auto recv_chunk = [&](size_t s) { return static_cast<size_t>((r + 2 * P - 2 - int(s)) % P); };

  std::unique_ptr<uint8_t[]> tmp(new uint8_t[2 * seg]);
  auto tmp_buf = ctx->createUnboundBuffer(tmp.get(), 2 * seg);
  auto in_buf = ctx->createUnboundBuffer(const_cast<uint8_t*>(in), chunk * static_cast<size_t>(P));
  auto out_buf = ctx->createUnboundBuffer(out, chunk);
  const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, 0);

  for (size_t i = 0; i < total + 2; ++i) {
    if (i >= 2) {  // complete operation i-2
      const size_t k = i - 2, s = k / nseg, j = k % nseg, len = seg_len(j);
      if (len > 0) {
        // The send read out[j] (s > 0): it must be gone before we overwrite it.
        (s == 0 ? in_buf : out_buf)->waitSend(timeout);
        tmp_buf->waitRecv(timeout);
        fn(out + j * seg, tmp.get() + (k & 1) * seg, in + recv_chunk(s) * chunk + j * seg,
           len / es);
      }
    }
    if (i < total) {  // issue operation i
      const size_t s = i / nseg, j = i % nseg, len = seg_len(j);
      if (len > 0) {
        tmp_buf->recv(left, slot, (i & 1) * seg, len);
        if (s == 0)
          in_buf->send(right, slot, send_chunk(0) * chunk + j * seg, len);
        else
          out_buf->send(right, slot, j * seg, len);
      }
    }
  }
}

// Ring all-reduce in place: `buf` holds `count` elements of `es` bytes, cut
// into P chunks (chunk k: elements [k*count/P, (k+1)*count/P)). The
// reduce-scatter phase, steps s = 0..P-2: send chunk (r-s) to rank r+1,
// receive chunk (r-s-1) from rank r-1 and reduce it into ours; rank r then
// holds the reduction of chunk r+1. The all-gather phase, steps s =
// 0..P-2: send chunk (r+1-s), receive chunk (r-s) into place. A chunk
// larger than a segment is cut into segments, two in flight. Gloo's own
// ring all-reduce (gloo::allreduce) took 3.8 ms for 1 MiB on 2 ranks over
// loopback where our reduce-scatter and gloo's all-gather took 0.5 ms
// together (rh_bench_comm): its per-segment handshakes cost more than the
// data.
void ring_all_reduce(const std::shared_ptr<gloo::Context>& ctx, uint8_t* buf, size_t count,
                     size_t es, ReduceFn fn, Millis timeout, uint32_t tag) {
  const int P = ctx->size;
  const int r = ctx->rank;
  const int right = (r + 1) % P;
  const int left = (r + P - 1) % P;
  auto begin = [&](size_t k) { return count * k / static_cast<size_t>(P); };
  auto chunk = [&](int k) { return static_cast<size_t>(((k % P) + P) % P); };
  const size_t max_chunk = (count + static_cast<size_t>(P) - 1) / static_cast<size_t>(P);
  // A chunk of up to kSegmentBytes is one message; a larger one is cut into
  // segments of that size, two in flight (`depth`), so that reducing one
  // overlaps the transfer of the next. A step's send of a segment must come
  // after the previous step finished it: with two in flight that needs two
  // segments or more per chunk (one may be empty). Fewer, larger messages
  // won where every message costs thread hand-offs: ddp's step (4 + 1 MB
  // buckets) across 2 simulated hosts sharing 2 cores went from 16.4 to
  // 15.8 ms with 2 MB chunks sent whole instead of in halves (all 5.3 MB in
  // one bucket: 14.0 to 13.4 ms).
  size_t seg = std::max<size_t>(1, std::min(kSegmentBytes / es, max_chunk));
  if (seg < max_chunk) seg = std::min(seg, (max_chunk + 1) / 2);
  const size_t nseg = std::max<size_t>(1, (max_chunk + seg - 1) / seg);
  const size_t depth = nseg >= 2 ? 2 : 1;
  const size_t total = static_cast<size_t>(P - 1) * nseg;
  // Segment j of chunk k: its first element and length (0: past the end).
  auto seg_at = [&](size_t k, size_t j) -> std::pair<size_t, size_t> {
    const size_t b = begin(k), e = begin(k + 1), off = b + j * seg;
    return {off, off >= e ? 0 : std::min(seg, e - off)};
  };
  std::unique_ptr<uint8_t[]> tmp(new uint8_t[2 * seg * es]);
  auto tmp_buf = ctx->createUnboundBuffer(tmp.get(), 2 * seg * es);
  auto all = ctx->createUnboundBuffer(buf, count * es);
  // Two slots of this collective's own (`tag`): another all-reduce may be
  // in flight beside it (GlooCommunicator::run).
  const uint64_t slot = gloo::Slot::build(kAllReduceSlotPrefix, 2 * tag);
  const uint64_t gather_slot = gloo::Slot::build(kAllReduceSlotPrefix, 2 * tag + 1);

  // Reduce-scatter.
  for (size_t i = 0; i < total + depth; ++i) {
    if (i >= depth) {  // complete operation i-depth
      const size_t k = i - depth, s = k / nseg, j = k % nseg;
      // Chunks differ by an element at most: a segment may be empty in one
      // and not in the other, so the send and the receive are waited apart.
      if (seg_at(chunk(r - static_cast<int>(s)), j).second > 0) all->waitSend(timeout);
      const auto [off, len] = seg_at(chunk(r - static_cast<int>(s) - 1), j);
      if (len > 0) {
        tmp_buf->waitRecv(timeout);
        fn(buf + off * es, tmp.get() + (k & 1) * seg * es, buf + off * es, len);
      }
    }
    if (i < total) {  // issue operation i
      const size_t s = i / nseg, j = i % nseg;
      const auto [roff, rlen] = seg_at(chunk(r - static_cast<int>(s) - 1), j);
      const auto [soff, slen] = seg_at(chunk(r - static_cast<int>(s)), j);
      if (rlen > 0) tmp_buf->recv(left, slot, (i & 1) * seg * es, rlen * es);
      if (slen > 0) all->send(right, slot, soff * es, slen * es);
    }
  }
  // All-gather: every segment received lands in place, and is sent on.
  for (size_t i = 0; i < total + depth; ++i) {
    if (i >= depth) {
      const size_t k = i - depth, s = k / nseg, j = k % nseg;
      if (seg_at(chunk(r + 1 - static_cast<int>(s)), j).second > 0) all->waitSend(timeout);
      if (seg_at(chunk(r - static_cast<int>(s)), j).second > 0) all->waitRecv(timeout);
    }
    if (i < total) {
      const size_t s = i / nseg, j = i % nseg;
      const auto [roff, rlen] = seg_at(chunk(r - static_cast<int>(s)), j);
      const auto [soff, slen] = seg_at(chunk(r + 1 - static_cast<int>(s)), j);
      if (rlen > 0) all->recv(left, gather_slot, roff * es, rlen * es);
      if (slen > 0) all->send(right, gather_slot, soff * es, slen * es);
    }
  }
}

// A small all-reduce (the loop's loss mean every step, a grad norm, a
// flag): every rank's buffer to every rank in one all-gather, then the
// reduction in rank order. One exchange where the ring needs 2(P-1) round
// trips of almost nothing: on 2 ranks across hosts the loss mean went from
// ~1 ms per step to ~0.1 ms.
void small_all_reduce(const std::shared_ptr<gloo::Context>& ctx, uint8_t* buf, size_t count,
                      size_t es, ReduceFn fn, Millis timeout, uint32_t tag) {
  const size_t bytes = count * es;
  const size_t P = static_cast<size_t>(ctx->size);
  std::vector<uint8_t> all(bytes * P);
  gloo::AllgatherOptions opts(ctx);
  opts.setInput(buf, bytes);
  opts.setOutput(all.data(), all.size());
  opts.setTimeout(timeout);
  opts.setTag(tag);
  gloo::allgather(opts);
  std::memcpy(buf, all.data(), bytes);
  for (size_t k = 1; k < P; ++k) fn(buf, buf, all.data() + k * bytes, count);
}

// What the world and its groups share.
struct Shared {
  StorePtr store;
  std::shared_ptr<gloo::transport::Device> device;
  Millis timeout;
  double timeout_s;
  int global_rank;
  std::string rendezvous_at;  // "host:port" of the store, for messages
  bool shared_memory = true;  // RendezvousOptions::shared_memory
  // Every rank's pulse (Heartbeat.hpp): a failure that names no rank asks it
  // which ranks stopped, and on which host. Null in a world of one.
  std::shared_ptr<Heartbeat> heartbeat;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<Shared> shared, std::string prefix, std::vector<int> members,
                   int rank, int size, bool is_world)
      : shared_(std::move(shared)),
        prefix_(std::move(prefix)),
        members_(std::move(members)),
        rank_(rank),
        size_(size) {
    who_.global_rank = shared_->global_rank;
    if (!is_world) who_.group_ranks = members_;
    if (size_ > 1) connect();
    // A second thread only where two collectives may overlap (over TCP).
    const size_t threads = size_ > 1 && !shm_ ? kMaxInFlight : 1;
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
  }

  ~GlooCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string all_reduce_transport() const override { return shm_ ? "shared memory" : "tcp ring"; }

  std::shared_ptr<Work> all_reduce(Buffer b, ReduceOp op, bool async) override {
    const char* what = "all_reduce";
    check_cpu(b, what);
    const size_t es = element_size(b.dtype, what);
    checked_bytes(b, es, what);
    ReduceFn fn = reduce_function(b.dtype, op, what);
    if (b.count == 0 || size_ == 1) return submit(what, nullptr, async);
    // Over TCP two all-reduces may be in flight at once (run()): a bucket's
    // ring need not wait for the one before it to end.
    Range range;
    if (!shm_) range = {static_cast<const uint8_t*>(b.data), b.count * es};
    return submit_tagged(
        what,
        [this, b, es, fn, op](uint32_t tag) {
          // avg divides each rank's values first, then sums: how ddp averages
          // (gradients pre-divided by the world size, then summed), so a
          // strategy averaging with RH_REDUCE_AVG rounds as ddp does.
          if (op == ReduceOp::Avg) divide_in_place(b.data, b.count, b.dtype, size_);
          if (shm_) {
            shm_->all_reduce(b.data, b.count, es, fn);
          } else {
            const size_t bytes = b.count * es;
            if (bytes * static_cast<size_t>(size_) <= kSmallAllReduceBytes)
              small_all_reduce(context_, static_cast<uint8_t*>(b.data), b.count, es, fn,
                               shared_->timeout, tag);
            else
              ring_all_reduce(context_, static_cast<uint8_t*>(b.data), b.count, es, fn,
                              shared_->timeout, tag);
          }
        },
        range, async);
  }

  std::shared_ptr<Work> all_gather(Buffer in, Buffer out, bool async) override {
    const char* what = "all_gather";
    check_cpu(in, what);
    check_cpu(out, what);
    check_same_dtype(in, out, what);
    const size_t es = element_size(in.dtype, what);
    const size_t in_bytes = checked_bytes(in, es, what);
    const size_t out_bytes = checked_bytes(out, es, what);
    if (in.count > SIZE_MAX / static_cast<size_t>(size_) ||
        out.count != in.count * static_cast<size_t>(size_))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) + ": output has " + std::to_string(out.count) +
                                " elements, expected " + std::to_string(size_) + " x " +
                                std::to_string(in.count) + " (size() x input)");
    auto* own_slot = static_cast<uint8_t*>(out.data) + static_cast<size_t>(rank_) * in_bytes;
    const bool in_place = in.data == own_slot;
    if (!in_place && overlaps(in.data, in_bytes, out.data, out_bytes))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) +
                                ": input overlaps the output (only input == this rank's slot "
                                "of the output is allowed)");
    if (in.count == 0) return submit(what, nullptr, async);
    if (size_ == 1)
      return submit(
          what, [=] { std::memmove(out.data, in.data, in_bytes); }, async);
    return submit(
        what,
        [this, in, out, in_bytes, out_bytes, es, in_place] {
          if (shm_) {
            shm_->all_gather(in.data, out.data, in.count, es);
            return;
          }
          gloo::AllgatherOptions opts(context_);
          if (!in_place) opts.setInput(static_cast<uint8_t*>(in.data), in_bytes);
          opts.setOutput(static_cast<uint8_t*>(out.data), out_bytes);
          opts.setTimeout(shared_->timeout);
          gloo::allgather(opts);
        },
        async);
  }

  std::shared_ptr<Work> reduce_scatter(Buffer in, Buffer out, ReduceOp op, bool async) override {
    const char* what = "reduce_scatter";
    check_cpu(in, what);
    check_cpu(out, what);
    check_same_dtype(in, out, what);
    const size_t es = element_size(in.dtype, what);
    const size_t in_bytes = checked_bytes(in, es, what);
    const size_t out_bytes = checked_bytes(out, es, what);
    if (out.count > SIZE_MAX / static_cast<size_t>(size_) ||
        in.count != out.count * static_cast<size_t>(size_))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) + ": input has " + std::to_string(in.count) +
                                " elements, expected " + std::to_string(size_) + " x " +
                                std::to_string(out.count) + " (size() x output)");
    ReduceFn fn = reduce_function(in.dtype, op, what);
    if (out.count == 0) return submit(what, nullptr, async);
    const bool overlap = overlaps(in.data, in_bytes, out.data, out_bytes);
    if (size_ == 1)
      return submit(
          what, [=] { std::memmove(out.data, in.data, out_bytes); }, async);
    return submit(
        what,
        [this, in, out, in_bytes, out_bytes, es, fn, op, overlap] {
          const auto* src = static_cast<const uint8_t*>(in.data);
          // The ring accumulates in `out`, so it needs a copy of an input that
          // `out` overlaps; shared memory writes each piece of `out` after it
          // copied that piece in, which is enough when `out` is our chunk.
          const bool own_chunk = src + static_cast<size_t>(rank_) * out_bytes == out.data;
          // avg: the input divided first (a copy: the input is const), as
          // all_reduce does.
          std::unique_ptr<uint8_t[]> copy;
          if (op == ReduceOp::Avg || (overlap && !(shm_ && own_chunk))) {
            copy.reset(new uint8_t[in_bytes]);
            std::memcpy(copy.get(), src, in_bytes);
            if (op == ReduceOp::Avg) divide_in_place(copy.get(), in.count, in.dtype, size_);
            src = copy.get();
          }
          if (shm_)
            shm_->reduce_scatter(src, out.data, out.count, es, fn);
          else
            ring_reduce_scatter(context_, src, static_cast<uint8_t*>(out.data), out_bytes, es, fn,
                                shared_->timeout);
        },
        async);
  }

  std::shared_ptr<Work> broadcast(Buffer b, int root, bool async) override {
    const char* what = "broadcast";
    check_cpu(b, what);
    const size_t es = element_size(b.dtype, what);
    const size_t bytes = checked_bytes(b, es, what);
    if (root < 0 || root >= size_)
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) + ": root " + std::to_string(root) +
                                " is not in [0, " + std::to_string(size_) + ")");
    if (b.count == 0 || size_ == 1) return submit(what, nullptr, async);
    return submit(
        what,
        [this, b, bytes, root] {
          gloo::BroadcastOptions opts(context_);
          opts.setOutput(static_cast<uint8_t*>(b.data), bytes);
          opts.setRoot(root);
          opts.setTimeout(shared_->timeout);
          gloo::broadcast(opts);
        },
        async);
  }

  void barrier() override {
    submit(
        "barrier",
        [this] {
          if (size_ == 1) return;
          gloo::BarrierOptions opts(context_);
          opts.setTimeout(shared_->timeout);
          gloo::barrier(opts);
        },
        false);
  }

  std::unique_ptr<Communicator> new_group(const std::vector<int>& ranks) override {
    check_group_ranks(ranks, size_);
    const int n = groups_made_.fetch_add(1);
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    if (it == ranks.end()) return nullptr;
    std::vector<int> members;
    members.reserve(ranks.size());
    for (int r : ranks) members.push_back(members_[static_cast<size_t>(r)]);
    return std::make_unique<GlooCommunicator>(
        shared_, prefix_ + "/g" + std::to_string(n), std::move(members),
        static_cast<int>(it - ranks.begin()), static_cast<int>(ranks.size()), false);
  }

 private:
  // The bytes an overlappable collective works on; data == nullptr: the
  // collective runs alone.
  struct Range {
    const uint8_t* data = nullptr;
    size_t bytes = 0;
  };
  struct Task {
    const char* name;
    std::string step;
    std::function<void(uint32_t)> fn;  // gets the tag; empty: nothing to exchange
    std::shared_ptr<PromiseWork> work;
    uint32_t tag = 0;  // the issue count: the same collective has the same on every rank
    Range range;
  };
  // Under mutex_: whether `t` may start now. Alone when nothing runs; an
  // overlappable one beside one other overlappable one whose bytes it does
  // not share.
  bool can_start(const Task& t) const {
    if (running_.empty()) return true;
    if (t.range.data == nullptr || running_.size() >= kMaxInFlight) return false;
    for (const auto& [tag, r] : running_)
      if (r.data == nullptr || overlaps(r.data, r.bytes, t.range.data, t.range.bytes)) return false;
    return true;
  }

  void connect() {
    auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    context->setTimeout(shared_->timeout);
    GlooStore store(shared_->store, prefix_ + "/", shared_->timeout);
    try {
      context->connectFullMesh(store, shared_->device);
      // Its rendezvous goes through the same store: failures read the same.
      if (shared_->shared_memory) connect_shared_memory(store);
    } catch (const std::exception& e) {
      const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
      std::string detail =
          strip_location(c10_error ? c10_error->what_without_backtrace() : e.what());
      bool timed_out = mentions_timeout(detail);
      std::string text;
      if (who_.group_ranks.empty())
        text = "rendezvous at " + shared_->rendezvous_at +
               (timed_out ? " timed out after " + format_seconds(shared_->timeout_s) + " s"
                          : " failed") +
               " on rank " + std::to_string(who_.global_rank) + " of " + std::to_string(size_) +
               (timed_out ? " (did all " + std::to_string(size_) +
                                " ranks start, with the same MASTER_ADDR and MASTER_PORT?)"
                          : ": " + detail);
      else
        text =
            who_.describe("new_group") +
            (timed_out ? " timed out after " + format_seconds(shared_->timeout_s) + " s"
                       : " failed") +
            " on " + who_.where() +
            (timed_out ? " (did every rank call new_group with the same ranks?)" : ": " + detail);
      throw host::HostError(timed_out ? RH_ERROR_TIMEOUT : RH_ERROR_IO, text);
    }
    context_ = std::move(context);
  }

  // Collective like connect(): every member learns the same answer.
  void connect_shared_memory(GlooStore& store) {
    ShmRendezvous kv{[&](const std::string& key, const std::string& value) {
                       store.set(key, std::vector<char>(value.begin(), value.end()));
                     },
                     [&](const std::string& key) {
                       std::vector<char> v = store.get(key);
                       return std::string(v.begin(), v.end());
                     }};
    std::string why_not;
    shm_ = ShmAllReduce::connect(kv, rank_, size_, members_, ShmAllReduce::host_identity(),
                                 shared_->timeout, &why_not);
    // Which transport this communicator (the world, or a strategy's group)
    // uses, once, by its first rank: shared memory inside a host, TCP when a
    // member is on another.
    if (rank_ == 0) {
      if (shm_)
        spdlog::info(
            "{}: all_reduce, reduce_scatter and all_gather through shared memory ({} "
            "ranks on this host)",
            who_.describe("communicator"), size_);
      else
        spdlog::info("{}: all_reduce, reduce_scatter and all_gather over TCP ({})",
                     who_.describe("communicator"), why_not);
    }
  }

  void check_cpu(const Buffer& b, const char* what) const {
    if (b.device.device_type != kDLCPU && b.device.device_type != kDLCUDAHost)
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT,
                            std::string(what) + ": the gloo communicator takes CPU tensors, got " +
                                device_name(b.device) + " (use dist.backend 'nccl' for CUDA)");
  }
  static void check_same_dtype(const Buffer& a, const Buffer& b, const char* what) {
    if (!same_dtype(a.dtype, b.dtype))
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT, std::string(what) + ": input is " +
                                                           dtype_name(a.dtype) + ", output is " +
                                                           dtype_name(b.dtype));
  }

  std::shared_ptr<Work> submit(const char* name, std::function<void()> fn, bool async) {
    std::function<void(uint32_t)> tagged;
    if (fn) tagged = [fn = std::move(fn)](uint32_t) { fn(); };
    return submit_tagged(name, std::move(tagged), Range{}, async);
  }

  // `range`: the bytes of a collective that may run beside another one
  // (can_start); {} for one that runs alone.
  std::shared_ptr<Work> submit_tagged(const char* name, std::function<void(uint32_t)> fn,
                                      Range range, bool async) {
    auto work = std::make_shared<PromiseWork>();
    std::string step = step_description();  // the caller's function: not under our lock
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const uint32_t tag = next_tag_++;
      if (!failure_.empty()) {
        work->set_done(std::make_exception_ptr(cancelled_error(who_, name, step, failure_)));
      } else {
        queue_.push_back(Task{name, std::move(step), std::move(fn), work, tag, range});
      }
    }
    cv_.notify_all();
    if (!async) work->wait();
    return work;
  }

  // Each of the threads: the collectives in issue order, one at a time, but
  // for two TCP all-reduces on different bytes, which may run together
  // (can_start), each on its own slots. PyTorch's ProcessGroupGloo runs two
  // at once likewise; on 2 simulated hosts sharing 2 cores, ddp's 1 MB
  // bucket waiting for the 4 MB one before it cost ~2.5 ms a step.
  void run() {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] {
          return (stop_ && queue_.empty()) || (!queue_.empty() && can_start(queue_.front()));
        });
        if (queue_.empty()) return;  // stopping, nothing left
        task = std::move(queue_.front());
        queue_.pop_front();
        running_.emplace_back(task.tag, task.range);
      }
      // Done before it leaves running_: a collective that waited for it to
      // end starts after its Work reads as completed (issue order, seen
      // from the caller).
      task.work->set_done(run_task(task));
      {
        std::lock_guard<std::mutex> lock(mutex_);
        running_.erase(std::find_if(running_.begin(), running_.end(),
                                    [&](const auto& r) { return r.first == task.tag; }));
      }
      cv_.notify_all();
    }
  }

  // Runs one collective; its error, converted, or null.
  std::exception_ptr run_task(Task& task) {
    std::exception_ptr error;
    {
      std::string failure;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        failure = failure_;
      }
      if (!failure.empty()) {
        error = std::make_exception_ptr(cancelled_error(who_, task.name, task.step, failure));
      } else if (task.fn) {
        try {
          task.fn(task.tag);
        } catch (const host::HostError& e) {
          error = std::current_exception();
          failure = e.what();
        } catch (const std::exception& e) {
          std::string detail = strip_location(e.what());
          // Gloo's TCP timeouts name no peer ("Timed out waiting 3000ms for
          // send operation to complete"); with two members the peer can only
          // be the other one. (Shared memory names the rank it waited for.)
          if (size_ == 2 && mentions_timeout(detail) && detail.find("rank ") == std::string::npos)
            detail += " (waiting for rank " +
                      std::to_string(members_[static_cast<size_t>(1 - rank_)]) +
                      ", the other member)";
          // A failure that names no peer (gloo over TCP: "Connection closed
          // by peer", a timeout on more than 2 members): which ranks stopped
          // beating, and where.
          if (shared_->heartbeat && detail.find("rank ") == std::string::npos) {
            const std::string lost = shared_->heartbeat->explain_loss();
            if (!lost.empty()) detail += "; " + lost;
          }
          auto converted = collective_error(who_, task.name, mentions_timeout(detail),
                                            shared_->timeout_s, task.step, detail);
          failure = converted.what();
          error = std::make_exception_ptr(converted);
        }
        if (error) {
          std::lock_guard<std::mutex> lock(mutex_);
          if (failure_.empty()) failure_ = failure;
        }
      }
    }
    return error;
  }

  std::shared_ptr<Shared> shared_;
  std::string prefix_;
  std::vector<int> members_;  // global rank of each rank of this communicator
  int rank_;
  int size_;
  Identity who_;
  std::shared_ptr<gloo::Context> context_;  // null when size_ == 1
  std::unique_ptr<ShmAllReduce> shm_;       // null: all_reduce, reduce_scatter, all_gather over TCP
  std::atomic<int> groups_made_{0};

  // At most this many collectives at once (two TCP all-reduces; can_start).
  static constexpr size_t kMaxInFlight = 2;
  std::mutex mutex_;  // guards queue_, running_, next_tag_, stop_, failure_
  std::condition_variable cv_;
  std::deque<Task> queue_;
  std::vector<std::pair<uint32_t, Range>> running_;  // tag and bytes of each running collective
  uint32_t next_tag_ = 0;
  bool stop_ = false;
  std::string failure_;  // first failure: later collectives are cancelled
  std::vector<std::thread> threads_;
};

}  // namespace

std::unique_ptr<Communicator> create_gloo_world(StorePtr store, const RendezvousOptions& o) {
  auto shared = std::make_shared<Shared>();
  shared->store = std::move(store);
  shared->timeout = Millis(static_cast<int64_t>(o.timeout_s * 1000.0));
  shared->timeout_s = o.timeout_s;
  shared->global_rank = o.rank;
  shared->rendezvous_at = o.master_addr + ":" + std::to_string(o.master_port);
  shared->shared_memory = o.shared_memory;
  if (o.world_size > 1) shared->device = make_device(o);
  if (o.world_size > 1) shared->heartbeat = std::make_shared<Heartbeat>(o);
  std::vector<int> members(static_cast<size_t>(o.world_size));
  for (int i = 0; i < o.world_size; ++i) members[static_cast<size_t>(i)] = i;
  return std::make_unique<GlooCommunicator>(std::move(shared), "rh/gloo", std::move(members),
                                            o.rank, o.world_size, true);
}

}  // namespace rh::comm::detail
