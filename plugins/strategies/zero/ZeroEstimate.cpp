// --estimate-memory (ABI 1.9): what one rank keeps, from the same groups
// Wrap cuts (plan_groups over the parameters' sizes) and the same rules the
// pools, the gathers and the prefetch follow (ZeroGradients.cpp,
// ZeroGather.cpp); docs/zero.md, "Memory", says what each term is. The
// figures match the strategy's own zero/param_bytes, zero/grad_bytes and
// zero/gather_buffer_bytes metrics (EstimateMemoryTest).
#include <algorithm>
#include <map>

#include "ZeroStrategy.hpp"

namespace rh::zero {
namespace {

// The flat gradient buffers in use at once over one backward, replayed as
// grad_ready and launch run (ZeroGradients.cpp) with gradients arriving in
// reverse registration order (as the groups are cut): a group takes a
// buffer at its first gradient, groups launch in order once complete, and
// a launched group's buffer goes back at once, or with overlap_comm when
// the next one launches. A group that fills all backward long (stage 3's
// persistent one: norms, biases, the embedding) holds its buffer
// throughout.
int64_t flat_buffers_in_use(const std::vector<ParamSpec>& trainable,
                            const std::vector<Group>& groups, bool overlap) {
  std::map<size_t, size_t> group_of;
  std::vector<size_t> missing(groups.size());
  for (size_t k = 0; k < groups.size(); ++k) {
    missing[k] = groups[k].members.size();
    for (const Member& m : groups[k].members) group_of[m.param] = k;
  }
  std::vector<char> open(groups.size(), 0);
  int64_t held = 0, peak = 0;
  size_t next_launch = 0, in_flight = 0;
  for (auto p = trainable.rbegin(); p != trainable.rend(); ++p) {
    const size_t k = group_of.at(p->param);
    if (!open[k]) {
      open[k] = 1;
      peak = std::max(peak, ++held);
    }
    --missing[k];
    while (next_launch < groups.size() && missing[next_launch] == 0) {
      ++next_launch;
      ++in_flight;
      while (in_flight > (overlap ? 1u : 0u)) {
        --in_flight;
        --held;
      }
    }
  }
  return peak;
}

}  // namespace

void ZeroStrategy::estimate_memory(const rh_MemoryEstimateArgs& args,
                                   rh_MemoryEstimate& out) const {
  const int64_t world = args.world_size;
  const int64_t w = working_ == at::kFloat ? 4 : 2;  // bytes of the working dtype
  std::vector<ParamSpec> specs;
  int64_t all = 0, frozen = 0, trainable = 0, largest_param = 0;
  for (size_t i = 0; i < args.num_params; ++i) {
    const rh_ParamSize& p = args.params[i];
    if (p.element_size != 4)
      throw rh::Exception(RH_ERROR_UNIMPLEMENTED,
                          "strategy 'zero': parameter '" + std::string(p.name.data, p.name.size) +
                              "' is not float32; the model must be built in float32");
    all += p.numel;
    if (p.requires_grad == 0) {
      frozen += p.numel;
      continue;
    }
    specs.push_back({i, p.numel, p.unit, p.tied != 0});
    trainable += p.numel;
    largest_param = std::max(largest_param, p.numel);
  }
  if (specs.empty())
    throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                        "strategy 'zero': the model has no trainable parameter");
  ZeroOptimizationConfig z = cfg_.zero_optimization;  // resolve_sizes fills the copy
  resolve_sizes(specs, z);
  const std::vector<Group> groups = plan_groups(specs, stage_, z, world);
  out.optimizer_element_size = 4;  // the float32 masters
  if (world == 1) {
    // One rank: no flat buffers, no collectives, nothing freed; in float32
    // the parameters are views of the masters.
    out.param_bytes = static_cast<uint64_t>(w * all);
    if (w != 4) out.master_bytes = static_cast<uint64_t>(4 * trainable);
    out.grad_bytes = static_cast<uint64_t>(4 * trainable);
    out.optimizer_elements = static_cast<uint64_t>(trainable);
    return;
  }
  int64_t chunks = 0, largest = 0, largest_chunk = 0, persistent = 0;
  for (const Group& g : groups) {
    chunks += g.chunk;
    largest = std::max(largest, g.chunk * world);
    largest_chunk = std::max(largest_chunk, g.chunk);
    if (!g.sharded) persistent += g.numel;
    // This rank's part of the group, padding left out (optimizer_params).
    out.optimizer_elements +=
        static_cast<uint64_t>(std::clamp<int64_t>(g.numel - args.rank * g.chunk, 0, g.chunk));
  }
  const auto num_groups = static_cast<int64_t>(groups.size());
  // A pool buffer (the largest group whole), and in bf16/fp16 the working
  // copy of a master chunk that is sent with it (ZeroGather.cpp).
  const int64_t gather_buffer = w * largest + (w != 4 ? w * largest_chunk : 0);
  const bool window = args.accumulation > 1;
  out.master_bytes = static_cast<uint64_t>(4 * chunks);
  // Gradients: this rank's float32 chunks, and the pool's flat buffers (each
  // the largest group, N chunks), as many as were in use at once: stage 1
  // in bf16/fp16 keeps every group's through an accumulation window.
  const int64_t flat = stage_ == 1 && w != 4 && window
                           ? num_groups
                           : flat_buffers_in_use(specs, groups, z.overlap_comm);
  out.grad_bytes = static_cast<uint64_t>(4 * chunks + flat * 4 * largest);
  // Autograd's own gradients: each is copied into its flat buffer and
  // released when ready (a float32 copy of it in bf16/fp16), except at stage
  // 1 in float32 inside a window, where they all wait for its last backward.
  if (stage_ == 1 && w == 4 && window) {
    out.grad_bytes += static_cast<uint64_t>(4 * trainable);
  } else {
    out.backward_grad_bytes = static_cast<uint64_t>(largest_param * (w + (w != 4 ? 4 : 0)));
    out.grad_bytes += out.backward_grad_bytes;
  }
  // Stage 2 and 3 inside a window reduce-scatter into a chunk of their own.
  if (stage_ >= 2 && window && z.reduce_scatter)
    out.comm_bytes += static_cast<uint64_t>((z.overlap_comm ? 2 : 1) * 4 * largest_chunk);
  if (stage_ < 3) {
    // Every parameter whole in the working dtype; after the step the groups
    // are all-gathered one at a time through one pool buffer.
    out.param_bytes = static_cast<uint64_t>(w * all);
    out.comm_bytes += static_cast<uint64_t>(gather_buffer);
    return;
  }
  // Stage 3: the frozen and persistent parameters whole; the units' sharded
  // groups whole only around their forward and backward, with the next
  // units prefetched while they fit stage3_prefetch_bucket_size and
  // stage3_max_live_parameters (ZeroStrategy::prefetch).
  out.param_bytes = static_cast<uint64_t>(w * (frozen + persistent));
  std::map<int32_t, int64_t> unit_numel, unit_groups;
  for (const Group& g : groups)
    if (g.sharded) {
      unit_numel[g.unit] += g.numel;
      ++unit_groups[g.unit];
    }
  int64_t peak = 0, peak_groups = 1;  // after the step: the persistent groups, one at a time
  for (const auto& [unit, numel] : unit_numel)
    for (const int direction : {1, -1}) {
      int64_t live = numel, in_flight = unit_groups[unit];
      int64_t budget = z.stage3_prefetch_bucket_size;
      for (int32_t v = unit + direction; v >= 0 && v < args.num_units; v += direction) {
        const auto found = unit_numel.find(v);
        if (found == unit_numel.end()) continue;
        if (found->second > budget || live + found->second > z.stage3_max_live_parameters) break;
        budget -= found->second;
        live += found->second;
        in_flight += unit_groups[v];
      }
      peak = std::max(peak, live);
      peak_groups = std::max(peak_groups, in_flight);
    }
  out.gathered_bytes = static_cast<uint64_t>(w * peak);
  out.comm_bytes += static_cast<uint64_t>(peak_groups * gather_buffer);
}

}  // namespace rh::zero
