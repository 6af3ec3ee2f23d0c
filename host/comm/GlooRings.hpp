// The gloo backend's own collectives over gloo's unbound buffers
// (GlooCommunicator.cpp says which collective takes which): a pipelined
// ring reduce-scatter, a ring all-reduce, and a small all-reduce through one
// all-gather.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "comm/Reduce.hpp"

namespace rh::comm::detail {

// Segment of the pipelined rings (bytes), ours and gloo's all-reduce: big
// enough to amortise the per-message cost, small enough that reducing one
// segment overlaps the transfer of the next. Gloo's default is 1 MiB; 4 MiB
// was 10-15% faster for both on 2 ranks over loopback (rh_bench_comm), with
// 256 KiB .. 16 MiB tried.
inline constexpr size_t kSegmentBytes = size_t{4} << 20;
// Slot prefix of our reduce-scatter; gloo's own collectives use 0x01..0x08.
inline constexpr uint8_t kReduceScatterSlotPrefix = 0x21;
inline constexpr uint8_t kAllReduceSlotPrefix = 0x22;
// All-reduces whose every rank's buffers together are at most this size
// take one all-gather (small_all_reduce) instead of the ring.
inline constexpr size_t kSmallAllReduceBytes = size_t{1} << 10;

// Ring reduce-scatter. `in` holds P chunks of `chunk` bytes; rank r ends with
// the reduction of every rank's chunk r in `out`. Step s = 0..P-2: send the
// partial sum of chunk (r-s-1) to rank r+1, receive the partial sum of chunk
// (r-s-2) from rank r-1 and add our own chunk to it. Step 0 sends straight
// from `in`; later steps send the partial sum of the previous step, which
// lives in `out` (the final step writes the result there). Every chunk is cut
// into segments, two in flight, so that reducing one segment overlaps the
// transfer of the next. Each rank sends and receives (P-1) chunks in all.
void ring_reduce_scatter(const std::shared_ptr<gloo::Context>& ctx, const uint8_t* in, uint8_t* out,
                         size_t chunk, size_t es, ReduceFn fn, std::chrono::milliseconds timeout);

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
                     size_t es, ReduceFn fn, std::chrono::milliseconds timeout, uint32_t tag);

// A small all-reduce (the loop's loss mean every step, a grad norm, a
// flag): every rank's buffer to every rank in one all-gather, then the
// reduction in rank order. One exchange where the ring needs 2(P-1) round
// trips of almost nothing: on 2 ranks across hosts the loss mean went from
// ~1 ms per step to ~0.1 ms.
void small_all_reduce(const std::shared_ptr<gloo::Context>& ctx, uint8_t* buf, size_t count,
                      size_t es, ReduceFn fn, std::chrono::milliseconds timeout, uint32_t tag);

}  // namespace rh::comm::detail
