// Strategy `fsdp`: fully sharded data parallel, per parameter, as PyTorch's
// FSDP2 `fully_shard` does it (configuration keys: FsdpConfig.hpp).
//
// The layout. Every trainable parameter the strategy manages is sharded
// along dim 0 over the S ranks of its *shard group* (S = the world for
// full_shard and shard_grad_op, the node's ranks for hybrid_shard, 1 for
// no_shard): with c = ceil(rows / S), shard index i holds rows
// [i c, (i + 1) c) (the last ones zero-padded), as a float32 master the
// optimizer updates under the parameter's own name (rh_OptimParam
// full_shape / full_offset say where). Parameters are grouped by *unit*
// (the model's units; auto_wrap merges small neighbours): a unit's shards
// of every member lie one after the other in a rank *block*, so one
// all-gather makes the unit whole and one reduce-scatter reduces its
// gradients:
//   block of shard i = [member 0 rows of i | member 1 rows of i | ...]
//   all-gather output = [block 0 | block 1 | ... | block S-1]
//
// One step:
//   forward    before a unit's forward its block is all-gathered (in
//              param_dtype) into the parameters' storage (restored for it,
//              Model_RestoreParamStorage), the next forward_prefetch units'
//              gathers issued behind it; after its forward the unit is
//              resharded as reshard_after_forward says: true (full_shard,
//              hybrid_shard) frees the storage (resized to 0: what autograd
//              saved of it shows no memory until restored); false
//              (shard_grad_op) keeps it whole until after backward; N keeps
//              a 1/N piece of the gathered unit so that the backward
//              all-gather runs over N ranks only.
//   backward   before a unit's backward (a hook on its output's gradient) it
//              is gathered again, the next backward_prefetch units (in
//              backward order) behind it, never more than 1 + prefetch
//              units whole at once (a prefetch waits until a unit is freed);
//              after its backward the unit's gradients are copied (/ world)
//              into a flat buffer in reduce_dtype, released, and
//              reduce-scattered over the shard group (one in flight while
//              the next unit computes), then all-reduced across the
//              replicas (hybrid_shard, no_shard), into the float32 sharded
//              gradient the optimizer reads; its storage is freed.
//   accumulation (accumulative_counts) backward passes that do not end the
//              window do not communicate: the full gradients accumulate in
//              the parameters (FSDP2's set_requires_gradient_sync(False));
//              the last one reduces them.
//   after the optimizer step, units that are never freed (no_shard, and the
//              root unit of tied parameters) get their new values
//              (all-gathered, or copied when S = 1).
//
// Frozen parameters (model.frozen) and ignored_modules' parameters are in
// no unit: whole on every rank, never communicated, never in the optimizer
// (an ignored parameter's gradient is dropped with the others after each
// step). A unit mixing frozen and trainable parameters shards only the
// trainable ones. With param_dtype other than float32 every parameter,
// these too, is cast to it (the forward mixes them).
//
// One rank (Comm_Size(world) == 1), whatever the sharding_strategy: the
// shard group is that rank, every unit stays whole (no gather, no free, no
// unit callbacks) and nothing is communicated (no collective at all, no
// flat reduce buffer, no fsdp/* metric). With float32 param_dtype each
// parameter *is* its piece of its unit's master block (Model_SetParamData to
// a view of it at Wrap: the optimizer's in-place update is the parameter's
// update, nothing is copied back) and each gradient, when ready, is copied
// straight into its piece of the unit's grad (a memcpy; added there on
// later micro-batches of a window: the float32 sums autograd would make in
// the parameter, in the same order) and released: the arithmetic of the
// single strategy, bit for bit. With bf16 / fp16 the gradients accumulate
// in the parameters as on N ranks and are cast into the float32 grad at the
// window's end, and the masters are cast back into the parameters after the
// step (real work, not communication); reduce_dtype, the dtype of a
// reduction, has no effect. The layout (masters, optimizer state,
// checkpoint shards) is the same, so a checkpoint moves to and from N
// ranks as any other.
//
// Checkpoints: every rank writes its optimizer state and its masters
// (sharded_checkpoint). state_dict_type full: rank 0 writes the whole model,
// gathered one unit at a time through UnitParams (no rank holds more than
// one unit whole for it); sharded: the trainable parameters only as the
// ranks' shards (sharded_model_state), rebuilt from them at resume.
//
// Metrics of every optimizer step: fsdp/comm_bytes, fsdp/comm_ms (time the
// training thread spent issuing and waiting), fsdp/gather_wait_ms (of it,
// waiting for all-gathers: what prefetching did not hide),
// fsdp/peak_gathered_units and fsdp/peak_gathered_numel (units and
// elements of resharding units held whole at once), fsdp/param_bytes,
// fsdp/grad_bytes, fsdp/gather_buffer_bytes (what this rank held at the
// step's peak, see docs/fsdp.md "Memory").
//
// Internal to the plugin (not installed). The class is defined over several
// files: FsdpStrategy.cpp (lifecycle, layout, metrics, the vtable),
// FsdpGather.cpp (all-gathers, resharding), FsdpGradients.cpp
// (reduce-scatters, one rank), FsdpCheckpoint.cpp (UnitParams, StateExport,
// StateImport).
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "CommBuffers.hpp"
#include "FsdpConfig.hpp"
#include "rh/cpp/config.hpp"
#include "rh/rh_plugin.h"

