// --estimate-memory (ABI 1.9): what one rank keeps, from the same units Wrap
// cuts (plan_units over the parameters' sizes) and one forward and backward
// replayed through the rules of the gathers, the prefetch and the pools
// (FsdpGather.cpp, FsdpGradients.cpp); docs/fsdp.md, "Memory", says what each
// term is. The figures match the strategy's own fsdp/param_bytes,
// fsdp/grad_bytes and fsdp/gather_buffer_bytes metrics (EstimateMemoryTest).
#include <algorithm>

#include "FsdpStrategy.hpp"

namespace rh::fsdp {
namespace {

// One forward and one backward of the units, as unit_event runs them: what
// is whole at most at once, and the gather buffers in use at once.
struct Replay {
  Replay(const std::vector<Unit>& units, const std::vector<int>& unit_of_model,
         const FsdpConfig& cfg)
      : units_(units), unit_of_model_(unit_of_model), cfg_(cfg), state_(units.size(), kSharded) {}

  void run() {
    const auto model_units = static_cast<int32_t>(unit_of_model_.size());
    for (int32_t m = 0; m < model_units; ++m) {
      const int f = unit_of_model_[static_cast<size_t>(m)];
      if (f < 0) continue;
      start(f);
      prefetch(f, 1);
      finish(f);
      if (m == units_[static_cast<size_t>(f)].model_units.back() && cfg_.reshard_after_forward != 1)
        free(f);
    }
    std::vector<int> done(units_.size(), 0);
    for (int32_t m = model_units - 1; m >= 0; --m) {
      const int f = unit_of_model_[static_cast<size_t>(m)];
      if (f < 0) continue;
      start(f);
      prefetch(f, -1);
      finish(f);
      if (++done[static_cast<size_t>(f)] <
          static_cast<int>(units_[static_cast<size_t>(f)].model_units.size()))
        continue;
      free(f);
      prefetch(f, -1);
    }
  }

  int64_t peak_numel = 0;    // elements of the units whole or being gathered
  int64_t peak_buffers = 0;  // gather pool buffers in use

 private:
  enum State { kSharded, kGathering, kWhole };

  bool persistent(int f) const { return units_[static_cast<size_t>(f)].persistent; }
  void start(int f) {
    if (persistent(f) || state_[static_cast<size_t>(f)] != kSharded) return;
    state_[static_cast<size_t>(f)] = kGathering;
    ++live_units_;
    live_numel_ += units_[static_cast<size_t>(f)].numel;
    peak_numel = std::max(peak_numel, live_numel_);
    peak_buffers = std::max(peak_buffers, ++buffers_);
  }
  void finish(int f) {
    if (persistent(f) || state_[static_cast<size_t>(f)] == kWhole) return;
    if (state_[static_cast<size_t>(f)] == kSharded) start(f);
    state_[static_cast<size_t>(f)] = kWhole;
    --buffers_;
  }
  void free(int f) {
    if (persistent(f)) return;
    if (state_[static_cast<size_t>(f)] == kGathering) finish(f);
    if (state_[static_cast<size_t>(f)] != kWhole) return;
    state_[static_cast<size_t>(f)] = kSharded;
    --live_units_;
    live_numel_ -= units_[static_cast<size_t>(f)].numel;
  }
  void prefetch(int from, int direction) {
    const int64_t count = direction > 0 ? cfg_.forward_prefetch : cfg_.backward_prefetch;
    const bool capped = direction < 0 || cfg_.reshard_after_forward != 1;
    int64_t seen = 0;
    for (int v = from + direction; v >= 0 && v < static_cast<int>(units_.size()) && seen < count;
         v += direction) {
      if (persistent(v)) continue;
      ++seen;
      if (state_[static_cast<size_t>(v)] != kSharded) continue;
      if (capped && live_units_ >= 1 + count) return;
      start(v);
    }
  }

