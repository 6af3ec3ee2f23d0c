// What the sharding strategies (zero, fsdp) keep per *block*: the set of
// parameters that one all-gather makes whole and one reduce-scatter
// reduces (a zero group, an fsdp unit). The layout inside a block is the
// strategy's (ShardLayouts.hpp); the state and the two pipelines around
// it are the same:
//   master, grad   this rank's part, float32: what the optimizer updates
//                  and reads.
//   gather         the all-gather in flight that makes the block whole:
//                  what it sends, the pooled buffer it gathers into.
//   reduce         the gradient reduction in flight: the pooled flat
//                  buffer the full gradients were copied into, and where
//                  this rank's reduced part lands.
// Buffers come from BufferPools (CommBuffers.hpp) and go back as soon as
// their collective is done; collectives go through Collectives.hpp.
// Header-only; plugins only (ATen).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>

#include "Collectives.hpp"
#include "CommBuffers.hpp"

namespace rh::sharding {

struct GatherSlot {
  at::Tensor send;  // this rank's part in the gathered dtype
  at::Tensor out;   // [group size x part]: a view of buf
  at::Tensor buf;   // from the gather pool
  InFlight f;

  bool issued() const { return f.work != nullptr; }

  // Issues the all-gather of `part` over `comm` into `out_numel` elements
  // of a pooled buffer.
  void start(Collectives& c, BufferPool& pool, rh_Comm* comm, at::Tensor part, int64_t out_numel) {
    send = std::move(part);
    buf = pool.take();
    out = buf.narrow(0, 0, out_numel);
    c.all_gather(comm, send, out, f);
  }
  // Waits for it: the gathered values are `out` until release().
  const at::Tensor& finish(Collectives& c) {
    c.wait(f);
    return out;
  }
  void release(BufferPool& pool) {
    send = out = at::Tensor();
    pool.give(std::move(buf));
    buf = at::Tensor();
  }
};

struct ReduceSlot {
  at::Tensor flat;  // [group size x part]: the full gradients to reduce (a view of buf)
  at::Tensor buf;   // from the gradient pool
  at::Tensor out;   // where the reduced part lands when it is not `grad` itself
  InFlight f;

  bool taken() const { return flat.defined(); }

  at::Tensor& take(BufferPool& pool, int64_t numel) {
    buf = pool.take();
    flat = buf.narrow(0, 0, numel);
    return flat;
  }
  void release(BufferPool& pool) {
    flat = out = at::Tensor();
    pool.give(std::move(buf));
    buf = at::Tensor();
  }
};

struct ShardState {
  at::Tensor master;  // [part] float32: this rank's values
  at::Tensor grad;    // [part] float32: their reduced gradient
  GatherSlot gather;
  ReduceSlot reduce;
};

}  // namespace rh::sharding
