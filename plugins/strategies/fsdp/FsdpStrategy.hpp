// Strategy `fsdp`: fully sharded data parallel, per parameter, as PyTorch's
// FSDP2 `fully_shard` does it (configuration keys: FsdpConfig.hpp), and 2-D
// with `tensor_parallel` (torchtitan's FSDP x TP): the host splits the model
// by the plan over groups of consecutive ranks, and fsdp runs on the mesh's
// data-parallel group as its world (every "world" and "rank" below is that
// group's), sharding each rank's blocks as it shards whole parameters.
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

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "FsdpConfig.hpp"
#include "ShardLayouts.hpp"
#include "ShardedBlock.hpp"
#include "ShardingBase.hpp"
#include "TensorParallelMesh.hpp"
#include "rh/cpp/config.hpp"
#include "rh/rh_plugin.h"

namespace rh::fsdp {

using rh::sharding::InFlight;
// The layout: FSDP2's per-parameter row blocks (ShardLayouts.hpp).
using Layout = rh::sharding::RowBlocks;
// One parameter's place in its unit's rank blocks.
using Member = Layout::Member;

enum class UnitState { Sharded, Gathering, Whole };

// A unit is a block of the common layer (ShardedBlock.hpp): master and
// grad [block] float32 (this rank's shards and their averaged gradient);
// gather, the all-gather in param_dtype that makes it whole (from the
// shards over the shard group, or from the pieces over the piece group);
// reduce.flat [S * block] in reduce_dtype, reduce.out where the reduced
// block lands when it is not grad itself.
struct Unit : rh::sharding::ShardState {
  std::string name;                  // model unit names, '+'-joined when merged
  std::vector<int32_t> model_units;  // the model's units it covers (none: the root unit)
  std::vector<Member> members;
  int64_t block = 0;  // elements of one rank block
  int64_t numel = 0;  // elements of its parameters, whole
  // Never freed: no_shard, and the root unit (tied parameters, parameters
  // of no unit); it gets its new values after each optimizer step.
  bool persistent = false;
  UnitState state = UnitState::Whole;
  at::Tensor piece;  // reshard_after_forward N: this rank's 1/N of the gathered unit
  bool keep_piece = false;
  bool gather_from_piece = false;
  // This backward.
  int backward_done = 0;  // model units whose POST_BACKWARD came
  bool ready = false;     // its gradients are complete
};

class FsdpStrategy : private rh::sharding::ShardingBase {
 public:
  explicit FsdpStrategy(const rh_CreateArgs& args);
  ~FsdpStrategy();
  void traits(rh_StrategyTraits& t) const;
  void setup_env(rh_SetupEnvArgs& args);
  // --estimate-memory (ABI 1.9), FsdpEstimate.cpp.
  void estimate_memory(const rh_MemoryEstimateArgs& args, rh_MemoryEstimate& out) const;
  // ABI 1.11: `tensor_parallel: {size, plan}` (TensorParallelMesh.hpp), 2-D:
  // the strategy's world is the data-parallel group of the mesh, each
  // parameter the host hands it a tensor-parallel block it shards by rows.
  void tensor_parallel_plan(rh_TensorParallelPlanArgs& args) const { mesh_.fill(args); }
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
  // FsdpEstimate.cpp: one data-parallel replica's estimate.
  void estimate_replica(const rh_MemoryEstimateArgs& args, rh_MemoryEstimate& out) const;

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
  void reset_peaks();
  void put_step_metrics();

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
  void collective_sync(rh_Comm* comm, at::Tensor& t, rh_ReduceOp op, bool count_bytes = false);
  void collective_broadcast(rh_Comm* comm, at::Tensor& t, bool count_bytes = false);

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
    Layout::master_from(u.master, u.members, shard_index_, u.block, whole);
  }

  static int64_t elem(at::ScalarType t) { return static_cast<int64_t>(c10::elementSize(t)); }

  // blocks_from_params' `only_slot` for every member.
  static constexpr int32_t kEverySlot = std::numeric_limits<int32_t>::min();

  rh::Config node_;  // the `strategy:` map (valid until the instance is destroyed)
  FsdpConfig cfg_;
  rh::strategies::TensorParallelMesh mesh_;  // size 1: no tensor parallelism
  at::ScalarType param_dtype_ = at::kFloat, reduce_dtype_ = at::kFloat;
  // One rank with float32 param_dtype: the parameters are views of the
  // masters, their gradients taken into `grad` as they are ready (place_:
  // per parameter, its unit and member; accumulating_: `grad` holds earlier
  // micro-batches of this window).
  bool alias_ = false, accumulating_ = false;
  std::vector<std::pair<int, int>> place_;
  std::string precision_keys_;         // the precision_keys trait ("" in float32)
  rh_Comm* shard_comm_ = nullptr;      // this rank's shard group (NULL: S = 1)
  rh_Comm* replicate_comm_ = nullptr;  // the ranks holding the same shards (NULL: none)
  rh_Comm* piece_comm_ = nullptr;      // reshard_after_forward N: this rank's group of N
  int64_t shards_ = 1;                 // S
  int64_t shard_index_ = 0;            // this rank's place in its shard group
  int64_t reshard_ = 1;                // reshard_after_forward, resolved to a group size
  at::Device device_ = at::kCPU;
  std::vector<char> managed_;     // per parameter: in a unit (sharded or persistent)
  std::vector<int32_t> slot_of_;  // per parameter: the host's unit for it (-1: tied or none)
  std::vector<Unit> units_;
  std::vector<int> unit_of_model_;  // model unit -> index in units_ (-1: nothing managed)
  int root_unit_ = -1;
  bool sync_ = true;                 // this backward reduces
  bool accumulated_window_ = false;  // a backward of this window kept its full gradients
  size_t next_launch_ = 0;
  int backward_unit_ = -1;  // the unit whose backward runs (prefetches are retried from it)
  int64_t live_units_ = 0, live_numel_ = 0;  // resharding units whole or being gathered
  int64_t peak_units_ = 0, peak_numel_ = 0;
  int64_t save_peak_numel_ = -1;
  int64_t largest_unit_numel_ = 0;
  int64_t unmanaged_numel_ = 0;  // frozen and ignored parameters (always whole)
  int64_t peak_full_grad_bytes_ = 0;
  int64_t piece_numel_ = 0, peak_piece_numel_ = 0;  // reshard_after_forward N: pieces kept
  double gather_wait_s_ = 0;                        // of comm_.seconds(), waiting for all-gathers
  // grad_pool_: flat reduce_dtype gradient buffers; gather_pool_: flat
  // param_dtype all-gather outputs; in_flight_: units whose reduction is
  // issued (ShardingBase).
};

}  // namespace rh::fsdp