  const std::vector<Unit>& units_;
  const std::vector<int>& unit_of_model_;
  const FsdpConfig& cfg_;
  std::vector<State> state_;
  int64_t live_units_ = 0, live_numel_ = 0, buffers_ = 0;
};

}  // namespace

void FsdpStrategy::estimate_memory(const rh_MemoryEstimateArgs& args,
                                   rh_MemoryEstimate& out) const {
  if (mesh_.size() == 1) return estimate_replica(args, out);
  std::vector<rh_ParamSize> blocks;
  estimate_replica(mesh_.replica_of(args, blocks, "strategy 'fsdp'"), out);
}

void FsdpStrategy::estimate_replica(const rh_MemoryEstimateArgs& args,
                                    rh_MemoryEstimate& out) const {
  FsdpConfig cfg = cfg_;  // resolve() fills the copy, as SetupEnv does the strategy's
  cfg.resolve(node_, args.world_size, args.local_world_size);
  const int64_t shards = cfg.shard_group_size;
  const auto P = static_cast<int64_t>(c10::elementSize(param_dtype_));
  const auto Rd = static_cast<int64_t>(c10::elementSize(reduce_dtype_));
  std::vector<ParamSpec> managed;
  std::vector<char> ignored_used(cfg.ignored_modules.size(), 0);
  int64_t unmanaged = 0, managed_numel = 0;
  for (size_t i = 0; i < args.num_params; ++i) {
    const rh_ParamSize& p = args.params[i];
    const std::string name(p.name.data, p.name.size);
    if (p.element_size != 4)
      throw rh::Exception(RH_ERROR_UNIMPLEMENTED,
                          "strategy 'fsdp': parameter '" + name +
                              "' is not float32; the model must be built in float32");
    const bool ignored = in_ignored_module(cfg.ignored_modules, name, ignored_used);
    if (p.requires_grad == 0 || ignored) {
      unmanaged += p.numel;
      continue;
    }
    managed.push_back({i, p.numel, p.rows, slot_for(p.tied != 0, p.unit, args.num_units)});
    managed_numel += p.numel;
  }
  if (args.num_params > 0)  // the refusal Wrap gives for an entry that matches nothing
    check_ignored_used(cfg.ignored_modules, ignored_used,
                       std::string(args.params[0].name.data, args.params[0].name.size));
  if (managed.empty())
    throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                        "strategy 'fsdp': the model has no trainable parameter to shard");
  std::vector<int> unit_of_model;
  int root = -1;
  const std::vector<Unit> units =
      plan_units(managed, args.num_units, cfg.min_params, shards, unit_of_model, root);
  const int64_t shard = args.rank % shards;
  int64_t blocks = 0, persistent = 0, largest = 0, largest_numel = 0, pieces = 0;
  for (const Unit& u : units) {
    blocks += u.block;
    largest = std::max(largest, shards * u.block);
    largest_numel = std::max(largest_numel, u.numel);
    if (u.persistent) persistent += u.numel;
    // reshard_after_forward N (between 1 and the shard group): each unit
    // keeps its piece from its forward to its backward gather.
    if (!u.persistent && cfg.reshard_after_forward > 1 && cfg.reshard_after_forward < shards)
      pieces += shards * u.block / cfg.reshard_after_forward;
    for (const Member& m : u.members)
      out.optimizer_elements += static_cast<uint64_t>(m.valid(shard));
  }
  out.optimizer_element_size = 4;  // the float32 masters
  if (args.world_size == 1) {
    // One rank: every unit whole, no pool; in float32 the parameters are
    // views of the masters, in lower precision the full gradients wait in
    // the parameters until the sync.
    out.param_bytes = static_cast<uint64_t>(P * (unmanaged + managed_numel));
    if (P != 4) out.master_bytes = static_cast<uint64_t>(4 * blocks);
    out.grad_bytes = static_cast<uint64_t>(4 * blocks + (P != 4 ? P * managed_numel : 0));
    if (args.accumulation == 1 && P != 4)
      out.backward_grad_bytes = static_cast<uint64_t>(P * managed_numel);
    return;
  }
  Replay replay(units, unit_of_model, cfg);
  replay.run();
  // Whole in param_dtype: the frozen, ignored and persistent parameters,
  // the pieces kept after forward, and (gathered) the units whole at most
  // at once; the float32 masters: this rank's blocks.
  out.param_bytes = static_cast<uint64_t>(P * (unmanaged + persistent + pieces));
  out.gathered_bytes = static_cast<uint64_t>(P * replay.peak_numel);
  out.master_bytes = static_cast<uint64_t>(4 * blocks);
  // Gradients: the float32 blocks, the reduce pool (one buffer per unit
  // reduced and one in flight), and the full gradients of the unit being
  // copied in (every managed one when a window accumulates them).
  const int64_t reduce_buffers = std::min<int64_t>(2, static_cast<int64_t>(units.size()));
  const int64_t full = args.accumulation > 1 ? P * managed_numel : P * largest_numel;
  out.grad_bytes = static_cast<uint64_t>(4 * blocks + reduce_buffers * Rd * largest + full);
  if (args.accumulation == 1) out.backward_grad_bytes = static_cast<uint64_t>(full);
  // The gather pool: the buffers in use at once, and after the step one for
  // the persistent units' new values.
  const int64_t gather_buffers = std::max<int64_t>(replay.peak_buffers, root >= 0 ? 1 : 0);
  out.comm_bytes = static_cast<uint64_t>(gather_buffers * P * largest);
}

}  // namespace rh::fsdp
