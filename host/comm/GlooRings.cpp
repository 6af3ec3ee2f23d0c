#include "comm/GlooRings.hpp"

#include <gloo/allgather.h>
#include <gloo/common/error.h>
#include <gloo/types.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <vector>

#include "abi/HostError.hpp"

namespace rh::comm::detail {

using Millis = std::chrono::milliseconds;

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

}  // namespace rh::comm::detail