namespace rh::fsdp {

using Clock = std::chrono::steady_clock;
using rh::sharding::BufferPool;
using rh::sharding::InFlight;

// One parameter's place in its unit's rank blocks.
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

enum class UnitState { Sharded, Gathering, Whole };

struct Unit {
  std::string name;                  // model unit names, '+'-joined when merged
  std::vector<int32_t> model_units;  // the model's units it covers (none: the root unit)
  std::vector<Member> members;
  int64_t block = 0;  // elements of one rank block
  int64_t numel = 0;  // elements of its parameters, whole
  // Never freed: no_shard, and the root unit (tied parameters, parameters
  // of no unit); it gets its new values after each optimizer step.
  bool persistent = false;
  at::Tensor master;  // [block] float32: this rank's shards
  at::Tensor grad;    // [block] float32: their averaged gradient
  UnitState state = UnitState::Whole;
  at::Tensor piece;  // reshard_after_forward N: this rank's 1/N of the gathered unit
  bool keep_piece = false;
  at::Tensor send, gathered, gathered_buf;  // gathered: a view of gathered_buf
  InFlight gather;
  bool gather_from_piece = false;
  // This backward.
  int backward_done = 0;  // model units whose POST_BACKWARD came
  bool ready = false;     // its gradients are complete
  at::Tensor flat, flat_buf, reduced;
  InFlight reduce;
};

class FsdpStrategy {
 public:
  explicit FsdpStrategy(const rh_CreateArgs& args);
  ~FsdpStrategy();
  void traits(rh_StrategyTraits& t) const;
  void setup_env(rh_SetupEnvArgs& args);
  // --estimate-memory (ABI 1.9), FsdpEstimate.cpp.
  void estimate_memory(const rh_MemoryEstimateArgs& args, rh_MemoryEstimate& out) const;
  void wrap(const rh_WrapArgs& args);
  void optimizer_params(const rh_OptimParamSink& sink);
  void before_backward(bool sync);
  void sync_gradients(bool sync);
  double reduce_grad_norm(double norm_type, double local);
  void after_optimizer_step();
  void unit_params(int32_t model_unit, rh_UnitParamsOp op);
  void state_export(rh_StateDict*);
  void state_import(const rh_StateDict*);
  void teardown();

 private:
  // FsdpStrategy.cpp: groups, units, metrics
  void make_groups();
  // A managed parameter as the layout sees it: at Wrap from the model, in
  // estimate_memory from its rh_ParamSize (the same units either way).
  struct ParamSpec {
    size_t param = 0;
    int64_t numel = 0;
    int64_t rows = 1;   // dim 0 (1 for a 0-d parameter)
    int32_t slot = -1;  // its model unit; -1: tied or in none (the root unit)
  };
  // The units of `managed` (registration order) over `shards` ranks:
  // members (no shapes), blocks, persistence; `unit_of_model` (model unit
  // -> index) and `root` (-1: none) filled.
  static std::vector<Unit> plan_units(const std::vector<ParamSpec>& managed, int32_t model_units,
                                      int64_t min_params, int64_t shards,
                                      std::vector<int>& unit_of_model, int& root);
  static void add_member(Unit& u, const ParamSpec& p, int64_t shards);
  // Whether parameter `name` lies in one of `modules` (ignored_modules),
  // marking in `used` each that matches; check_ignored_used refuses an
  // entry that matched no parameter (`example`: one parameter's name).
  static bool in_ignored_module(const std::vector<std::string>& modules, const std::string& name,
                                std::vector<char>& used);
  void check_ignored_used(const std::vector<std::string>& modules, const std::vector<char>& used,
                          const std::string& example) const;
  // A parameter's model unit for the layout: -1 (the root unit) when tied
  // or in no unit of the model's `model_units`.
  static int32_t slot_for(bool tied, int32_t unit, int32_t model_units);
  void build_units(const std::vector<ParamSpec>& managed);
  int fsdp_unit_of(int32_t model_unit) const;
  Unit* unit_for(int32_t model_unit);
  Unit* root_unit();
  void share_masters();
  rh_ParamInfo param_info(size_t i);
  void put_metric(const std::string& name, double value);
  void reset_peaks();
  void put_step_metrics();
  void log(rh_LogLevel level, const std::string& message);

