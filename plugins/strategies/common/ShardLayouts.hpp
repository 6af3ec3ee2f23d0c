// The two ways the sharding strategies lay a block's parameters over the
// ranks of its group (S ranks, each holding `part` elements of the block),
// as policies with one interface: a Member type (one parameter's place),
// master_from (this rank's part from whole values), scatter (the gathered
// [S x part] into whole parameters) and one_rank_view (S = 1: a parameter
// as a view of the master).
//   FlatChunks  zero (DeepSpeed): the members one after the other in one
//               flat vector, zero-padded to S x part; rank r holds elements
//               [r part, (r + 1) part). A parameter may straddle ranks.
//   RowBlocks   fsdp (FSDP2): every member sharded along dim 0; rank r holds
//               rows [r c, (r + 1) c) of each (c = ceil(rows / S), the last
//               ones zero-padded), the members' rows one after the other in
//               its part (its *block*).
// Header-only; plugins only (ATen).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard (not in ATen.h on 2.x)

#include <algorithm>
#include <cstdint>
#include <vector>

namespace rh::sharding {

struct FlatChunks {
  struct Member {
    size_t param = 0;
    int64_t offset = 0;  // first element in the block's flat vector
    int64_t numel = 0;
    std::vector<int64_t> shape;
  };

  // master [part] = elements [index part, (index + 1) part) of the flat
  // vector (`value(m)`: the member's values, flat, float32).
  template <class Value>
  static void master_from(at::Tensor& master, const std::vector<Member>& members, int64_t index,
                          int64_t part, Value value) {
    at::NoGradGuard no_grad;
    const int64_t lo = index * part, hi = lo + part;
    master.zero_();
    for (const Member& m : members) {
      const int64_t a = std::max(lo, m.offset), b = std::min(hi, m.offset + m.numel);
      if (a >= b) continue;
      master.narrow(0, a - lo, b - a).copy_(value(m).narrow(0, a - m.offset, b - a));
    }
  }

  // The gathered flat vector into the parameters (`param(i)`: parameter i's tensor).
  template <class Param>
  static void scatter(const std::vector<Member>& members, const at::Tensor& gathered, int64_t,
                      int64_t, Param param) {
    at::NoGradGuard no_grad;
    for (const Member& m : members)
      param(m.param).view({-1}).copy_(gathered.narrow(0, m.offset, m.numel));
  }

  static at::Tensor one_rank_view(const at::Tensor& master, const Member& m) {
    return master.narrow(0, m.offset, m.numel).view(m.shape);
  }
};

struct RowBlocks {
  struct Member {
    size_t param = 0;
    int32_t slot = -1;  // the host's unit for it (UnitParams): its model unit, -1 tied or none
    std::vector<int64_t> shape;
    int64_t numel = 0;
    int64_t row = 1;     // elements of one dim-0 row
    int64_t len = 0;     // elements of each rank block that are this member's (rows per rank x row)
    int64_t offset = 0;  // where they start in a rank block
    bool taken = false;  // one rank, float32: its gradient is in `grad` for this backward
    // Elements of the whole parameter that shard `i` holds (the rest of its
    // `len` is padding).
    int64_t valid(int64_t i) const { return std::clamp<int64_t>(numel - i * len, 0, len); }
  };

  // master [part] = block `index` (`whole(m)`: the member's values, any
  // shape and dtype).
  template <class Whole>
  static void master_from(at::Tensor& master, const std::vector<Member>& members, int64_t index,
                          int64_t, Whole whole) {
    at::NoGradGuard no_grad;
    master.zero_();
    for (const Member& m : members) {
      const int64_t v = m.valid(index);
      if (v > 0)
        master.narrow(0, m.offset, v).copy_(whole(m).reshape({-1}).narrow(0, index * m.len, v));
    }
  }

  // The gathered blocks [S x part] into the parameters.
  template <class Param>
  static void scatter(const std::vector<Member>& members, const at::Tensor& gathered,
                      int64_t shards, int64_t part, Param param) {
    at::NoGradGuard no_grad;
    const at::Tensor blocks = gathered.view({shards, part});
    for (const Member& m : members) {
      at::Tensor p = param(m.param).view({-1});
      for (int64_t r = 0; r < shards; ++r) {
        const int64_t v = m.valid(r);
        if (v == 0) break;
        p.narrow(0, r * m.len, v).copy_(blocks[r].narrow(0, m.offset, v));
      }
    }
  }

  // The inverse: the parameters' whole values as blocks [S x part], padding
  // zeroed; only the members `keep(m)` accepts (the rest of `flat` untouched).
  template <class Param, class Keep>
  static void blocks_from(const std::vector<Member>& members, const at::Tensor& flat,
                          int64_t shards, int64_t part, Param param, Keep keep) {
    at::NoGradGuard no_grad;
    const at::Tensor blocks = flat.view({shards, part});
    for (const Member& m : members) {
      if (!keep(m)) continue;
      at::Tensor p = param(m.param).view({-1});
      for (int64_t r = 0; r < shards; ++r) {
        const int64_t v = m.valid(r);
        at::Tensor dst = blocks[r].narrow(0, m.offset, m.len);
        if (v > 0) dst.narrow(0, 0, v).copy_(p.narrow(0, r * m.len, v));
        if (v < m.len) dst.narrow(0, v, m.len - v).zero_();
      }
    }
  }

  // One rank: len = numel, offset is where the parameter starts.
  static at::Tensor one_rank_view(const at::Tensor& master, const Member& m) {
    return master.narrow(0, m.offset, m.numel).view(m.shape);
  }
};

}  // namespace rh::sharding