  // FsdpGather.cpp: gathering, resharding, copies, collectives
  void scatter_to_params(Unit& u, const at::Tensor& flat);
  void blocks_from_params(Unit& u, const at::Tensor& flat, int32_t only_slot = kEverySlot);
  void params_from_masters(Unit& u);
  void start_gather(Unit& u, bool for_forward);
  void finish_gather(Unit& u);
  void keep_piece_of(Unit& u, const at::Tensor& flat);
  void set_piece(Unit& u, at::Tensor piece);
  void free_params(Unit& u);
  void reshard_after_forward(Unit& u);
  void prefetch(int from, int direction);
  static rh_Error* on_unit(void* self, int32_t unit, rh_UnitPhase phase);
  void unit_event(int32_t model_unit, rh_UnitPhase phase);
  void collective_sync(rh_Comm* comm, at::Tensor& t, rh_ReduceOp op);
  void collective_broadcast(rh_Comm* comm, at::Tensor& t);

  // FsdpGradients.cpp: reducing, one rank
  void launch_ready();
  void launch_reduce(Unit& u);
  void finish_reduce(Unit& u);
  static void on_grad_ready(void* self, size_t index);
  void grad_ready(size_t index);
  void sync_alone(bool sync);

  // FsdpCheckpoint.cpp: loading from rank 0
  void adopt_from_root(Unit& u, int32_t slot);
  void broadcast_whole(int32_t slot);

  // Whole values (per member, any dtype) into this rank's shards.
  template <class Fn>
  void master_from(Unit& u, Fn whole) {
    at::NoGradGuard no_grad;
    u.master.zero_();
    for (const Member& m : u.members) {
      const int64_t v = m.valid(shard_index_);
      if (v > 0)
        u.master.narrow(0, m.offset, v)
            .copy_(whole(m).reshape({-1}).narrow(0, shard_index_ * m.len, v));
    }
  }

  bool alone() const { return world_size_ == 1; }

  void wait(InFlight& f) { f.wait(host_, comm_s_); }

  static int64_t elem(at::ScalarType t) { return static_cast<int64_t>(c10::elementSize(t)); }

  static double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

  // blocks_from_params' `only_slot` for every member.
  static constexpr int32_t kEverySlot = std::numeric_limits<int32_t>::min();

  const rh_HostApi* host_;
  rh_Context* context_;
  rh::Config node_;  // the `strategy:` map (valid until the instance is destroyed)
  FsdpConfig cfg_;
  at::ScalarType param_dtype_ = at::kFloat, reduce_dtype_ = at::kFloat;
  // One rank with float32 param_dtype: the parameters are views of the
  // masters, their gradients taken into `grad` as they are ready (place_:
  // per parameter, its unit and member; accumulating_: `grad` holds earlier
  // micro-batches of this window).
  bool alias_ = false, accumulating_ = false;
  std::vector<std::pair<int, int>> place_;
  std::string precision_keys_;  // the precision_keys trait ("" in float32)
  rh_Comm* world_ = nullptr;
  rh_Comm* shard_comm_ = nullptr;      // this rank's shard group (NULL: S = 1)
  rh_Comm* replicate_comm_ = nullptr;  // the ranks holding the same shards (NULL: none)
  rh_Comm* piece_comm_ = nullptr;      // reshard_after_forward N: this rank's group of N
  int64_t world_size_ = 1, rank_ = 0;
  int64_t shards_ = 1;       // S
  int64_t shard_index_ = 0;  // this rank's place in its shard group
  int64_t reshard_ = 1;      // reshard_after_forward, resolved to a group size
  at::Tensor world_size_tensor_;
  at::Device device_ = at::kCPU;
  rh_Model* model_ = nullptr;
  const rh_ModelApi* api_ = nullptr;
  std::vector<std::string> names_;
  std::vector<char> managed_;     // per parameter: in a unit (sharded or persistent)
  std::vector<int32_t> slot_of_;  // per parameter: the host's unit for it (-1: tied or none)
  std::vector<Unit> units_;
  std::vector<int> unit_of_model_;  // model unit -> index in units_ (-1: nothing managed)
  int root_unit_ = -1;
  bool sync_ = true;                 // this backward reduces
  bool accumulated_window_ = false;  // a backward of this window kept its full gradients
  size_t next_launch_ = 0;
  int backward_unit_ = -1;        // the unit whose backward runs (prefetches are retried from it)
  std::deque<size_t> in_flight_;  // units whose reduction is issued, oldest first
  int64_t live_units_ = 0, live_numel_ = 0;  // resharding units whole or being gathered
  int64_t peak_units_ = 0, peak_numel_ = 0;
  int64_t save_peak_numel_ = -1;
  int64_t largest_unit_numel_ = 0;
  int64_t unmanaged_numel_ = 0;  // frozen and ignored parameters (always whole)
  int64_t peak_full_grad_bytes_ = 0;
  int64_t piece_numel_ = 0, peak_piece_numel_ = 0;  // reshard_after_forward N: pieces kept
  int64_t comm_bytes_ = 0;
  double comm_s_ = 0, gather_wait_s_ = 0;
  BufferPool grad_pool_;    // flat reduce_dtype gradient buffers
  BufferPool gather_pool_;  // flat param_dtype all-gather outputs
};

}  // namespace rh::fsdp
